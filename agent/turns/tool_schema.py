"""Whether arguments a model wrote as text fit a tool's JSON schema.

A call read out of prose is only a call when it fits: the keys the schema requires, no
key it forbids, values of the basic JSON types it names. This is a first filter, not the
tool's own validation (which runs later and answers the model with what is wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def misfit(arguments: Any, schema: Mapping[str, Any]) -> str:
    """Why `arguments` do not fit `schema`, or "" when they do."""
    if not isinstance(arguments, dict):
        return "its arguments are not a JSON object"
    properties: Mapping[str, Any] = schema.get("properties") or {}
    missing = [key for key in schema.get("required") or () if key not in arguments]
    if missing:
        return f"missing {', '.join(missing)} (it takes {_names(properties)})"
    if schema.get("additionalProperties") is False:
        unknown = [key for key in arguments if key not in properties]
        if unknown:
            return f"unknown argument {', '.join(unknown)} (it takes {_names(properties)})"
    for key, value in arguments.items():
        spec = properties.get(key)
        if isinstance(spec, Mapping) and not _fits(value, spec):
            return f"{key} has the wrong type"
    return ""


def _fits(value: Any, spec: Mapping[str, Any]) -> bool:
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list):
        return any(_fits(value, option) for option in options if isinstance(option, Mapping))
    if "enum" in spec and isinstance(spec["enum"], list) and value not in spec["enum"]:
        return False
    kind = spec.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    return not kinds or any(_is(value, name) for name in kinds)


def _is(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    types = _TYPES.get(kind)
    if types is None:
        return True  # a type we do not know: the tool's own validation decides
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, types)


def _names(properties: Mapping[str, Any]) -> str:
    return ", ".join(properties) or "no arguments"
