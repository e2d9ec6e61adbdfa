"""The shell tool: one command, checked, then run inside the OS sandbox, bounded in time
and output.

The order is the design: the command is parsed and checked (tools/shell/plan.py), the
owner is asked when the policy or the turn's taint says so (tools/shell/network.py, which
also says whether the sandbox has the network), and the checked script runs in the sandbox
(tools/sandbox/sandboxes.py) with a small environment — never the runtime's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tools.background import despite_a_cut
from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.boundaries import INBOX, inbox_folder, make_placeholders
from tools.config import ShellSettings
from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import Launch, Limits, Sandbox, SandboxSpec
from tools.shell.network import gate
from tools.shell.plan import plan_command
from tools.taint import FileProvenance, written_since

# The child gets a small, known environment: API keys and bot tokens in ours stay out of it.
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ")
# Past the end of a run, unread output is dropped: a command cannot fill our memory.
_READ_LIMIT_FACTOR = 4
_STREAM_LIMIT = 65_536  # asyncio's default buffer of a subprocess pipe
# After a timeout's kill, how long the command (or its supervisor, ending what it started)
# may take to be gone before its first process is SIGKILLed.
_STOP_GRACE_S = 5.0
_PATH_WORDS = re.compile(r"[\w.@+-]*[\w@+-]/?[\w./@+-]*")  # words that may name a file


def clip_output(text: str, limit: int, unread: int = 0) -> str:
    """Keep the head and the tail of long output; the middle is where least is lost.
    `unread`: bytes already dropped from the middle while reading."""
    if len(text) <= limit and not unread:
        return text
    head = limit * 2 // 3
    tail = limit - head
    dropped = max(len(text) - head - tail, 0) + unread
    return f"{text[:head]}\n[... {dropped} characters elided ...]\n{text[-tail:]}"


class ShellTool(FunctionTool):
    def __init__(
        self,
        policy: SecurityPolicy,
        settings: ShellSettings,
        sandbox: Sandbox,
        *,
        network: bool = True,
        sandbox_off_by_owner: bool = False,
        provenance: FileProvenance | None = None,
    ) -> None:
        self._policy = policy
        self._provenance = provenance  # which files a tainted turn's commands wrote
        self._settings = settings
        self._sandbox = sandbox
        self._network = network
        self._unsandboxed_ok = sandbox_off_by_owner
        # Its effects cannot be known before it runs nor checked after (an append, a
        # request): journalled, never repeated by a replayed turn. `writes` stays False:
        # under read_only it runs, the policy and the sandbox keeping it from writing.
        super().__init__(self.shell, name="shell", effects=True, repeat_safe=False)

    async def shell(self, call: ToolCallContext, command: str) -> ToolResult:
        """Run a shell command in the workspace; returns its exit code and output (stdout
        and stderr together)."""
        refusal = self.unconfined_refusal()
        if refusal:
            return ToolResult.error(refusal)
        if not call.owner_private and self._policy.can_write:  # read_only: nothing is made
            make_placeholders(self._policy.paths, self._policy.owner_private)
        policy = self._policy.for_call(call)
        try:
            plan = plan_command(command, policy, network=self._network)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        passage = gate(
            "shell",
            command,
            autonomy=policy.autonomy,
            asks=plan.ask,
            rules=plan.rules,
            covers=plan.covers,
            network=plan.network,
            taint=call.taint,
            sandbox_network=self._network,
        )
        request = passage.request
        if request is not None and not await call.ask(request):
            return ToolResult.error(
                f"Not run: the owner did not approve it ({request.reason}). Say what you "
                "wanted to do, or do it with the allowed commands."
            )
        argv = ["/bin/sh", "-c", plan.script]
        await self._note_untrusted_reads(command, call)
        # Under full nothing asks, so in someone else's turn the files that shape every
        # prompt are read-only in the sandbox.
        someone_elses = not call.owner_private and policy.autonomy == "full"
        frozen = policy.identity_paths if someone_elses else ()
        started = time.time() - 1  # a file's ctime may be a second behind the clock
        try:
            return await self.execute(argv, policy, network=passage.online, frozen=frozen)
        finally:  # a command cut off has written what it wrote: recorded all the same
            if call.writer and self._provenance is not None:  # someone else's words
                await despite_a_cut(self._record_written(started, call.writer))

    async def _record_written(self, since: float, writer: str) -> None:
        """The files changed since the command began hold `writer`'s words: recorded, so
        whoever reads one later is tainted by it."""
        assert self._provenance is not None
        written = await asyncio.to_thread(written_since, self._policy.workspace, since)
        await self._provenance.record(written, writer)

    async def _note_untrusted_reads(self, command: str, call: ToolCallContext) -> None:
        """A command whose words name a file someone else's words are in (another chat's
        upload, a file a tainted turn wrote) taints the turn, as file_read does. Words only:
        a glob or a path built at run time is not seen (the sandbox, not this, is the
        boundary; see the table in docs/security.md)."""
        workspace = self._policy.workspace
        own = inbox_folder(call.chat_key) if call.owner_private else None
        for word in dict.fromkeys(_PATH_WORDS.findall(command)[:64]):
            where = word.lstrip("./")
            if where.startswith(f"{INBOX}/") and (own is None or not where.startswith(own + "/")):
                call.taint.read(f"{where}, a file someone else sent")
                continue
            path = workspace / where
            if self._provenance is not None and where and path.is_file():
                source = await self._provenance.source_of(path)
                if source:
                    call.taint.read(f"{where}, written by a turn {source}")

    @property
    def sandbox_kind(self) -> str:
        return self._sandbox.kind

    def unconfined_refusal(self) -> str | None:
        """Why nothing may run (autonomy full without an OS sandbox the owner accepted)."""
        unconfined = self._sandbox.kind == "none" and not self._unsandboxed_ok
        if self._policy.autonomy == "full" and unconfined:
            return (
                "Refused: autonomy is full but no OS sandbox is available "
                f"({self._sandbox.reason}); the owner can install bubblewrap, or set "
                '[security] sandbox = "off" to accept running commands unconfined'
            )
        return None

    async def execute(
        self,
        argv: Sequence[str],
        policy: SecurityPolicy,
        *,
        network: bool | None = None,
        frozen: tuple[Path, ...] = (),
    ) -> ToolResult:
        """Run `argv` as it is, no shell, in the sandbox with the shell's limits: the
        shell's checked script, or a skill tool's words. `policy` is the call's own
        (SecurityPolicy.for_call): what it forbids inside the workspace is masked.
        `network`: whether the sandbox has it (tools/shell/network.py's gate decides for the
        shell); None: as `[security] sandbox_network` says. A sandbox that cannot take
        the network away (Landlock before ABI 4, none) leaves it as that setting says:
        there the shell's questions are the only line."""
        online = self._network
        if network is not None and self._sandbox.cuts_network:
            online = network and self._network
        return await self._run(self._launch(argv, policy, online, frozen))

    def _launch(
        self, argv: Sequence[str], policy: SecurityPolicy, network: bool, frozen: tuple[Path, ...]
    ) -> Launch:
        env = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
        inside = tuple(p for p in policy.forbidden_paths if policy.workspace in p.parents)
        spec = SandboxSpec(
            policy.workspace,
            writable=policy.can_write,
            network=network,
            masked=inside,
            frozen=frozen,
            limits=Limits(
                cpu_s=math.ceil(self._settings.timeout_s) + 1, memory_mb=self._settings.memory_mb
            ),
        )
        return self._sandbox.launch(list(argv), spec, env)

    async def _run(self, launch: Launch) -> ToolResult:
        try:
            process, exited = await start(launch)
        except (OSError, subprocess.SubprocessError) as exc:
            if launch.cleanup:
                launch.cleanup()
            return ToolResult.error(f"The command could not start: {exc}")
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                output = await self._read(process, exited, launch)
        except TimeoutError:
            await _stop(process, launch)
            return ToolResult.error(
                f"Timed out after {self._settings.timeout_s:g} s; the command was stopped"
            )
        except asyncio.CancelledError:  # gone before what it wrote is looked for
            await despite_a_cut(_stop(process, launch))
            raise
        finally:
            if launch.cleanup:
                launch.cleanup()
        head, tail, unread = output
        text = clip_output(
            (head + tail).decode("utf-8", errors="replace"), self._settings.max_output_chars, unread
        )
        code = process.returncode
        result = f"exit code: {code}\n{text}" if text else f"exit code: {code} (no output)"
        return ToolResult(ok=code == 0, output=result)

    async def _read(
        self, process: asyncio.subprocess.Process, exited: asyncio.Future[None], launch: Launch
    ) -> tuple[bytes, bytes, int]:
        """The output until the command ends: when its first process has exited, what it
        left running (holding the output open or not) is ended too."""
        reading = asyncio.ensure_future(self._drain(process))
        try:
            await asyncio.wait((reading, exited), return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                launch.ended()
            output = await reading
        finally:
            reading.cancel()
        await process.wait()
        return output

    async def _drain(self, process: asyncio.subprocess.Process) -> tuple[bytes, bytes, int]:
        """The head and the tail of the output, each bounded, and how many bytes between
        them were drained unread: a command cannot fill the runtime's memory."""
        assert process.stdout is not None
        limit = self._settings.max_output_chars * _READ_LIMIT_FACTOR
        head, tail = bytearray(), bytearray()
        unread = 0
        while chunk := await process.stdout.read(65_536):
            room = limit - len(head)
            head += chunk[:room]
            tail += chunk[max(room, 0) :]
            if len(tail) > limit:
                unread += len(tail) - limit
                del tail[: len(tail) - limit]
        return bytes(head), bytes(tail), unread


async def _stop(process: asyncio.subprocess.Process, launch: Launch) -> None:
    """End a command that ran out of time, everything it started with it, and wait for
    it; output still coming is read and dropped, so that the pipe cannot hold it up."""
    if process.returncode is None:
        launch.kill(process.pid)

    async def finish() -> None:
        assert process.stdout is not None
        while await process.stdout.read(65_536):
            pass
        await process.wait()

    try:
        await asyncio.wait_for(finish(), _STOP_GRACE_S)
    except TimeoutError:  # a supervisor still at it (a fork bomb?): the tool must return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 1)


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The stream protocol, telling as soon as the first process exits (Process.wait
    also waits for the output to close, which a process left running can hold open)."""

    def __init__(self, exited: asyncio.Future[None], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_STREAM_LIMIT, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        super().process_exited()
        if not self._exited.done():
            self._exited.set_result(None)


async def start(launch: Launch) -> tuple[asyncio.subprocess.Process, asyncio.Future[None]]:
    """Start a sandbox launch: no stdin, stdout and stderr together, its own session; and
    a future done when its first process exits. The launch's descriptors are closed once
    the child holds them."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(exited, loop),
            *launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            preexec_fn=launch.preexec_fn,
            pass_fds=launch.pass_fds,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        launch.descriptors.close()
    return asyncio.subprocess.Process(transport, protocol, loop), exited
