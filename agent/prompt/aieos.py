"""AIEOS identities: a JSON description of the agent's persona, rendered for the prompt."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent.prompt.context import IdentityInfo
from tools.paths import PathRules, PolicyError

_MAX_DEPTH = 4
_MAX_BYTES = 1024 * 1024


class AieosError(Exception):
    """The AIEOS identity is missing or invalid; the caller falls back to the Markdown files."""


def load_aieos(identity: IdentityInfo, files: PathRules) -> str:
    """The identity as a Markdown block, from `aieos_inline` or the file at `aieos_path`:
    in the workspace through its resolver (no link followed); a path the owner configured
    outside the workspace, where no tool writes, is read as it is."""
    if identity.aieos_inline.strip():
        raw, source = identity.aieos_inline, "aieos_inline"
    elif identity.aieos_path:
        path = Path(identity.aieos_path).expanduser()
        path = path if path.is_absolute() else files.workspace / path
        inside = files.workspace in Path(os.path.normpath(path)).parents
        try:
            data = files.read_bytes(str(path), _MAX_BYTES) if inside else path.read_bytes()
        except PolicyError as exc:
            raise AieosError(f"{path} is refused: {exc.short}") from None
        except OSError as exc:
            raise AieosError(f"cannot read {path}: {exc.strerror}") from None
        raw, source = data.decode("utf-8", errors="replace"), str(path)
    else:
        raise AieosError("neither aieos_path nor aieos_inline is set")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AieosError(f"{source} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("identity"), dict):
        raise AieosError(f"{source} has no `identity` object")
    return render_aieos(data)


def render_aieos(data: dict[str, Any]) -> str:
    """Every section of the document as a heading with nested bullet lines, keys sorted,
    so the same JSON always gives the same bytes."""
    lines = ["### Identity (AIEOS)"]
    name = _name_of(data["identity"])
    if name:
        lines += ["", f"You are {name}."]
    for key in sorted(data):
        value = data[key]
        if key.startswith(("$", "@")) or key in ("standard", "metadata") or not value:
            continue
        lines += ["", f"**{_title(key)}**", *_bullets(value, 0)]
    return "\n".join(lines)


def _name_of(identity: dict[str, Any]) -> str:
    names = identity.get("names")
    if isinstance(names, dict):
        parts = [str(names[k]) for k in ("first", "middle", "last") if names.get(k)]
        return " ".join(parts) or str(names.get("nickname", ""))
    return str(identity.get("name", ""))


def _bullets(value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    if depth >= _MAX_DEPTH:
        return [f"{pad}- {json.dumps(value, ensure_ascii=False, sort_keys=True)}"]
    if isinstance(value, dict):
        lines: list[str] = []
        for key in sorted(value):
            item = value[key]
            if item in (None, "", [], {}):
                continue
            if isinstance(item, dict | list):
                lines += [f"{pad}- {_title(key)}:", *_bullets(item, depth + 1)]
            else:
                lines.append(f"{pad}- {_title(key)}: {item}")
        return lines
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            if isinstance(item, dict | list):
                out += _bullets(item, depth)
            else:
                out.append(f"{pad}- {item}")
        return out
    return [f"{pad}- {value}"]


def _title(key: str) -> str:
    return key.replace("_", " ").strip().capitalize()
