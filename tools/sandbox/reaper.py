"""Nothing a command starts outlives it: its processes are kept together and all of them
die when the command ends (its first process exits), times out, is cancelled, or when the
daemon stops.

A process group is not enough (`setsid` leaves it), nor is the parent's view (a double
fork leaves it). One of two keepers holds a command, chosen once per daemon:

- **a cgroup v2 per command**, a child of the daemon's own cgroup, where the daemon may
  make one and move a process into it (probed once): as root, or as a user whose systemd
  delegates the cgroup subtree (a `systemctl --user` service, a desktop terminal's scope;
  an SSH login's session scope belongs to root, so not there). A process leaves a cgroup
  only by writing under /sys/fs/cgroup, which neither sandbox shows; `cgroup.kill` (Linux
  5.14) ends all of it at once. `memory.max` bounds the memory of the whole tree when the
  daemon's cgroup already hands the memory controller to its children (as the root cgroup
  may); otherwise RLIMIT_AS alone bounds each process. Empty cgroups are kept for the next
  commands and removed at exit. A watching shell, one per daemon, ends the daemon's cgroups
  when it dies however it does (SIGKILL too); the next daemon's probe removes them.
- **else a supervisor** (tools/sandbox/subreaper.py): the command's first process forks once more
  before exec; the parent, a child subreaper (PR_SET_CHILD_SUBREAPER), inherits every
  orphan of the command, waits for the command, then SIGKILLs every descendant it finds in
  /proc until it has no children left. It does the same when the daemon dies
  (PR_SET_PDEATHSIG) or asks it to (SIGTERM), then exits with the command's status. Its
  limit: a process that may signal it (same user, no Landlock signal scope: ABI < 6, or no
  sandbox) can kill it first, and what the command started then lives on.

bubblewrap needs no supervisor: its pid namespace ends with the command (--unshare-pid,
--die-with-parent, armed before bwrap runs by tools/sandbox/parent_death.py). But bwrap arms
--die-with-parent in its child without checking that bwrap still lives, so a daemon killed
in that moment left the command running in an orphaned namespace (the kill-9 test of
tests/test_effects_once.py saw a journalled command act after the crash, under load). So it
joins a cgroup too wherever one can be made, whose watcher ends it with the daemon.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

from tools.sandbox.subreaper import Subreaper

Mode = Literal["auto", "cgroup", "subreaper", "off"]

_MIB = 1024 * 1024
# The first process writes "0" (itself) into cgroup.procs, then becomes the command.
_JOIN = 'echo 0 >"$0" && exec "$@"'
_PREFIX = "pinclaw-"
_mode: Mode = "auto"
_counter = itertools.count()
_POOL = 8  # empty cgroups kept for the next commands: rmdir costs about 1.5 ms
_made: set[Path] = set()  # this daemon's cgroups, removed at exit
_idle: list[Path] = []  # empty, ready for the next command
_leaving: set[Path] = set()  # closed while a killed process was still leaving
_watch_end: list[int] = []  # the daemon's end of the watching shell's pipe


def use(mode: Mode) -> None:
    """Force a keeper (tests and benchmarks): "auto" picks a cgroup where one can be made."""
    global _mode
    _mode = mode


class Cgroup:
    """One command's cgroup: made now, joined by the command's first process before exec."""

    def __init__(self, base: Path, memory_mb: int) -> None:
        for path in [p for p in _leaving if not _populated(p)]:
            _leaving.discard(path)
            _idle.append(path)
        self.path = _idle.pop() if _idle else _make(base)
        try:
            if _memory_controller(base):
                limit = str(memory_mb * _MIB).encode() if memory_mb else b"max"
                _write(self.path / "memory.max", limit)
                with contextlib.suppress(FileNotFoundError):  # no swap accounting here
                    _write(self.path / "memory.swap.max", b"0" if memory_mb else b"max")
            self._procs = os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except BaseException:
            _remove(self.path)
            raise

    def wrap(self, argv: list[str]) -> list[str]:
        """argv behind a shell that joins the cgroup: no preexec_fn needed (vfork stays)."""
        return ["/bin/sh", "-c", _JOIN, str(self.path / "cgroup.procs"), *argv]

    def join(self) -> None:
        """In the child, before exec (a syscall on an fd opened here)."""
        os.write(self._procs, b"0")

    def end(self) -> None:
        """The first process has exited: end what it left behind. Nothing once closed:
        the cgroup may serve another command by then."""
        if self._procs < 0:
            return
        with contextlib.suppress(OSError):
            _write(self.path / "cgroup.kill", b"1")

    def kill(self, pid: int) -> None:
        if self._procs < 0:
            return
        self.end()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def close(self) -> None:
        """Once the first process was waited for: end the rest; the cgroup, once empty,
        serves a later command."""
        if self._procs < 0:
            return
        os.close(self._procs)
        if _populated(self.path):
            self.end()
            _leaving.add(self.path)
        self._procs = -1
        if self.path in _leaving:
            return
        if len(_idle) < _POOL:
            _idle.append(self.path)
        else:
            _remove(self.path)


Keeper = Cgroup | Subreaper


def keeper(memory_mb: int) -> Keeper | None:
    """A keeper for one command: a cgroup where one can be made, else a supervisor (None
    where neither works, e.g. not Linux)."""
    if _mode != "subreaper" and _mode != "off":
        base = cgroup_base()
        if base is not None:
            return Cgroup(base, memory_mb)
    if _mode == "cgroup" or _mode == "off":
        return None
    try:
        return Subreaper()
    except (OSError, AttributeError):
        return None


def cgroup_if_possible(memory_mb: int) -> Cgroup | None:
    """A cgroup where one can be made, never a supervisor (for bubblewrap, whose pid
    namespace keeps the processes together)."""
    base = cgroup_base() if _mode in ("auto", "cgroup") else None
    return None if base is None else Cgroup(base, memory_mb)


@functools.cache
def cgroup_base() -> Path | None:
    """The daemon's own cgroup v2 folder, when a command's cgroup can be made and joined
    there (probed once); leftovers of dead daemons there are ended first."""
    base = _own_cgroup()
    if base is None or not os.access(base, os.W_OK):
        return None
    _sweep(base)
    probe = base / f"{_PREFIX}{os.getpid()}-probe"  # not _made: removed below
    try:
        os.mkdir(probe)
    except OSError:
        return None
    try:
        if not (probe / "cgroup.kill").exists():
            return None  # Linux < 5.14: nothing kills a whole cgroup at once
        done = subprocess.run(
            ["/bin/sh", "-c", 'echo 0 >"$0"', str(probe / "cgroup.procs")],
            capture_output=True,
            timeout=10,
            check=False,
        )
        if done.returncode != 0:
            return None  # not allowed to move a process there (no delegation)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        _remove(probe)
    atexit.register(_end_all)
    _watch(base)
    return base


def _watch(base: Path) -> None:
    """A shell that outlives the daemon by a moment: whichever way the daemon ends (SIGKILL
    included), its end of a pipe closes, and the shell kills what is left in its cgroups.
    Spawned bare (no Popen to warn at exit that it still runs); it runs until then."""
    read, write = os.pipe()  # neither is inherited by anything but the shell's stdin
    script = 'read _; for d in "$0"/pinclaw-"$1"-*; do echo 1 > "$d/cgroup.kill"; done'
    try:
        os.posix_spawn(
            "/bin/sh",
            ["/bin/sh", "-c", script, str(base), str(os.getpid())],
            {"PATH": "/usr/bin:/bin"},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,  # a Ctrl-C in the daemon's terminal is not for it
        )
    except OSError:
        os.close(write)
    else:
        _watch_end.append(write)  # open as long as the daemon lives
    finally:
        os.close(read)


def _own_cgroup() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    for line in mounts:
        fields, _, fstype = line.partition(" - ")
        parts = fields.split()
        if own is None or not fstype.startswith("cgroup2 ") or len(parts) < 5:
            continue
        root, mount = parts[3], parts[4]
        if own == root or own.startswith(root.rstrip("/") + "/"):
            return Path(mount) / own[len(root) :].lstrip("/")
    return None


@functools.cache
def _memory_controller(base: Path) -> bool:
    try:
        return "memory" in (base / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def _sweep(base: Path) -> None:
    """End and remove the cgroups of daemons that are gone."""
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            owner = entry.name[len(_PREFIX) :].split("-", 1)[0]
            if entry.name.startswith(_PREFIX) and owner.isdigit() and not _alive(int(owner)):
                with contextlib.suppress(OSError):
                    _write(Path(entry.path) / "cgroup.kill", b"1")
                _remove(Path(entry.path))


def _end_all() -> None:
    for path in list(_made):
        with contextlib.suppress(OSError):
            _write(path / "cgroup.kill", b"1")
        _remove(path)


def _make(base: Path) -> Path:
    path = base / f"{_PREFIX}{os.getpid()}-{next(_counter)}"
    os.mkdir(path, 0o755)
    _made.add(path)
    return path


def _populated(path: Path) -> bool:
    try:
        return "populated 1" in (path / "cgroup.events").read_text()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    """rmdir, waiting a little for killed processes to leave (at start and exit, or
    when the pool is full)."""
    for _ in range(100):
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                time.sleep(0.002)
                continue
        break
    _made.discard(path)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
