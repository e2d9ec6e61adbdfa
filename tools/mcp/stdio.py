"""A local MCP server: started inside the OS sandbox, spoken to over its stdin and stdout.

The SDK's own stdio client starts the program itself, with no way to hand it the sandbox's
launch (a preexec_fn for Landlock, descriptors for bubblewrap's copies of /etc) nor to read
the server's stderr, which may echo a secret and so must pass our scrubbed log. So the
process is started here, from `Sandbox.launch`, and only the framing is ours: one JSON-RPC
message per line, parsed and written by the SDK's own message types; the protocol above it
is the SDK's `Client`.

What the server sees (`server_spec`): the workspace as autonomy allows it (writable unless
read_only; the owner-private files, the whole inbox folder and the forbidden paths masked,
as in a turn that is not the owner's: a server serves every chat, and runs for days, so a
chat's folder made after it started is hidden too, inside the inbox folder made first if
missing), its own folder
`<home>/mcp/NAME` read-write as HOME and working folder, its program's folder and the
owner's `read_paths` read-only, `write_paths` read-write, and the network.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tools.base import ToolCallContext
from tools.boundaries import INBOX, make_placeholders
from tools.mcp.config import McpServerSettings, expand
from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import Launch, Limits, NoSandbox, Sandbox, SandboxSpec
from tools.sandbox.view import system_roots

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

log = logging.getLogger(__name__)

# The server's environment: these of ours, then its own `env`; never our keys and tokens.
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME")
MAX_LINE_BYTES = 32 * 1024 * 1024  # one message; a longer line ends the connection
_CPU_S = 7 * 24 * 3600  # a server runs for days: only a runaway one meets this
_EXIT_GRACE_S = 2.0  # after its stdin closes, before the server is killed
_STDERR_KEPT = 5  # the last lines of stderr, to say why a server stopped


class ServerError(RuntimeError):
    """A server that cannot be started or reached; the message says why, in one line."""


def server_launch(
    name: str,
    settings: McpServerSettings,
    *,
    own_folder: Path,
    policy: SecurityPolicy,
    sandbox: Sandbox,
) -> Launch:
    """How to start the server `name` (ServerError: its command is not found, a variable
    it names is not set, or the sandbox it asks for does not run here)."""
    env = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
    try:
        env |= expand(settings.env)
    except ValueError as exc:
        raise ServerError(str(exc)) from None
    program = shutil.which(settings.command, path=env.get("PATH"))
    if program is None:
        raise ServerError(f"{settings.command!r} is not found on PATH")
    if "/" not in settings.command and policy.workspace in Path(program).resolve().parents:
        # A folder of the PATH in the workspace (~/.local/bin, the workspace the home): the
        # model could have put that program there, to be given this server's variables.
        raise ServerError(
            f"{settings.command!r} is found in the workspace ({program}), where a model can "
            "write; name the program you mean by its full path"
        )
    own_folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    # A leading ~/ is the owner's home, as a shell would read it (no shell runs the server).
    argv = [program, *(os.path.expanduser(a) if a.startswith("~/") else a for a in settings.args)]
    if settings.sandbox and sandbox.kind == "none":
        raise ServerError(
            f"no OS sandbox runs here ({sandbox.reason}); install bubblewrap, or set "
            f"sandbox = false for [mcp.servers.{name}] to run it unconfined"
        )
    confine = sandbox if settings.sandbox else NoSandbox("off for this server")
    cwd = Path(settings.cwd).expanduser() if settings.cwd else own_folder
    if confine.kind == "bubblewrap":  # it changes into the workspace: change on from there
        argv = ["/usr/bin/env", "-C", str(cwd), *argv]
    launch = confine.launch(argv, server_spec(settings, own_folder, program, policy), env)
    return launch if confine.kind == "bubblewrap" else _in_folder(launch, cwd)


def server_spec(
    settings: McpServerSettings, own_folder: Path, program: str, policy: SecurityPolicy
) -> SandboxSpec:
    shared = policy.for_call(ToolCallContext(policy.workspace))  # as in a turn not the owner's
    inbox = policy.workspace / INBOX
    if policy.can_write:
        make_placeholders(shared.paths, shared.owner_private)
        with contextlib.suppress(OSError, PolicyError):  # a link there: masked as it is
            policy.paths.make_folder(INBOX)
    paths = [Path(p).expanduser() for p in settings.read_paths]
    masked = [p for p in shared.forbidden_paths if inbox not in p.parents]
    return SandboxSpec(
        policy.workspace,
        writable=policy.can_write,
        network=True,
        masked=(*masked, inbox),
        limits=Limits(cpu_s=_CPU_S, memory_mb=settings.memory_mb),
        reads=(*program_folders(program), *paths),
        writes=(own_folder, *(Path(p).expanduser() for p in settings.write_paths)),
        home=own_folder,
    )


def program_folders(program: str, *, follow: bool = True) -> list[Path]:
    """The folders a program needs to run, outside the system's: a venv's or node_modules'
    (`X/bin/tool`, `node_modules/.bin/tool`: X, node_modules), else its own folder; the
    same for the file a link of it points to and, for a script, for its interpreter."""
    system = system_roots()
    found = []
    for path in (Path(program), Path(os.path.realpath(program))):
        folder = path.parent.parent if path.parent.name in ("bin", ".bin") else path.parent
        if not any(folder == root or root in folder.parents for root in system):
            found.append(folder)
    interpreter = _interpreter(program) if follow else None
    return found + (program_folders(interpreter, follow=False) if interpreter else [])


def _interpreter(program: str) -> str | None:
    """The program a script's `#!` line names (through `env`), if any."""
    try:
        with open(program, "rb") as handle:
            line = handle.readline(256)
    except OSError:
        return None
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    if words and Path(words[0]).name == "env":
        words = [word for word in words[1:] if not word.startswith("-")]
        return shutil.which(words[0]) if words else None
    return words[0] if words else None


def _in_folder(launch: Launch, cwd: Path) -> Launch:
    return dataclasses.replace(launch, cwd=cwd)


@asynccontextmanager
async def sandboxed_stdio(
    launch: Launch, name: str, on_exit: Callable[[str], None]
) -> AsyncIterator[TransportStreams]:
    """The SDK's transport streams to the started server. `on_exit(why)` is called once when
    its output ends (it exited or closed stdout), so the caller can start it again."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            preexec_fn=launch.preexec_fn,
            pass_fds=launch.pass_fds,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
    except (OSError, ValueError) as exc:
        if launch.cleanup:
            launch.cleanup()
        raise ServerError(f"could not start: {exc}") from None
    finally:
        launch.descriptors.close()
    incoming_in, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    outgoing, outgoing_out = anyio.create_memory_object_stream[SessionMessage](16)
    said: collections.deque[str] = collections.deque(maxlen=_STDERR_KEPT)
    assert process.stdin and process.stdout and process.stderr

    async def read_messages() -> None:
        assert process.stdout
        why = "closed its output"
        try:
            while line := await process.stdout.readline():
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await incoming_in.send(exc)
                    continue
                await incoming_in.send(SessionMessage(message))
        except ValueError:  # a line past MAX_LINE_BYTES
            why = f"sent a message over {MAX_LINE_BYTES // 2**20} MiB"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # our side closed first
        finally:
            await incoming_in.aclose()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 1)
        if process.returncode is not None:
            why = f"exited with code {process.returncode}"
        on_exit(why + (f"; its last words: {said[-1]}" if said else ""))

    async def write_messages() -> None:
        assert process.stdin
        async with outgoing_out:
            async for item in outgoing_out:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    process.stdin.write(data.encode() + b"\n")
                    await process.stdin.drain()
                except (ConnectionError, RuntimeError):
                    return  # it exited: the reader says so

    async def read_stderr() -> None:
        assert process.stderr
        with contextlib.suppress(ValueError):  # a line past the limit ends the echo only
            while line := await process.stderr.readline():
                text = line.decode(errors="replace").strip()[:500]
                if text:
                    said.append(text)
                    log.info("MCP server %s: %s", name, text)

    tasks = [asyncio.ensure_future(job()) for job in (read_messages, write_messages, read_stderr)]
    try:
        yield incoming, outgoing
    finally:
        await _stop(process, launch)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for stream in (incoming, incoming_in, outgoing, outgoing_out):
            await stream.aclose()


async def _stop(process: asyncio.subprocess.Process, launch: Launch) -> None:
    """Close its stdin, give it a moment to end, then end it and all it started."""
    assert process.stdin
    with contextlib.suppress(OSError, RuntimeError):
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), _EXIT_GRACE_S)
    except TimeoutError:
        launch.kill(process.pid)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), _EXIT_GRACE_S)
    launch.ended()
    if launch.cleanup:
        launch.cleanup()
