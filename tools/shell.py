"""The shell tool: one command in the workspace, bounded in time and output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.config import ShellSettings
from tools.policy import PolicyError, SecurityPolicy

# The child gets a small, known environment: API keys and bot tokens in ours stay out of it.
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "TMPDIR")


def clip_output(text: str, limit: int) -> str:
    """Keep the head and the tail of long output; the middle is where least is lost."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... {dropped} characters elided ...]\n{text[-tail:]}"


class ShellTool(FunctionTool):
    def __init__(self, policy: SecurityPolicy, settings: ShellSettings) -> None:
        self._policy = policy
        self._settings = settings
        super().__init__(self.shell, name="shell")

    async def shell(self, call: ToolCallContext, command: str) -> ToolResult:
        """Run a shell command with the workspace as working directory and return its exit
        code and output (stdout and stderr together). Use it to inspect or change files,
        run programs and check the system.

        Args:
            command: The command line, e.g. `ls -la` or `grep -n TODO notes.md`.
        """
        try:
            self._policy.check_command(command)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        env = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
        env["HOME"] = str(self._policy.workspace)
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=self._policy.workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), self._settings.timeout_s)
        except TimeoutError:
            _kill_group(process)
            await process.wait()
            return ToolResult.error(
                f"Timed out after {self._settings.timeout_s:g} s; the command was stopped"
            )
        except asyncio.CancelledError:
            _kill_group(process)
            raise
        text = clip_output(
            output.decode("utf-8", errors="replace"), self._settings.max_output_chars
        )
        code = process.returncode
        result = f"exit code: {code}\n{text}" if text else f"exit code: {code} (no output)"
        return ToolResult(ok=code == 0, output=result)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the command and anything it started, not only the shell."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
