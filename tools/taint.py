"""Taint: what a turn has read that the owner did not write.

A model follows instructions wherever it finds them, so once words from elsewhere are in a
turn (a page, a search hit, an MCP result, someone else's file or message, a memory nobody
vetted), the model is the part an attacker may steer. From that moment until the turn ends,
every action that could send the owner's data out or change what lasts asks the owner
first, at every autonomy level, and the question says what was read ("after reading
example.org/page"). Reading stays free: a turn may read as much as it likes; what it may do
afterwards is what changes.

One Taint per turn, shared by every call of it (ToolCallContext.taint): tools mark what they
hand back, the runtime marks what the turn starts with, the gates ask `tainted`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

# A web address as people write one: with a scheme, or a bare host with a dot and a path.
_URLS = re.compile(r"\bhttps?://[^\s<>\"')\]]+|\b(?:[a-z0-9-]+\.)+[a-z]{2,}(?=[/\s:]|$)", re.I)


@dataclass
class Taint:
    """The untrusted sources a turn has read, in the order it read them."""

    sources: list[str] = field(default_factory=list)
    # Hosts the owner's own words in this turn named: fetching them sends nothing the
    # owner did not ask for, so it needs no question even after a page was read.
    owner_hosts: frozenset[str] = frozenset()

    def read(self, source: str) -> None:
        """Note that the turn now holds words from `source` ("example.org/page")."""
        if source and source not in self.sources:
            self.sources.append(source)

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    def why(self) -> str:
        """What the owner is told an approval is asked after: the first source, and how
        many more."""
        if not self.sources:
            return ""
        more = len(self.sources) - 1
        return f"after reading {self.sources[0]}" + (f" and {more} more" if more else "")


def hosts_named(text: str) -> frozenset[str]:
    """The hosts a text names, lower case, without port ("Fetch example.org/a" ->
    {"example.org"})."""
    hosts = set()
    for found in _URLS.findall(text):
        address = found if "://" in found else f"http://{found}"
        host = urlsplit(address).hostname
        if host:
            hosts.add(host.lower().rstrip("."))
    return frozenset(hosts)


def where(url: str) -> str:
    """A URL as a source is named: host and path, no scheme or query ("example.org/page")."""
    parts = urlsplit(url)
    return f"{parts.hostname or ''}{parts.path if parts.path != '/' else ''}"[:120]


class FileProvenance(Protocol):
    """Where the workspace's files came from (agent/durable/file_sources.py keeps it): a
    file written by a tainted turn carries its words to whoever reads it later."""

    async def source_of(self, path: Path) -> str: ...  # "": nothing untrusted wrote it

    async def record(self, paths: Iterable[Path], source: str) -> None: ...


def written_since(folder: Path, since: float, *, limit: int = 20_000) -> list[Path]:
    """The files under `folder` changed at or after `since` (seconds since the epoch): what a
    command of a tainted turn may have written. At most `limit` entries are looked at."""
    found: list[Path] = []
    seen = 0
    for directory, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            seen += 1
            if seen > limit:
                return found
            path = Path(directory, name)
            try:
                if path.stat(follow_symlinks=False).st_mtime >= since:
                    found.append(path)
            except OSError:
                continue
    return found
