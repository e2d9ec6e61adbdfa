"""One path resolver for every tool: file tools, shell arguments and media markers.

A path is allowed when its real location (symlinks followed) is inside the workspace and
outside every forbidden path, and — for an existing regular file — when each of its names
(hard links) is inside the workspace too: a hard link made from outside would otherwise let
a tool read or upload a file that lives elsewhere.

The daemon's own reads and writes in the workspace (the prompt's files, skills, incoming
files, media markers) go through `open_beneath`: every component opened with O_NOFOLLOW
from the workspace down, so a link planted anywhere on the way is refused, never followed,
and a file swapped in between the check and the open cannot redirect it.

Writing has one more rule: nothing is written inside a git repository's own folder (`.git`,
or any folder holding HEAD, objects/ and refs/, as `git init --separate-git-dir` or `--bare`
make). Git runs the hooks and settings it finds there (hooks/pre-commit, core.fsmonitor,
aliases) when the owner next runs git — outside the sandbox.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# How many workspace entries the hard-link check may walk before it gives up (and refuses).
_LINK_SCAN_LIMIT = 20_000
GIT_DIR_NAME = ".git"  # compared case-insensitively: .GIT is .git on macOS and Windows
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | _CLOEXEC


class PolicyError(Exception):
    """A refused action; the message is shown to the model as the tool's error, `short`
    (without paths of this machine) to a person in a chat."""

    def __init__(self, message: str, *, short: str = "") -> None:
        super().__init__(message)
        self.short = short or message


@dataclass(frozen=True)
class PathRules:
    workspace: Path  # resolved
    forbidden: tuple[Path, ...] = ()  # resolved; they apply inside the workspace too

    @classmethod
    def build(cls, workspace: Path, forbidden: tuple[Path, ...] | list[Path]) -> PathRules:
        """Resolved rules; a forbidden folder that holds the whole workspace is dropped
        (confinement to the workspace already keeps everything else of it out)."""
        root = workspace.expanduser().resolve()
        kept = []
        for path in forbidden:
            real = path.expanduser().resolve()
            if real != root and real not in root.parents:
                kept.append(real)
        return cls(root, tuple(dict.fromkeys(kept)))

    def resolve(self, raw: str) -> Path:
        """The real path of `raw` (relative to the workspace; `~` is the workspace, as HOME
        is in the sandbox), refused unless it and all its names stay inside."""
        resolved = self._locate(raw)
        self._check_links(raw, resolved)
        return resolved

    def resolve_for_write(self, raw: str) -> Path:
        """`resolve`, and refused inside a git repository's own folder."""
        resolved = self.resolve(raw)
        self.check_write(raw, resolved)
        return resolved

    def check_write(self, raw: str, resolved: Path) -> None:
        """Refuse writing to `resolved` (already confined) when it is, or is inside, a git
        folder of the workspace: `.git` by name, or a folder that git would use as one."""
        if resolved == self.workspace:
            return
        parts = resolved.relative_to(self.workspace).parts
        folder = self.workspace
        for part in parts:
            folder = folder / part
            if part.lower() == GIT_DIR_NAME or _is_git_dir(folder):
                shown = folder.relative_to(self.workspace)
                raise PolicyError(
                    f"{raw!r} is inside {shown}/, a git repository's own folder: nothing may "
                    "be written there, since git runs the hooks and settings it finds in it",
                    short="it is inside a git repository's own folder",
                )

    def _locate(self, raw: str) -> Path:
        if not raw or "\x00" in raw:
            raise PolicyError("the path is empty or contains a NUL byte")
        if raw == "~" or raw.startswith("~/"):
            raw = str(self.workspace) + raw[1:]
        elif raw.startswith("~"):
            raise PolicyError(f"{raw!r}: only ~ and ~/ (the workspace) are understood")
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            raise PolicyError(f"{raw!r} cannot be resolved: {exc}") from None
        if resolved != self.workspace and self.workspace not in resolved.parents:
            raise PolicyError(
                f"{raw!r} is outside the workspace ({self.workspace}); "
                "use a path relative to the workspace",
                short="it is outside the workspace",
            )
        for forbidden in self.forbidden:
            if resolved == forbidden or forbidden in resolved.parents:
                raise PolicyError(
                    f"{raw!r} is inside the forbidden path {forbidden}", short="it is forbidden"
                )
        return resolved

    def _check_links(self, raw: str, resolved: Path) -> None:
        try:
            info = resolved.stat()
        except OSError:
            return  # does not exist yet: a new file has one name, ours
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            self.check_hard_links(raw, info)

    def check_hard_links(self, raw: str, info: os.stat_result) -> None:
        """Refuse a file with a name outside the workspace: count its names inside, and
        compare with the link count the file system keeps."""
        inside = 0
        seen = 0
        for folder, dirs, files in os.walk(self.workspace):
            for name in (*files, *dirs):
                seen += 1
                if seen > _LINK_SCAN_LIMIT:
                    raise PolicyError(
                        f"{raw!r} has {info.st_nlink} names (hard links) and the workspace is "
                        "too large to check that all are inside it"
                    )
                try:
                    other = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                if (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev):
                    inside += 1
        if inside < info.st_nlink:
            raise PolicyError(
                f"{raw!r} is a hard link to a file that also lives outside the workspace",
                short="it is a hard link to a file outside the workspace",
            )

    def open_checked(self, raw: str, flags: int) -> tuple[int, Path]:
        """Resolve, then open without following a last-moment symlink, and check the links
        of what was actually opened (a file swapped in between is caught here). Opening
        to write also checks the git folders (`check_write`)."""
        resolved = self.resolve_for_write(raw) if flags & _WRITE_FLAGS else self.resolve(raw)
        try:
            fd = os.open(resolved, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            if exc.errno == getattr(os, "ELOOP", -1):
                raise PolicyError(f"{raw!r} became a symlink; refused") from None
            raise
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                self.check_hard_links(raw, info)
        except BaseException:
            os.close(fd)
            raise
        return fd, resolved

    def open_beneath(self, raw: str, flags: int, *, make_folders: bool = False) -> int:
        """Open `raw` inside the workspace for the daemon itself, following no link at any
        component. A read must find a regular file (a FIFO would hang the daemon: opened
        non-blocking, then refused). Missing folders are made (0700) with `make_folders`.
        PolicyError for a link, a forbidden path, a hard link from outside, a git folder."""
        path = self._lexical(raw)
        if flags & _WRITE_FLAGS:
            self.check_write(raw, path)
        parts = path.relative_to(self.workspace).parts
        if not parts:
            raise PolicyError(f"{raw!r} is the workspace itself, not a file")
        folder = os.open(self.workspace, _DIR_FLAGS)
        try:
            for part in parts[:-1]:
                inner = _step(folder, part, raw, make=make_folders)
                os.close(folder)
                folder = inner
            nonblock = 0 if flags & _WRITE_FLAGS else os.O_NONBLOCK
            try:
                fd = os.open(
                    parts[-1], flags | os.O_NOFOLLOW | _CLOEXEC | nonblock, 0o600, dir_fd=folder
                )
            except OSError as exc:
                _refuse_link(exc, folder, parts[-1], raw)
                raise
        finally:
            os.close(folder)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PolicyError(f"{raw!r} is not a regular file", short="not a regular file")
            if info.st_nlink > 1:
                self.check_hard_links(raw, info)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def make_folder(self, raw: str) -> None:
        """Make the folder `raw` (0700, and those on its way) for the daemon itself, through
        no link at any component. PolicyError for a link or a file on the way."""
        path = self._lexical(raw)
        self.check_write(raw, path)
        folder = os.open(self.workspace, _DIR_FLAGS)
        try:
            for part in path.relative_to(self.workspace).parts:
                inner = _step(folder, part, raw, make=True)
                os.close(folder)
                folder = inner
        finally:
            os.close(folder)

    def read_bytes(self, raw: str, max_bytes: int) -> bytes:
        """Up to `max_bytes` of a workspace file, opened by `open_beneath`."""
        with os.fdopen(self.open_beneath(raw, os.O_RDONLY), "rb") as handle:
            return handle.read(max_bytes)

    def _lexical(self, raw: str) -> Path:
        """`raw` as a path under the workspace without looking at the disk (".." folded),
        refused outside it or in a forbidden path. With no link on the way (open_beneath
        makes sure), this is also its real path."""
        if not raw or "\x00" in raw:
            raise PolicyError("the path is empty or contains a NUL byte")
        path = Path(os.path.normpath(self.workspace / raw))
        if path != self.workspace and self.workspace not in path.parents:
            raise PolicyError(
                f"{raw!r} is outside the workspace", short="it is outside the workspace"
            )
        for forbidden in self.forbidden:
            if path == forbidden or forbidden in path.parents:
                raise PolicyError(
                    f"{raw!r} is inside the forbidden path {forbidden}", short="it is forbidden"
                )
        return path


def _step(folder: int, name: str, raw: str, *, make: bool) -> int:
    """The folder `name` inside the open folder `folder`, opened; never through a link."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            if not make:
                raise
            os.mkdir(name, 0o700, dir_fd=folder)
            return os.open(name, _DIR_FLAGS, dir_fd=folder)
    except OSError as exc:
        _refuse_link(exc, folder, name, raw)
        raise


def _refuse_link(exc: OSError, folder: int, name: str, raw: str) -> None:
    """Raise PolicyError when `exc` came from a link (or a non-folder) where `raw` goes."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            linked = stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
        except OSError:
            linked = False
        what = "a symbolic link" if linked else "not a folder"
        raise PolicyError(
            f"{raw!r} goes through {name!r}, which is {what}; refused", short=f"{name} is {what}"
        )


def _is_git_dir(folder: Path) -> bool:
    """What git itself takes for a repository folder: HEAD, objects/ and refs/."""
    return (
        (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir()
    )
