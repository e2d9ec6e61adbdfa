"""What a command would do to a path: the shared vocabulary of tools/shell/effects/effects.py,
tools/shell/effects/git_effects.py and tools/shell/effects/archives.py, read by
tools/shell/asks.py."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

# replaces/deletes/moves/may change: asks when the file exists; creates: an identity file
# only when it does not exist yet; writes (appends, modes): an identity file always.
Verb = Literal["replaces", "deletes", "moves", "creates", "writes", "may change"]
DELETERS = frozenset({"rm", "rmdir", "unlink", "shred"})


@dataclass(frozen=True)
class Effect:
    raw: str  # the path as the command names it: relative to the workspace, or absolute
    verb: Verb
    by: str  # who does it, as the owner reads it and as the rule names it: "cp", "git apply"
    tree: bool = False  # a folder and everything in it


@dataclass(frozen=True)
class Stdin:
    """What a command reads on standard input, when it is known before it runs."""

    path: str | None = None  # `< file`
    text: str | None = None  # a here-document or here-string; "" when nothing comes in

    @property
    def piped(self) -> bool:
        return self.path is None and self.text is None


NOTHING = Stdin(text="")


def abs_path(workspace: Path, raw: str) -> str:
    """`raw` as a path on this machine: relative ones, and `~`, in the workspace."""
    if raw == "~" or raw.startswith("~/"):
        raw = str(workspace) + raw[1:]
    return os.path.join(workspace, raw)


def is_dir(workspace: Path, raw: str) -> bool:
    return os.path.isdir(abs_path(workspace, raw))


def open_regular(path: str | Path) -> BinaryIO:
    """A file the planner reads before the command runs (an archive, a patch), opened only
    if it is a regular file: a FIFO would hang the daemon, a device read forever. OSError
    otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
