"""What the model is shown of a server's tool: a name the providers take, a description
without control characters, and an input schema that is a valid JSON schema of an object,
within a size. The server is not trusted to have got any of it right: a tool whose schema
fails is left out (the caller logs why), the rest are cut to size."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

MAX_NAME = 64  # the providers' limit for a function's name
MAX_DESCRIPTION_CHARS = 1_000
MAX_SCHEMA_CHARS = 8_000  # the schema as compact JSON
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
_SPACES = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class OfferedTool:
    name: str  # NAME__tool, as the model calls it
    remote: str  # the server's own name for it
    description: str
    parameters: dict[str, Any]
    read_only_hint: bool


def offered_name(server: str, tool: str) -> str:
    """`server__tool` in the providers' alphabet ([A-Za-z0-9_-], at most 64 characters)."""
    return f"{server}__{_NOT_IN_NAMES.sub('_', tool)}"[:MAX_NAME]


def clean_text(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """Text without control or invisible format characters (no escape sequences, no
    right-to-left overrides, no zero-width words), spaces tidied, cut to `limit`."""
    kept = "".join(
        char if char == "\n" else " " if char == "\t" else char
        for char in text
        if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf", "Co", "Cs")
    )
    kept = _BLANK_LINES.sub("\n\n", _SPACES.sub(" ", kept)).strip()
    return kept if len(kept) <= limit else kept[: limit - 1].rstrip() + "…"


def schema_problem(schema: object) -> str | None:
    """Why `schema` cannot be offered as a tool's parameters, or None."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type") != "object":
        return f"its input schema is of type {schema.get('type')!r}, not an object"
    if not isinstance(schema.get("properties", {}), dict):
        return "its input schema's properties are not an object"
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_CHARS:
        return f"its input schema is {size} characters long (at most {MAX_SCHEMA_CHARS})"
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not a valid JSON schema ({exc.message})"
    return None


def offered(server: str, tool: Any) -> OfferedTool | str:
    """The tool as offered, or why it is left out. `tool`: the SDK's `mcp_types.Tool`."""
    problem = schema_problem(tool.input_schema)
    if problem is not None:
        return problem
    parameters = {key: value for key, value in tool.input_schema.items() if key != "$schema"}
    title = tool.title or (tool.annotations.title if tool.annotations else None) or ""
    description = clean_text(tool.description or title or tool.name)
    hint = bool(tool.annotations and tool.annotations.read_only_hint)
    return OfferedTool(offered_name(server, tool.name), tool.name, description, parameters, hint)
