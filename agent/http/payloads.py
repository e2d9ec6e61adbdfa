"""A webhook's JSON payload read by its hook's settings (pure): a small JSON path (`$.a.b`,
`$.commits[0].id`), the `match` filter, and the template that makes the turn's text."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_PLACE = re.compile(r"\{(\$[^{}]*)\}")
MAX_TEXT = 8_000  # characters of payload a turn is given
_MISSING = object()


def at_path(data: Any, path: str) -> Any:
    """The value at `path` ("$", "$.a.b", "$.list[2].c"), or None when there is none."""
    rest, value = path.removeprefix("$"), data
    while rest:
        step = _STEP.match(rest)
        if step is None:
            return None
        key, index = step.groups()
        if key is not None and isinstance(value, dict):
            value = value.get(key, _MISSING)
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
        if value is _MISSING:
            return None
        rest = rest[step.end() :]
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def unmatched(data: Any, match: Mapping[str, str]) -> str | None:
    """The first `match` path whose value differs (None: the payload matches all)."""
    return next((path for path, want in match.items() if _text(at_path(data, path)) != want), None)


def render(template: str, data: Any) -> str:
    """The template with each `{$.path}` replaced by the payload's value there ("" when
    missing); no template: the whole payload as indented JSON. Cut to MAX_TEXT characters."""
    if template:
        text = _PLACE.sub(lambda m: _text(at_path(data, m.group(1))), template)
    else:
        text = json.dumps(data, ensure_ascii=False, indent=1)
    if len(text) > MAX_TEXT:
        text = f"{text[:MAX_TEXT]}\n[cut: {len(text):,} characters, the first {MAX_TEXT:,} kept]"
    return text
