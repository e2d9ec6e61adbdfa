"""Every key of config.toml as the settings models define it: its TOML path, type, default,
environment variable and description, table by table in the models' order."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agent.config import Settings
from agent.home import ENV_PREFIX
from channels.config import ChannelsSettings, PersonSettings
from channels.registry import channel_kinds

NAME = "NAME"  # the part of a path the owner names: [boards.NAME], [mcp.servers.NAME]
# Tables whose keys another table already lists: documented by their description alone.
SAME_KEYS_AS = {"boards": "hardware"}


@dataclass(frozen=True)
class Key:
    """One key of one table."""

    name: str
    type: str
    default: Any  # PydanticUndefined when the key must be given
    description: str
    secret: bool = False
    example: Any = PydanticUndefined  # what a commented table shows instead of the default


@dataclass
class Table:
    """One [table] of config.toml; `named`: one per name the owner picks, shown commented."""

    path: str
    description: str
    named: bool = False
    keys: list[Key] = field(default_factory=list)

    def env(self, key: Key) -> str:
        return ENV_PREFIX + f"{self.path}.{key.name}".replace(".", "__").upper()


def tables() -> list[Table]:
    """Every table of config.toml, each followed by the tables inside it."""
    found: list[Table] = []
    for name, info in Settings.model_fields.items():
        found.extend(_walk(name, info, named=False))
    return found


def _walk(path: str, info: FieldInfo, named: bool) -> list[Table]:
    annotation = info.annotation
    item = _table_item(annotation)
    if item is not None:  # dict[str, Model]: one table per name
        inner = path.rpartition(".")[2]
        table = Table(f"{path}.{NAME}", _text(info.description), named=True)
        if inner in SAME_KEYS_AS:
            return [table]
        return _model(table, item)
    assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return _model(Table(path, _text(annotation.__doc__), named=named), annotation)


def _model(table: Table, model: type[BaseModel]) -> list[Table]:
    inside: list[Table] = []
    for name, info in model.model_fields.items():
        if _table_item(info.annotation) is not None or _is_model(info.annotation):
            inside.extend(_walk(f"{table.path}.{name}", info, table.named))
        else:
            table.keys.append(_key(name, info))
    if model is ChannelsSettings:
        for name, section in ChannelsSettings.section_models().items():
            part = Table(f"{table.path}.{name}", _text(section.__doc__), named=table.named)
            inside.extend(_model(part, section))
    if model is PersonSettings:
        for kind in channel_kinds():
            table.keys.append(Key(kind.name, "string", "", f"their id on {kind.name}"))
    return [table, *inside]


def _key(name: str, info: FieldInfo) -> Key:
    default = info.get_default(call_default_factory=True)
    examples = info.examples or [PydanticUndefined]
    return Key(
        name,
        type_name(info.annotation),
        default,
        _text(info.description),
        secret=SecretStr in (info.annotation, *get_args(info.annotation)),
        example=examples[0],
    )


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _table_item(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) is dict and _is_model(get_args(annotation)[1]):
        item: type[BaseModel] = get_args(annotation)[1]
        return item
    return None


def _text(doc: str | None) -> str:
    return " ".join((doc or "").split())


_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "secret"}


def type_name(annotation: Any) -> str:
    """A TOML reader's name for `annotation`: `integer`, `list of string`, `"a" or "b"`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " or ".join(json.dumps(arg, ensure_ascii=False) for arg in args)
    if origin in (Union, types.UnionType):
        named = [type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(dict.fromkeys(named)) + (" (optional)" * (len(named) < len(args)))
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"table of {type_name(args[1])}"
    return _NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def toml_value(value: Any) -> str:
    """`value` written as TOML (None and a missing value: "")."""
    if value is None or value is PydanticUndefined:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    raise TypeError(f"no TOML for {value!r}")
