"""What of the host a sandboxed command sees, worked out per launch for both sandboxes.

Exposed: the system folders (SYSTEM_DIRS) read-only, the listed files of /etc
(tools/sandbox/etc_files.py), the workspace, and nothing else: not /root, /var, /boot, /home or
the owner's home, which are not bound (bubblewrap) or not granted (Landlock). Inside what
is exposed, masked paths are hidden:

- existing ones (`hidden`): bubblewrap mounts an empty read-only folder or /dev/null over
  them; Landlock grants around them;
- missing ones inside the workspace (`absent`, e.g. USER.md before anyone wrote it): there
  is nothing to read, but a command must not create one either, and nothing may be made
  in the real workspace to hide the name. The folder that would hold it (its nearest
  existing ancestor) becomes list-only: its entries keep their rights, nothing can be
  created, removed or renamed directly in it. Landlock does this for every folder on the
  way to a masked path (it cannot take a subtree out of a grant); bubblewrap for the
  nearest existing folder of a missing one (tools/sandbox/bwrap.py).

Also masked, should they lie inside something exposed: root's home, /var, /boot, the
daemon's $HOME unless the workspace is inside it, and as root the files only root may read
in /etc (ROOT_SECRETS), which uid 0 reads without capabilities.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from tools.sandbox.etc_files import EtcView, etc_view

# The system a command may read and execute (those that exist; merged-/usr symlinks kept).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# Readable by root alone (globs), and uid 0 reads them without capabilities: masked for root.
ROOT_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/ssl/private",
    "/etc/ssh/ssh_host_*_key",
)
PRIVATE_DIRS = ("/root", "/var", "/boot")


@dataclass(frozen=True)
class View:
    workspace: Path  # resolved
    roots: tuple[Path, ...]  # system folders exposed whole, resolved, none inside another
    etc: EtcView
    hidden: frozenset[Path]  # existing masked paths inside something exposed, resolved
    absent: frozenset[Path]  # missing masked paths inside the workspace, resolved
    # Further trees exposed (a long-running server's program and own folder), resolved.
    reads: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    frozen: tuple[Path, ...] = ()  # inside the workspace, read-only there: files and folders

    @property
    def trees(self) -> tuple[Path, ...]:
        """Everything exposed read-only, each a folder or a file."""
        return (*self.roots, *self.etc.reads)

    def list_only(self) -> list[Path]:
        """The nearest existing folder of each absent path, parents first."""
        folders = set()
        for path in self.absent:
            folder = path.parent
            while not folder.exists() and folder != self.workspace:
                folder = folder.parent
            if folder.is_dir() and not folder.is_symlink():
                folders.add(folder)
        return sorted(folders, key=lambda p: (len(p.parts), str(p)))


def view(
    workspace: Path,
    masked: tuple[Path, ...],
    reads: tuple[Path, ...] = (),
    writes: tuple[Path, ...] = (),
    *,
    frozen: tuple[Path, ...] = (),
) -> View:
    """`reads`, `writes`: further trees exposed read-only or read-write (those that exist);
    `frozen`: paths in the workspace kept read-only (those that exist and are no link)."""
    roots = system_roots()
    etc = etc_view(roots)
    reads, writes = _existing(reads), _existing(writes)
    own = [str(tree) for tree in (workspace, *reads, *writes)]
    trees = [*own, *(str(tree) for tree in (*roots, *etc.reads))]
    hidden, absent = set(), set()
    for raw in (*masked, *_always_masked()):
        path = Path(raw).resolve()
        if any(_within(tree, str(path)) for tree in own):
            continue  # holds the workspace (or a tree exposed): out of reach but for it
        if os.path.lexists(path):
            if any(_within(str(path), tree) for tree in trees):
                hidden.add(path)
        elif _within(str(path), str(workspace)) and path != workspace:
            absent.add(path)
    kept = tuple(
        path.resolve()
        for path in frozen
        if path.exists() and not path.is_symlink() and _within(str(path.resolve()), str(workspace))
    )
    return View(
        workspace, tuple(roots), etc, frozenset(hidden), frozenset(absent), reads, writes, kept
    )


def _existing(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(p.resolve() for p in paths if p.exists()))


def _within(path: str, tree: str) -> bool:
    """path is tree or lies under it (both resolved)."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def system_roots() -> list[Path]:
    """The system dirs that exist, resolved, without those inside another (merged /usr:
    /bin is /usr/bin), so that a masked path is not granted again through an alias."""
    resolved = {Path(name).resolve() for name in SYSTEM_DIRS if os.path.isdir(name)}
    return sorted(p for p in resolved if not any(other in p.parents for other in resolved))


def _always_masked() -> list[Path]:
    """PRIVATE_DIRS, the daemon's $HOME (skipped, like any, when it holds the workspace)
    and, as root, ROOT_SECRETS."""
    found = [Path(name) for name in PRIVATE_DIRS]
    home = os.environ.get("HOME", "")
    if home.startswith("/") and home.strip("/"):
        found.append(Path(home))
    if os.geteuid() == 0:
        found += [Path(p) for pattern in ROOT_SECRETS for p in glob.glob(pattern)]
    return found
