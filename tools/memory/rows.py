"""A memory as a value, and as a row: of the memories table, and of an export file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

Source = Literal["chat", "tool", "import"]


@dataclass(frozen=True)
class Memory:
    id: int
    scope: str
    content: str
    tags: tuple[str, ...]
    source: Source  # how it came: said in a chat, stored by a tool, imported
    created_at: float  # seconds since the epoch
    updated_at: float
    score: float = 0.0  # set by MemoryStore.search(), see there; 0 elsewhere
    # Kept by a turn that had read what the owner did not write: what it had read ("after
    # reading example.org/page"), until the owner vets it; "": vetted.
    unvetted: str = ""


@dataclass(frozen=True)
class ForgetResult:
    """What forget() did: deleted one memory, or (a query matching several) deleted nothing
    and lists the candidates to choose from. Both empty: nothing matched."""

    deleted: Memory | None = None
    candidates: tuple[Memory, ...] = ()


@dataclass(frozen=True)
class ImportRow:
    scope: str
    content: str
    tags: tuple[str, ...]
    created_at: float
    updated_at: float


def tidy_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Tags stripped, empty ones dropped, each once, in their order."""
    return tuple(dict.fromkeys(t.strip() for t in tags if t.strip()))


def from_row(row: tuple[Any, ...]) -> Memory:
    """A row of `SELECT id, scope, content, tags, source, created_at, updated_at, unvetted`."""
    ident, scope, content, tags, source, created, updated, unvetted = row
    return Memory(
        ident, scope, content, tuple(json.loads(tags)), source, created, updated, unvetted=unvetted
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")


def to_row(memory: Memory) -> dict[str, Any]:
    """One line of an export file."""
    return {
        "id": memory.id,
        "scope": memory.scope,
        "content": memory.content,
        "tags": list(memory.tags),
        "source": memory.source,
        "created_at": iso(memory.created_at),
        "updated_at": iso(memory.updated_at),
    }


def _time(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name}: not a date")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{name}: {value!r} is not an ISO 8601 date") from None
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"{name}: not a date")


def parse_row(row: Mapping[str, Any], number: int, now: float) -> ImportRow:
    """An export line checked: scope and content are non-empty strings, tags a list of
    strings, dates numbers or ISO 8601 (missing: now). ValueError names the row."""
    try:
        if not isinstance(row, Mapping):
            raise ValueError("not a JSON object")
        scope, content = row.get("scope"), row.get("content")
        if not isinstance(scope, str) or not scope.strip():
            raise ValueError("scope: missing or empty")
        if not isinstance(content, str) or not content.strip():
            raise ValueError("content: missing or empty")
        tags = row.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ValueError("tags: not a list of strings")
        created = _time(row.get("created_at", now), "created_at")
        updated = _time(row.get("updated_at", created), "updated_at")
    except ValueError as exc:
        raise ValueError(f"row {number}: {exc}") from None
    return ImportRow(scope, content.strip(), tuple(cast(list[str], tags)), created, updated)
