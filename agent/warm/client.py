"""The thin side of a warm start: a one-shot's command line handed to the warm start process
(agent/warm/server.py) with this process's environment, working folder, umask and standard
input, output and error, which the fork that runs it writes to directly. This process waits
for its exit status, passing on the signals a person sends it (Ctrl-C, a terminal closed).

Only what Python has loaded at start, plus C modules (zlib), as agent/cli/local_client.py.
"""

from __future__ import annotations

import _socket
import os
import sys

from agent.cli.local_client import JsonLines, encode, run_command
from agent.warm.place import paths, start_env

GONE = (
    "error: the warm start process went away before the one-shot ended (it was stopped or "
    "crashed); the message may be unanswered: run it again"
)
_PASSED_ON = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGWINCH")


def one_shot(args: list[str]) -> bool:
    """Whether `args` are `[global options] run ... -m MESSAGE ...` (never --help)."""
    found = run_command(args)
    run_args = found[3] if found is not None else []
    if "--help" in run_args or "-h" in run_args:
        return False
    return any(a in ("-m", "--message") or a.startswith(("-m", "--message=")) for a in run_args)


def hand_over(args: list[str], *, daemon_tried: bool) -> int | None:
    """Run the one-shot `args` in a warm start's fork: its exit status, or None when no warm
    start takes it (none runs, or it began with other files or variables): then it runs
    here, cold."""
    found = paths(os.environ)
    if found is None:
        return None
    socket_path, token_path, _ = found
    try:
        with open(token_path, encoding="utf-8") as held:
            token = held.read().strip()
        cwd = os.getcwd()
    except OSError:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
        umask = os.umask(0o077)
        os.umask(umask)
        request = {
            "token": token,
            "argv": args,
            "env": dict(os.environ),
            "cwd": cwd,
            "umask": umask,
            "daemon_tried": daemon_tried,
            "start": start_env(os.environ),
        }
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        sock.sendmsg([encode(request)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        lines = JsonLines(sock, token)
        first = lines.next()
    except OSError:
        sock.close()
        return None
    pid = first.get("pid") if first else None
    if not isinstance(pid, int):  # declined, or refused: answered here
        sock.close()
        return None
    return _wait(lines, pid)


def _wait(lines: JsonLines, pid: int) -> int:
    """The fork's exit status; meanwhile the signals this process gets go to it."""

    def pass_on(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105  # contextlib: more imports than this whole path
            os.kill(pid, signum)
        except OSError:
            pass

    signals = sys.modules["_signal"]  # loaded at every start; `signal` imports enum
    for name in _PASSED_ON:
        if hasattr(signals, name):
            signals.signal(getattr(signals, name), pass_on)
    try:
        ended = lines.next()
    except OSError:
        ended = None
    finally:
        lines.sock.close()
    code = ended.get("exit") if ended else None
    if not isinstance(code, int):
        sys.stderr.write(GONE + "\n")
        return 1
    return code
