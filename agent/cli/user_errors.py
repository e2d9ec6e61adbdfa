"""The one line for an error a person caused and can fix — a home or state.db that cannot be
written, a model that cannot be called as configured, a sandbox or Python package that is
missing, a daemon already serving the home — said on stderr with exit status 2 by any
command (agent/cli/main.py). Anything else keeps its traceback: that is a bug to report.
Standard library only; what an error's class needs is imported once there is an error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from pathlib import Path

# Modules pinclaw imports for one feature, and the distribution that provides each (a chat
# channel's: its kind says, channels/registry.py).
PACKAGES = {
    "PIL": ("photos for the model", "pillow"),
    "serial": ("the Arduino board", "pyserial"),
    "pyfirmata2": ("the Arduino board", "pyfirmata2"),
    "prompt_toolkit": ("agent chat", "prompt-toolkit"),
    "rich": ("agent chat", "rich"),
    "croniter": ("schedules", "croniter"),
    "tree_sitter": ("the shell tool", "tree-sitter"),
    "tree_sitter_bash": ("the shell tool", "tree-sitter-bash"),
    "yaml": ("skills", "pyyaml"),
    "litellm": ("every model call", "litellm"),
}
OURS = ("agent", "tools", "channels")
_DENIED = (errno.EACCES, errno.EPERM)
_FULL = (errno.ENOSPC, errno.EDQUOT)
WRITE_ERRNOS = (*_DENIED, *_FULL, errno.EROFS, errno.ENOTDIR)


def user_line(exc: BaseException, *, home: Path, state_db: Path | None = None) -> str | None:
    """The line for `exc`, or None when it is not one a person can fix (`state_db`: set
    once the settings named it, so an SQLite error can be checked against it)."""
    kind = type(exc).__name__
    if kind == "StateDBUnusable":
        return str(exc)
    if type(exc).__module__ in ("sqlite3", "agent.durable.file.state_errors"):  # or StateError
        return None if state_db is None else state_db_line(state_db, home)
    if kind == "ModelUnusable":
        return f"error: {exc}"
    if kind == "SandboxUnavailable":
        return f'error: {exc}, or set sandbox = "auto" under [security] in config.toml'
    if kind == "DaemonRunning":
        pid = getattr(exc, "pid", None)
        how = f"`kill {pid}`" if pid else "`agent doctor` names it"
        return f"error: {exc}; stop it first ({how}) or set PINCLAW_HOME to another folder"
    if isinstance(exc, ModuleNotFoundError):
        return missing_package_line(exc)
    if isinstance(exc, OSError):
        return cannot_write_line(exc, home)
    return None


def missing_package_line(exc: ModuleNotFoundError) -> str | None:
    root = (exc.name or "").split(".")[0]
    if not root or root in OURS:
        return None  # a module of pinclaw's own: a broken install or a bug, with its traceback
    feature, package = PACKAGES.get(root) or _channel_package(root) or ("pinclaw", root)
    return (
        f"error: {feature} needs the Python package {package}, which is not installed here; "
        f"install it: {sys.executable} -m pip install {package}"
    )


def _channel_package(module: str) -> tuple[str, str] | None:
    from channels.registry import kind_of_library

    kind = kind_of_library(module)
    if kind is None:
        return None
    return f"the {kind.capabilities.display_name} channel", kind.package


def cannot_write_line(exc: OSError, home: Path) -> str | None:
    """A file or folder that cannot be written: its path, why, and what to do — for the
    home, also where else pinclaw could keep its files."""
    if exc.errno not in WRITE_ERRNOS or not exc.filename:
        return None
    path = Path(os.path.abspath(os.fsdecode(exc.filename)))
    home = Path(os.path.abspath(home))
    in_home = path == home or home in path.parents or path in home.parents
    elsewhere = "set PINCLAW_HOME to a folder you can write" if in_home else "choose another"
    if exc.errno in _DENIED:
        reason, fix = "permission denied", f"make it yours and writable, or {elsewhere}"
    elif exc.errno == errno.EROFS:
        reason, fix = "the file system is read-only", elsewhere
    elif exc.errno in _FULL:
        reason, fix = "the disk is full", "free some space"
    else:
        reason, fix = "a file stands where a folder should be", f"move it aside, or {elsewhere}"
    return f"error: cannot write {path}: {reason}; {fix}"


def state_db_line(state_db: Path, home: Path) -> str | None:
    """Why state.db cannot be used (as the store says it), or cannot be written at all."""
    from agent.durable.file.migrations import diagnose

    problem = diagnose(state_db)
    if problem is not None:
        return str(problem)
    denied = write_denied(state_db)
    return None if denied is None else cannot_write_line(denied, home)


def write_denied(path: Path) -> OSError | None:
    """Why `path` (a file SQLite writes beside: its folder takes -wal and -shm) cannot be
    written, found by trying; None when it can."""
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".pinclaw-probe-")
        os.close(fd)
        os.unlink(probe)
        if path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW))
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, str(path))
    return None


def with_traceback(exc: BaseException) -> None:
    """-v: the traceback too, before the line."""
    import traceback

    with contextlib.suppress(Exception):
        traceback.print_exception(exc, file=sys.stderr)
