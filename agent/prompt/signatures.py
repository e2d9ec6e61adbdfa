"""A tool as one line a small model reads: `file_read {"path": string, "start_line"?: integer}`.

With the <tool_call> text protocol the tools are in the prompt itself, and a JSON schema
spends most of its tokens on its own structure (`{"properties": {"path": {"type":
"string"}}, "required": [...], "type": "object"}`); the thirteen default tools took 685 tokens
that way in compact mode. A signature says the same for a flat schema — each parameter's
name, whether it is optional, its type, an enum's values — and a parameter's description
(the formats a small model needs) after it. It reads as the arguments object the protocol
asks for, not as a call: with `name(path, lines?)` a 1.5B model answered
`file_list(docs)` as text instead of calling. A parameter whose schema is not flat (an
object, a union) keeps its JSON, so nothing is lost. The call the model writes is still
checked against the tool's whole schema.
"""

from __future__ import annotations

import json
from typing import Any

_SIMPLE = frozenset({"string", "integer", "number", "boolean"})


def signature(name: str, schema: Any, description: str) -> str:
    """`name: description {"a": string, "b"?: integer}` then `a: its description` for each
    described parameter."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return f"{name}: {description} {{}}"
    required = set(schema.get("required") or ())
    shown, described = [], []
    for parameter, sub in properties.items():
        mark = "" if parameter in required else "?"
        shown.append(f'"{parameter}"{mark}: {_kind(sub)}')
        about = sub.get("description") if isinstance(sub, dict) else None
        if isinstance(about, str) and about:
            described.append(f"{parameter}: {about}")
    line = f"{name}: {description} {{{', '.join(shown)}}}"
    return line if not described else f"{line}; {'; '.join(described)}"


def _kind(schema: Any) -> str:
    """`string`, `integer`, `string[]`, `"a"|"b"`; else the schema's compact JSON."""
    if not isinstance(schema, dict):
        return _json(schema)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "|".join(json.dumps(value) for value in enum)
    kind = schema.get("type")
    if kind in _SIMPLE:
        return str(kind)
    if kind == "array" and isinstance(items := schema.get("items"), dict):
        inner = _kind(items)
        if not inner.startswith("{"):
            return f"({inner})[]" if "|" in inner else f"{inner}[]"
    return _json({k: v for k, v in schema.items() if k != "description"})


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
