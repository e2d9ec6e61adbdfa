"""A command ends with the daemon that launched it, from its first moment.

bwrap's --die-with-parent, and a cgroup's watcher, act only once they are in place: a
daemon killed between its fork and that moment left the command running, and a command
whose intent was journalled acted after the crash as well as in the replay (the kill-9
test found it under load). So PR_SET_PDEATHSIG (kept across exec) is armed before the
command's first program runs, then the daemon is checked to still be the parent: killed
before the arming, it is not, and nothing runs (exit 125). A launch with a preexec_fn arms
it there (`step`); one without (vfork kept) goes through util-linux's setpriv and a shell
(`dying_with_daemon`, about 1.4 ms). The supervisor of tools/sandbox/subreaper.py does
the same for itself.

bwrap arms its own --die-with-parent in its child without that check, so a daemon killed
in that moment leaves the namespace running. Where no cgroup's watcher covers it
(tools/sandbox/reaper.py), the command inside checks once more, after that arming: it goes
on only while the daemon still holds an exclusive lock on a file of its own
(`while_daemon_lives`, about 1 ms). The daemon alive then means bwrap alive at its child's
arming, and from there each process dies with its parent.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import signal
import subprocess
from collections.abc import Callable

from tools.sandbox.system_programs import SYSTEM_PATH, system_program

_PR_SET_PDEATHSIG = 1
# Run between setpriv and the command: goes on only while the daemon ($0) is the parent.
_STILL_OURS = '[ "$PPID" = "$0" ] || exit 125; exec "$@"'
# Run inside the sandbox before the command: goes on only while flock ($1) finds the lock on
# the daemon's file (open as descriptor $0) held, exclusively, by the daemon.
_HELD = 75
_DAEMON_HOLDS_LOCK = f'"$1" -n -s -E {_HELD} "$0"; [ $? = {_HELD} ] || exit 125; shift; exec "$@"'


def dying_with_daemon(argv: list[str]) -> list[str]:
    """argv behind setpriv and the parent check; argv as it was without a setpriv that
    knows --pdeathsig."""
    setpriv = _setpriv()
    if setpriv is None:
        return argv
    daemon = str(os.getpid())
    return [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", _STILL_OURS, daemon, *argv]


def step() -> Callable[[], None]:
    """The preexec step that does the same in the child (prepared here, in the parent:
    the child only makes the two system calls)."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)
    daemon = os.getpid()

    def die_with_daemon() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != daemon:
            os._exit(125)

    return die_with_daemon


def while_daemon_lives(argv: list[str]) -> tuple[list[str], int] | None:
    """argv behind the lock check, and the descriptor it reads (a new open of the daemon's
    lock file: the caller passes it to the child and closes it after); None without flock."""
    flock = _flock()
    if flock is None:
        return None
    fd = os.open(f"/proc/self/fd/{_daemon_lock()}", os.O_RDONLY | os.O_CLOEXEC)
    return ["/bin/sh", "-c", _DAEMON_HOLDS_LOCK, str(fd), flock, *argv], fd


@functools.cache
def _flock() -> str | None:
    found = system_program("flock")
    return found if found is not None and os.path.exists("/bin/sh") else None


@functools.cache
def _daemon_lock() -> int:
    """A file only this process holds an exclusive lock on, for as long as it lives (its
    descriptor is closed at every exec, so no child holds the lock)."""
    fd = os.memfd_create("pinclaw-daemon-lock", os.MFD_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@functools.cache
def _setpriv() -> str | None:
    found = system_program("setpriv")
    if found is None or not os.path.exists("/bin/sh"):
        return None
    try:
        usage = subprocess.run(
            [found, "--help"], capture_output=True, text=True, timeout=5, env={"PATH": SYSTEM_PATH}
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if "--pdeathsig" in usage.stdout else None
