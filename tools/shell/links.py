"""Commands that make links through a side door, and what `supervised` does with each.

A symbolic link planted in the workspace is a way out of it: the next time the daemon (or
the owner) opens AGENTS.md it reads ../config.toml, and a hard link to an identity file lets
a plain file carry every later write into it. So under `supervised` no command makes a link:
the program is refused, or run so that it cannot, or its archive is read first:

- ln, link: refused: making links is all they do; copy the file with cp
- git (every command): run as `git -c core.symlinks=false …`: a link in a patch, checkout,
  merge, stash, pull or clone becomes a plain file holding the target's path
- cp: `-s`/`-l` refused; refused when it would copy a symbolic link as a link (-a, -P, -d,
  -r without -L: add -L), follow one out of the workspace (-L), or keep two copies
  hard-linked (-a, -d, --preserve=links)
- mv: refused when it would move a symbolic link, or a folder holding one
- tar -x: the archive is read first (plain, gzip, bzip2, xz; bounded): refused if a member
  it extracts is a link, a device or a FIFO, if it comes from a pipe, or with --transform;
  GNU tar runs with --no-same-owner --no-same-permissions added
- unzip: the archive's entries are read first: refused if one it extracts is a link
- patch: refused (GNU patch makes links from git diffs): use git apply
- cpio, pax, bsdtar, 7z, 7za, 7zr, unsquashfs: refused: they extract links; use tar or unzip
- rsync, sh, python3, … (wrappers): refused, as before: they run other programs

The checks themselves are here (whole programs, words added when rendering), in
tools/shell/effects/effects.py (cp and mv, which see the files they copy or move) and in
tools/shell/effects/archives.py (tar and zip members).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tools.shell.program_rules import parse_options

_REFUSED = {
    "ln": "`ln` makes links, which are not made under supervised: copy the file with cp",
    "link": "`link` makes hard links, which are not made under supervised: copy the file",
    "patch": "`patch` can make symbolic links from a git diff; use `git apply`, which runs "
    "here with core.symlinks=false",
}
_EXTRACTORS = frozenset({"cpio", "pax", "bsdtar", "7z", "7za", "7zr", "unsquashfs"})
_TAR_EXTRACT = ("-x", "--extract", "--get")
_GNU = sys.platform.startswith("linux")  # GNU tar reads options after its operands too


def program_refusal(name: str) -> str | None:
    """Why `name` is refused under supervised because making links is what it does."""
    if name in _EXTRACTORS:
        return (
            f"`{name}` extracts links from archives, which are not made under supervised; "
            "use tar or unzip, whose archives are checked first"
        )
    return _REFUSED.get(name)


def injected(name: str, args: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Words added to the command when it is rendered: after the program, and last among
    its options (before any `--`): they only take a power away, never add one."""
    if name == "git":
        return ("-c", "core.symlinks=false"), ()
    if name == "tar" and _GNU and parse_options("tar", args).used(*_TAR_EXTRACT):
        return (), ("--no-same-owner", "--no-same-permissions")
    return (), ()
