"""Media markers: `[IMAGE:path-or-url]` and friends, taken out of a reply's text (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from channels.capabilities import MEDIA_KINDS, MediaKind

_MARKER = re.compile(r"\[(" + "|".join(MEDIA_KINDS) + r"):\s*([^\]\n]+?)\s*\]")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Marker:
    kind: MediaKind
    target: str

    @property
    def is_url(self) -> bool:
        return self.target.startswith(("http://", "https://"))


def extract_markers(text: str) -> tuple[str, list[Marker]]:
    """The text without its markers, and the markers in order.

    Markers inside code fences are left alone: there they are examples, not attachments.
    """
    markers: list[Marker] = []
    kept: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            for match in _MARKER.finditer(line):
                kind: MediaKind = match.group(1)  # type: ignore[assignment]
                markers.append(Marker(kind=kind, target=match.group(2)))
            stripped = _MARKER.sub("", line)
            if stripped.strip() or not line.strip():
                kept.append(stripped.rstrip())
            continue
        kept.append(line)
    cleaned = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return cleaned, markers


def marker_for(kind: MediaKind, target: str) -> str:
    return f"[{kind}:{target}]"
