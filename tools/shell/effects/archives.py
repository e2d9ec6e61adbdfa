"""What an archive would make when extracted, read before `tar -x` or `unzip` runs.

GNU tar and Info-ZIP unzip recreate symbolic links, hard links and (as root) device files
exactly as the archive says, and no option of theirs turns that off. So under `supervised`
the archive is read here first, without extracting anything and within a budget of bytes,
time and entries: an archive whose extracted members include a link or a special file is
refused, and the rest become effects (tools/shell/effects/file_effects.py) for the overwrite and
identity
checks. What cannot be read in the budget (a compression this reader lacks, a bomb, standard
input) is refused, saying what to do instead.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import io
import lzma
import os
import stat
import tarfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tools.paths import PolicyError
from tools.shell.effects.file_effects import Effect, Stdin, Verb, abs_path, is_dir, open_regular
from tools.shell.program_rules import parse_options

MAX_BYTES = 256 * 1024 * 1024  # decompressed bytes read to list a compressed tar
MAX_SECONDS = 2.0
MAX_ENTRIES = 50_000
_COMPRESSED = {b"\x1f\x8b": gzip.GzipFile, b"BZh": bz2.BZ2File, b"\xfd7zXZ\x00": lzma.LZMAFile}
_LISTING = ("-l", "-t", "-v", "-Z", "-p", "-c", "-z")  # unzip: nothing extracted
_UNREADABLE = {b"\x28\xb5\x2f\xfd": "zstd", b"\x04\x22\x4d\x18": "lz4", b"LZIP": "lzip"}


@dataclass(frozen=True)
class Member:
    name: str  # as stored: the path it is extracted to, relative to the target folder
    folder: bool
    special: str = ""  # what makes it refused when extracted: "the symbolic link a -> b"


class _OverBudget(Exception):
    pass


class _Budget(io.RawIOBase):
    """A decompressed stream that stops after MAX_BYTES or MAX_SECONDS: a small archive
    that inflates to terabytes cannot hold the daemon."""

    def __init__(self, inner: IO[bytes]) -> None:
        self._inner, self._left = inner, MAX_BYTES
        self._deadline = time.monotonic() + MAX_SECONDS

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(min(len(buffer), 1 << 20))
        self._left -= len(data)
        if self._left < 0 or time.monotonic() > self._deadline:
            raise _OverBudget
        buffer[: len(data)] = data
        return len(data)


def tar_members(path: Path, shown: str) -> list[Member]:
    """The members of the tar archive at `path` (plain, gzip, bzip2 or xz); PolicyError
    when it cannot be read within the budget."""
    try:
        with open_regular(path) as raw:
            return _read_tar(raw, shown)
    except _OverBudget:
        raise PolicyError(
            f"tar -x: {shown} is too large to check for links before it is extracted; "
            "decompress it first, then extract the .tar (a plain tar is checked quickly)"
        ) from None
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as exc:
        raise PolicyError(f"tar -x: {shown} cannot be read as a tar archive: {exc}") from None


def _read_tar(raw: IO[bytes], shown: str) -> list[Member]:
    magic = raw.read(6)
    raw.seek(0)
    for prefix, kind in _UNREADABLE.items():
        if magic.startswith(prefix):
            raise PolicyError(
                f"tar -x: the {kind} archive {shown} cannot be checked for links here; "
                f"decompress it first ({kind} -d), then extract the .tar"
            )
    opener = next((o for m, o in _COMPRESSED.items() if magic.startswith(m)), None)
    source: IO[bytes] = raw  # a plain tar: its contents are skipped by seeking
    if opener is not None:
        source = io.BufferedReader(_Budget(opener(fileobj=raw)))
    deadline = time.monotonic() + MAX_SECONDS
    members: list[Member] = []
    with tarfile.open(fileobj=source, mode="r:" if opener is None else "r|") as archive:
        for info in archive:
            if len(members) >= MAX_ENTRIES or time.monotonic() > deadline:
                raise _OverBudget
            members.append(Member(info.name, info.isdir(), _special(info)))
    return members


def _special(info: tarfile.TarInfo) -> str:
    if info.issym() or info.islnk():
        kind = "symbolic link" if info.issym() else "hard link"
        return f"the {kind} {info.name} -> {info.linkname}"
    if not (info.isfile() or info.isdir()):
        return f"the special file {info.name} (a device or a FIFO)"
    return ""


def zip_members(path: Path, shown: str) -> list[Member]:
    """The entries of the zip archive at `path` (its central directory only, which is
    cheap); a symbolic link among them is marked special: unzip would make it one."""
    try:
        with open_regular(path) as raw, zipfile.ZipFile(raw) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PolicyError(f"unzip: {shown} cannot be read as a zip archive: {exc}") from None
    if len(infos) > MAX_ENTRIES:
        raise PolicyError(f"unzip: {shown} has too many entries to check before extracting")
    members = []
    for info in infos:
        linked = stat.S_ISLNK(info.external_attr >> 16)
        special = f"the symbolic link {info.filename}" if linked else ""
        members.append(Member(info.filename, info.is_dir(), special))
    return members


def unzip_effects(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    parsed = parse_options(name, args)
    if parsed.used(*_LISTING) or not parsed.operands:
        return []
    archive, *wanted = parsed.operands
    if parsed.used("-x"):
        wanted = []  # the words after -x are all exclusions: check every entry
    if not os.path.isfile(abs_path(workspace, archive)) and archive[-4:].lower() != ".zip":
        archive += ".zip"  # what unzip tries next
    members = zip_members(Path(abs_path(workspace, archive)), archive)
    chosen = [m for m in members if not wanted or any(fnmatch.fnmatch(m.name, w) for w in wanted)]
    folders = [value or "." for option, value in parsed.options if option == "-d"] or ["."]
    junk = parsed.used("-j")
    keep = parsed.used("-n")
    return _extracted(name, archive, chosen, folders, 0, junk=junk, keep=keep)


def tar_effects(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    parsed = parse_options(name, args)
    archives = [value or "" for option, value in parsed.options if option in ("-f", "--file")]
    archive = archives[-1] if archives else "-"
    if not parsed.used("-x", "--extract", "--get"):
        changes = (
            "-c",
            "--create",
            "-r",
            "--append",
            "-u",
            "--update",
            "-A",
            "--concatenate",
            "--catenate",
            "--delete",
        )
        found = [Effect(archive, "replaces", name)] if parsed.used(*changes) else []
        if archive == "-":
            found = []
        if parsed.used("--remove-files"):
            found += [Effect(op, "deletes", name, is_dir(workspace, op)) for op in parsed.operands]
        return found
    if parsed.used("--transform", "--xform"):
        raise PolicyError(
            "tar -x with --transform writes names that cannot be checked before "
            "it runs; extract without it, then rename with mv"
        )
    if archive == "-":
        if stdin.path is None:
            raise PolicyError(
                "tar -x reads the archive from standard input, which cannot be "
                "checked for links first; save it to a file and use -f"
            )
        archive = stdin.path
    members = tar_members(Path(abs_path(workspace, archive)), archive)
    if parsed.operands and not parsed.used("--wildcards"):
        wanted = [op.strip("/").removeprefix("./") for op in parsed.operands]
        members = [m for m in members if _selected(m.name, wanted)]
    folders = [value or "." for option, value in parsed.options if option in ("-C", "--directory")]
    strips = [value or "" for option, value in parsed.options if option == "--strip-components"]
    strip = int(strips[-1]) if strips and strips[-1].isdigit() else 0
    keep = parsed.used("-k", "--keep-old-files", "--skip-old-files")
    return _extracted(name, archive, members, folders or ["."], strip, keep=keep)


def _selected(member: str, wanted: list[str]) -> bool:
    name = member.strip("/").removeprefix("./")
    return any(name == w or name.startswith(w + "/") for w in wanted)


def _extracted(
    name: str,
    archive: str,
    members: list[Member],
    folders: list[str],
    strip: int,
    *,
    junk: bool = False,
    keep: bool = False,
) -> list[Effect]:
    """Where each member lands; refused when one is a link or a special file."""
    found = []
    for member in members:
        if member.special:
            raise PolicyError(
                f"{name}: {archive} holds {member.special}; links and special "
                "files are not extracted under supervised"
            )
        parts = [p for p in member.name.split("/") if p not in ("", ".")][strip:]
        if junk:
            parts = parts[-1:] if not member.folder else []
        if not parts:
            continue
        verb: Verb = "creates" if member.folder or keep else "replaces"
        found += [Effect(os.path.join(f, *parts), verb, name) for f in folders]
    return found
