"""bubblewrap's command line for one launch: the mounts that make a View.

The namespace's root is an empty tmpfs, made read-only once everything is mounted: the
system folders, the listed entries of /etc, /proc, /dev, a private /tmp, the workspace,
then the masks. /etc's files are copied in from descriptors (--file) and its small
folders recreated, links as links: a mount costs about 0.1 ms, and the list holds some
thirty entries; only large folders (ssl/certs, alternatives) are bound.

A list-only folder (the nearest existing folder of a masked path that does not exist, see
tools/sandbox/view.py) is rebuilt inside the namespace: an empty tmpfs on it, each entry
bound back from a file descriptor opened here with O_NOFOLLOW (so an entry swapped for a
link meanwhile cannot carry the bind elsewhere), links recreated, masked entries left out,
then the tmpfs made read-only. The entries keep their rights; a new name there fails
with EROFS, and nothing is ever created in the real workspace — bubblewrap would create
a missing mount point through the workspace's bind, leaving an empty file behind. A
folder with more than MAX_REBUILT_ENTRIES entries is bound read-only whole instead.
bubblewrap closes the descriptors before the command runs.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from tools.sandbox.etc_files import GENERATED, minimal_names
from tools.sandbox.view import SYSTEM_DIRS, View

MAX_REBUILT_ENTRIES = 256
MAX_COPIED_ENTRIES = 32


def bwrap_args(
    bwrap: str, view: View, argv: Sequence[str], *, writable: bool, network: bool
) -> tuple[list[str], list[int]]:
    """The bwrap command line running argv in `view`, and the descriptors it needs open
    (the caller passes them to the child and closes them after)."""
    args = [bwrap, "--new-session", "--die-with-parent"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        args.append("--unshare-net")
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]  # as root, bwrap keeps capabilities otherwise
    fds: list[int] = []
    workspace = str(view.workspace)
    try:
        args += _system(view, fds)
        # /tmp before the workspace: the workspace may live under /tmp.
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for path in view.reads:  # before the workspace, which must not be covered
            args += ["--ro-bind", str(path), str(path)]
        for path in view.writes:
            args += ["--bind", str(path), str(path)]
        args += ["--bind" if writable else "--ro-bind", workspace, workspace]
        for path in view.frozen:  # over the workspace's own bind: read-only inside it
            args += ["--ro-bind", str(path), str(path)]
        rebuilt = _list_only(view, writable, args, fds)
        args += _masks(view)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for folder in rebuilt:
        args += ["--remount-ro", str(folder)]
    args += ["--remount-ro", "/", "--chdir", workspace, "--", *argv]
    return args, fds


def _system(view: View, fds: list[int]) -> list[str]:
    args = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir() and path not in view.hidden:
            args += ["--ro-bind", name, name]
    args += ["--dir", "/etc"]
    for folder in view.etc.folders:
        args += ["--dir", str(folder)]
    for link, target in view.etc.links:
        if link not in GENERATED:
            args += ["--symlink", target, str(link)]
    for path in view.etc.reads:
        if path in view.hidden or path in GENERATED:
            continue
        if path.is_dir() and not _copied_tree(path, view, args, fds):
            args += ["--ro-bind", str(path), str(path)]
        elif not path.is_dir():
            _copy(path, args, fds)
    for path, text in minimal_names().items():
        _generated(path, text, args, fds)
    return args


def _generated(path: Path, text: str, args: list[str], fds: list[int]) -> None:
    """`text` as the namespace's `path` (passwd, group), from a memory file: no file on
    disk to clean up, and read-only there once the root is."""
    fd = os.memfd_create(path.name, os.MFD_CLOEXEC)
    fds.append(fd)
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    args += ["--perms", "0644", "--file", str(fd), str(path)]


def _copied_tree(root: Path, view: View, args: list[str], fds: list[int]) -> bool:
    """A small folder of /etc copied in (ld.so.conf.d, python3.11): a copy costs less than
    a mount. False, and nothing added, for one with more than MAX_COPIED_ENTRIES entries."""
    found = _small_tree(str(root), [])
    if found is None:
        return False
    args += ["--dir", str(root)]
    for name, kind in found:
        path = Path(name)
        if path in view.hidden:
            continue
        if kind == "link":
            args += ["--symlink", os.readlink(path), name]
        elif kind == "dir":
            args += ["--dir", name]
        else:
            _copy(path, args, fds)
    return True


def _small_tree(folder: str, found: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """Every entry under folder (parents first) as (path, "dir" | "link" | "file"), or None
    as soon as there are more than MAX_COPIED_ENTRIES."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if len(found) >= MAX_COPIED_ENTRIES:
                return None
            if entry.is_symlink():
                found.append((entry.path, "link"))
            elif entry.is_dir():
                found.append((entry.path, "dir"))
                if _small_tree(entry.path, found) is None:
                    return None
            else:
                found.append((entry.path, "file"))
    return found


def _copy(path: Path, args: list[str], fds: list[int]) -> None:
    """A file of the system copied into the namespace's /etc, read-only there once the
    root is; the copy is of now, which is all a command lasts."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # gone, or not for us to read (as a user, an /etc file only root reads)
    fds.append(fd)
    mode = stat.S_IMODE(os.fstat(fd).st_mode) & 0o755
    args += ["--perms", f"{mode:04o}", "--file", str(fd), str(path)]


def _list_only(view: View, writable: bool, args: list[str], fds: list[int]) -> list[Path]:
    """Rebuild each list-only folder (see the module's docstring); the folders rebuilt."""
    rebuilt = []
    bind = "--bind-fd" if writable else "--ro-bind-fd"
    for folder in view.list_only():
        with os.scandir(folder) as found:
            entries = [Path(entry.path) for entry in found]
        if len(entries) > MAX_REBUILT_ENTRIES:
            fds.append(os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC))
            args += ["--ro-bind-fd", str(fds[-1]), str(folder)]
            continue
        args += ["--tmpfs", str(folder)]
        rebuilt.append(folder)
        for path in entries:
            if path in view.hidden:
                continue  # masked later, on a mount point made in the tmpfs
            try:
                fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                os.close(fd)
                with contextlib.suppress(OSError):
                    args += ["--symlink", os.readlink(path), str(path)]
            elif stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                fds.append(fd)
                args += [bind, str(fd), str(path)]
            else:
                os.close(fd)  # a fifo or socket: left out
    return rebuilt


def _masks(view: View) -> list[str]:
    args = []
    for path in sorted(view.hidden):
        if str(path) in SYSTEM_DIRS:
            continue  # not bound at all
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args
