"""How the pieces of a call written as text are read: JSON values (also with the doubled
braces a template typo teaches), the shapes a call takes in JSON, Python call syntax, and
the XML argument pairs of GLM-4.5 and Qwen3-Coder. text_call_formats.py decides where calls
are; this only reads them.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from typing import Any

Candidate = tuple[str, Any]  # a name and its arguments as written (dict, JSON text, None)

NAME_KEYS = frozenset({"name", "tool", "tool_name", "function"})
ARG_KEYS = frozenset({"arguments", "parameters", "args"})
_DECODER = json.JSONDecoder()
_GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)
_QWEN_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.S)
_QWEN_PARAM = re.compile(
    r"<parameter=([^>\s]+)>\n?(.*?)\n?(?:</parameter>|(?=<parameter=)|\Z)", re.S
)


def json_calls(body: str) -> list[Candidate] | None:
    """Call-shaped JSON values filling `body` (separated by blanks, `;` or `,`), or None."""
    values: list[Any] = []
    pos, text = 0, body.strip()
    while pos < len(text):
        decoded = decode_at(text, pos)
        if decoded is None:
            return None
        values.append(decoded[0])
        pos = decoded[1]
        while pos < len(text) and (text[pos].isspace() or text[pos] in ";,"):
            pos += 1
    found: list[Candidate] = []
    for value in values:
        items = call_items(value)
        if items is None:
            return None
        found += items
    return found or None


def call_items(value: Any) -> list[Candidate] | None:
    """The calls a JSON value is shaped as (a call, a list of calls, an OpenAI message)."""
    if isinstance(value, list):
        items = [call_items(item) for item in value]
        if not value or any(item is None for item in items):
            return None
        return [call for item in items if item for call in item]
    if not isinstance(value, dict):
        return None
    keys = set(value)
    if keys == {"tool_calls"}:
        return call_items(value["tool_calls"])
    if keys == {"function_call"}:
        return call_items(value["function_call"])
    inner = value.get("function")
    if isinstance(inner, dict) and keys <= {"function", "type", "id", "index"}:
        return call_items(inner)
    names = keys & NAME_KEYS
    args = keys & ARG_KEYS
    if len(names) != 1 or len(args) > 1 or keys - NAME_KEYS - ARG_KEYS - {"id", "type"}:
        return None
    name = value[names.pop()]
    if not isinstance(name, str) or not name:
        return None
    return [(name, value[args.pop()] if args else None)]


def python_calls(body: str) -> list[Candidate] | None:
    """`name(a=1, b="x")`, `name({"a": 1})` or a list of them, as Python literals."""
    try:
        node = ast.parse(body.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # the last two: too deep
        return None
    calls = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    found: list[Candidate] = []
    for call in calls:
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        try:
            if call.args:
                if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
                    return None
                arguments: Any = _literal(call.args[0])
            else:
                arguments = {kw.arg: _literal(kw.value) for kw in call.keywords if kw.arg}
                if len(arguments) != len(call.keywords):
                    return None
        except (ValueError, RecursionError):
            return None
        found.append((call.func.id, arguments))
    return found or None


_JSON_NAMES = {"true": True, "false": False, "null": None}


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    return ast.literal_eval(node)


def glm_calls(body: str) -> list[Candidate] | None:
    """GLM-4.5/4.6: the name on the first line, then `<arg_key>k</arg_key><arg_value>v`."""
    name, _, rest = body.strip().partition("\n")
    pairs = _GLM_ARG.findall(rest)
    if not name.strip() or not pairs:
        return None
    return [(name.strip(), {key.strip(): _scalar(value.strip()) for key, value in pairs})]


def qwen_xml_calls(body: str) -> list[Candidate] | None:
    """Qwen3-Coder: `<function=name><parameter=k>v</parameter></function>`."""
    found: list[Candidate] = []
    for name, params in _QWEN_FUNCTION.findall(body):
        args = {key: _scalar(value) for key, value in _QWEN_PARAM.findall(params)}
        found.append((name, args))
    return found or None


def _scalar(value: str) -> Any:
    """A value written bare in XML: JSON when it reads as JSON, else the string."""
    try:
        return read_json(value)
    except json.JSONDecodeError:
        return value


def read_json(text: str) -> Any:
    """json.loads for JSON a model wrote: nested deeper than Python reads (a small model
    repeating "[") it is a JSONDecodeError like any other text that is not JSON, not a
    RecursionError out of the turn."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep to read", text, 0) from None


# A value opening MAX_CALL_DEPTH brackets in a row (strings and keys between them, no closing
# one) is no call: a model stuck on "[" or "{". Found in a few steps; the decoder would go
# a thousand levels down at every one of those brackets.
MAX_CALL_DEPTH = 64
_TOO_DEEP = re.compile(
    r'[\[{](?:(?:"(?:[^"\\]|\\.)*"|[^\[\]{}"])*[\[{]){' + str(MAX_CALL_DEPTH) + "}", re.S
)
# How a JSON object or array goes on after its bracket. A start that does not is no value,
# and is not handed to the decoder, whose error counts the lines of the whole text before it.
_OPENS_VALUE = re.compile(r'\{\s*["}]|\[\s*[-"\d\[\]{tfn]')


class Reads:
    """What the failed starts of one search through a reply may read, in characters: a few
    times the reply. Every bracket of a reply may start a call, and a reply of nested
    brackets (a small model stuck) read from each one is minutes of a blocked event loop."""

    def __init__(self, text: str) -> None:
        self.left = 8 * len(text) + 4096

    def spent(self, characters: int) -> None:
        self.left -= characters


def decode_at(text: str, pos: int, reads: Reads | None = None) -> tuple[Any, int] | None:
    """The JSON value starting at `pos` and where it ends; `{{...}}` read as `{...}`. None
    when there is none, also when it is nested too deep to read (then it is text). `reads`:
    what a failure read is charged to."""
    reads = reads or Reads(text)
    if deep := _TOO_DEEP.match(text, pos):
        reads.spent(deep.end() - pos)
        return None
    try:
        if text[pos : pos + 1] not in ("{", "[") or _OPENS_VALUE.match(text, pos):
            return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        reads.spent(exc.pos - pos + 1)
    except RecursionError:
        reads.spent(len(text) - pos)
        return None
    if not text.startswith("{{", pos):
        return None
    end = _balanced_end(text, pos)
    if end is None:
        return None
    try:
        return read_json(text[pos:end].replace("{{", "{").replace("}}", "}")), end
    except json.JSONDecodeError:
        return None


@functools.lru_cache(maxsize=4)
def _closing_ends(text: str) -> dict[int, int | None]:
    """Of a text's `{`s, where each one's `}` ends, as far as scans of it found: the
    search for calls tries every `{` of a reply, and one scan answers for all it passed."""
    return {}


def _balanced_end(text: str, pos: int) -> int | None:
    """Where the `{` at `pos` is closed (one past its `}`), None when it never is. Read to
    the end: every `{` passed outside a string is noted in `_closing_ends` (a scan from one
    of them would see the same strings), so a reply of thousands of `{` is read once."""
    ends = _closing_ends(text)
    if pos in ends:
        return ends[pos]
    opened: list[int] = []
    in_string, escaped = False, False
    for index in range(pos, len(text)):
        char = text[index]
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char == "{":
            opened.append(index)
        elif char == "}" and opened:
            ends[opened.pop()] = index + 1
    ends.update(dict.fromkeys(opened))
    return ends[pos]
