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

from tools.paths import GIT_DIR_NAME

# A web address as people write one: with a scheme (its host may be a bracketed IPv6
# address, "http://[::1]:8080/"), or a bare host with a dot (a port, a path).
_URLS = re.compile(
    r"\bhttps?://(?:\[[0-9a-z:.%_-]+\][^\s<>\"')\]]*|[^\s<>\"')\]]+)"
    r"|\b(?:[a-z0-9-]+\.)+[a-z]{2,}(?::\d+)?(?=[/\s]|$)",
    re.I,
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass
class Taint:
    """The untrusted sources a turn has read, in the order it read them."""

    sources: list[str] = field(default_factory=list)
    # What the speaker's own words in this turn named (`addresses_named`): "host:port"s and
    # whole URLs. A fetch of one sends nothing they did not ask for (`named_by_owner`).
    owner_hosts: frozenset[str] = frozenset()
    owner_urls: frozenset[str] = frozenset()
    # The memories the turn kept unvetted (memory_store): the owner is offered to vet them.
    left_unvetted: list[int] = field(default_factory=list)

    def read(self, source: str) -> None:
        """Note that the turn now holds words from `source` ("example.org/page")."""
        if source and source not in self.sources:
            self.sources.append(source)

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    def named_by_owner(self, url: str) -> bool:
        """A fetch of `url` goes where the owner's words pointed: the very URL they wrote, or
        a host and port they named with no query (a query is where data rides; a page on
        that host asking for `?d=<notes>` is asked about)."""
        url = url.strip()
        if url.rstrip("/") in self.owner_urls:
            return True
        try:
            parts = urlsplit(url)
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
        except ValueError:  # malformed ("http://[fe80::1/"): no address anyone named
            return False
        host = (parts.hostname or "").lower().rstrip(".")
        return bool(host) and f"{host}:{port}" in self.owner_hosts and not parts.query

    def why(self) -> str:
        """What the owner is told an approval is asked after: the first source, and how
        many more."""
        if not self.sources:
            return ""
        more = len(self.sources) - 1
        return f"after reading {self.sources[0]}" + (f" and {more} more" if more else "")


def addresses_named(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The "host:port"s and the whole URLs a text names ("Summarise https://example.org/a
    and docs.example.net" -> {"example.org:443", "docs.example.net:80",
    "docs.example.net:443"}, {"https://example.org/a"}); a host without a scheme or a port
    stands for both web ports."""
    hosts: set[str] = set()
    urls: set[str] = set()
    for found in _URLS.findall(text):
        found = found.rstrip(".,;:!?")
        try:
            parts = urlsplit(found if "://" in found else f"//{found}")
            port = parts.port
        except ValueError:  # malformed (an unclosed "[", a port past 65535): names nothing
            continue
        host = (parts.hostname or "").lower().rstrip(".")
        if not host:
            continue
        if "://" in found:
            urls.add(found.rstrip("/"))
            port = port or _DEFAULT_PORTS.get(parts.scheme.lower())
        hosts.update({f"{host}:{port}"} if port else {f"{host}:80", f"{host}:443"})
    return frozenset(hosts), frozenset(urls)


def host_of(url: str) -> str:
    """The host a URL goes to, lower case ("" for a malformed URL, which goes nowhere)."""
    try:
        return (urlsplit(url.strip()).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def where(url: str) -> str:
    """A URL as a source is named: host and path, no scheme or query ("example.org/page")."""
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed: still a source, named by the text itself
        return url[:120]
    return f"{parts.hostname or ''}{parts.path if parts.path != '/' else ''}"[:120]


class FileProvenance(Protocol):
    """Where the workspace's files came from (agent/durable/file_sources.py keeps it): a
    file written by a tainted turn carries its words to whoever reads it later."""

    async def source_of(self, path: Path) -> str: ...  # "": nothing untrusted wrote it

    async def record(self, paths: Iterable[Path], source: str) -> None: ...


def written_since(folder: Path, since: float, *, limit: int = 20_000) -> list[Path]:
    """The files under `folder` changed at or after `since` (seconds since the epoch): what a
    command of a tainted turn may have written. The change time (st_ctime) is compared: every
    write, create, rename or chmod moves it and no command can set it back, as `touch -d`
    sets the mtime back. Every folder is looked in, dot-folders too (`.notes/` is as
    readable as `notes/`); a git folder last, so that its objects, often thousands, do not
    use up the `limit` of files looked at before the rest of the workspace."""
    found: list[Path] = []
    seen = 0
    tops = [folder]
    for top in tops:  # grows while walked: each git folder met is walked after the rest
        for directory, folders, files in os.walk(top):
            gits = [name for name in folders if name.lower() == GIT_DIR_NAME]
            tops += [Path(directory, name) for name in gits]
            folders[:] = [name for name in folders if name not in gits]
            for name in files:
                seen += 1
                if seen > limit:
                    return found
                path = Path(directory, name)
                try:
                    if path.stat(follow_symlinks=False).st_ctime >= since:
                        found.append(path)
                except OSError:
                    continue
    return found
