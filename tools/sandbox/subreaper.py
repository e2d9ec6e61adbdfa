"""The supervisor that keeps a command's processes where no cgroup can be made (see
tools/sandbox/reaper.py): a child subreaper between the daemon and the command.

It is a fork of the daemon's child before exec, so it runs Python in a copy of the daemon:
it blocks every signal (none of the daemon's handlers may run), closes every inherited
file (sockets, the database, the exec-error pipe, the output pipe), and only waits,
reads /proc and kills. It lives as long as the command, sharing the daemon's memory
copy-on-write.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import signal
import time
from collections.abc import Callable
from typing import NoReturn

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_WATCHED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
_KILL_DEADLINE_S = 10.0


class Subreaper:
    """A supervisor between the daemon and the command (see the module's docstring)."""

    def __init__(self) -> None:
        self._prctl = _prctl()
        self._parent = os.getpid()

    def preexec(self, then: Callable[[], None]) -> Callable[[], None]:
        """The child's steps: fork; the grandchild runs `then` and execs the command, the
        child stays as the supervisor and never returns."""
        prctl, parent = self._prctl, self._parent

        def run() -> None:
            before = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
            prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            child = os.fork()
            if child == 0:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)
                prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                os.setpgid(0, 0)  # `kill 0` in the command does not reach the supervisor
                then()
                return
            _supervise(child, parent, prctl)

        return run

    def end(self) -> None:
        """Nothing to do: the supervisor ends the rest before it exits."""

    def kill(self, pid: int) -> None:
        """Ask the supervisor (pid) to kill everything and exit."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)

    def close(self) -> None:
        """Nothing to release."""


_Prctl = Callable[[int, int, int, int, int], int]


def _prctl() -> _Prctl:
    libc = ctypes.CDLL(None, use_errno=True)
    function = libc.prctl
    function.restype = ctypes.c_int
    function.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)
    result: _Prctl = function
    return result


def _supervise(child: int, parent: int, prctl: _Prctl) -> NoReturn:
    """The supervisor's whole life, in a copy of the daemon: hold none of its files or
    signals, wait for the command, end every descendant, exit as the command did."""
    code = 1
    try:
        gc.disable()
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        os.closerange(0, os.sysconf("SC_OPEN_MAX"))  # sockets, the exec-error pipe, stdout
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        status = _wait_for(child) if os.getppid() == parent else None
        _kill_descendants()
        if status is None:
            code = 128 + signal.SIGKILL
        else:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:  # killed by a signal: die of the same one
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(-code, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
                os.kill(os.getpid(), -code)
                code = 128 - code
    finally:
        os._exit(code)


def _wait_for(child: int) -> int | None:
    """The command's wait status, or None when told to stop (SIGTERM, the daemon died)."""
    while True:
        if signal.sigwaitinfo(_WATCHED).si_signo != signal.SIGCHLD:
            return None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == child:
                return status


def _kill_descendants() -> None:
    """SIGKILL every descendant until no child is left: an orphan comes to us (we are its
    subreaper), so no child means no descendant."""
    deadline = time.monotonic() + _KILL_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found
