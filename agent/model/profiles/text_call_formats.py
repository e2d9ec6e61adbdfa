"""How open models write a tool call as text: a table of formats, each after a model's own
chat template or the habits of models trained on it (sources in the table), each finding
the stretches of a reply that hold call-shaped text.

A new way of writing calls is one entry in `FORMATS` and its finder. Whether a call found
here is run (an offered tool, arguments that fit) is the turn's to judge:
agent/turns/tool_call_text.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent.model.profiles.text_call_values import (
    Candidate,
    Reads,
    call_items,
    decode_at,
    glm_calls,
    json_calls,
    python_calls,
    qwen_xml_calls,
)


@dataclass(frozen=True)
class Hit:
    """A stretch of the reply that holds call-shaped text."""

    start: int
    end: int
    candidates: tuple[Candidate, ...]
    explicit: bool  # written in a call markup: a call attempt even when nothing fits
    pythonic: bool = False  # `name(...)`: alone in a reply it may well be an answer


@dataclass(frozen=True)
class Format:
    name: str
    source: str  # where the shape comes from
    find: Callable[[str], Iterator[Hit]]


# Reasoning (`<think>`: Qwen3, DeepSeek-R1) holds drafts, not calls.
THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)
_TAGS = "tool_call|tools|tool|function_call|functioncall|toolcall|tool_use"
_TAGGED = re.compile(rf"<({_TAGS})>(.*?)(?:</\1>|(?=<(?:{_TAGS})>)|\Z)", re.S)
_PHI = re.compile(r"<\|tool_call\|>(.*?)(?:<\|/tool_call\|>|\Z)", re.S)
_FUNCTOOLS = re.compile(r"functools\[")
_PYTHON_TAG = re.compile(r"<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|\Z)", re.S)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_NAMED = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(?:\[ARGS\])?\s*(?=\{)")
_DS = r"<[|｜]tool▁{}[|｜]>"
_DEEPSEEK = re.compile(
    _DS.format("call▁begin") + r"(?:function" + _DS.format("sep") + r")?(.*?)"
    r"(?:" + _DS.format("sep") + r"|\n)(.*?)" + _DS.format("call▁end"),
    re.S,
)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n?(.*?)```", re.S)
_CALL_FENCES = frozenset({"tool_call", "tool_code", "tool", "function_call"})
_CODE_FENCES = frozenset({"", "json", "json5", "javascript", "js", "python", "py"})
_OPENER = re.compile(r"[\[{]")
_CALL_LINE = re.compile(r"^[ \t]*\[?[ \t]*[A-Za-z_][\w.]*\(.*\)[ \t]*\]?[ \t]*$", re.M)


def _tagged(text: str) -> Iterator[Hit]:
    """`<tool_call>{...}</tool_call>` (Hermes, Qwen2.5/3), also unclosed at the end, with
    GLM-4.5's `<arg_key>` and Qwen3-Coder's `<function=...>` bodies; and the wrappers small
    models confuse it with (`<tools>`, the tag around the signatures in Qwen's template)."""
    for match in _TAGGED.finditer(text):
        body = match.group(2)
        found = json_calls(body) or python_calls(body) or glm_calls(body) or qwen_xml_calls(body)
        if found:
            yield Hit(match.start(), match.end(), tuple(found), explicit=True)


def _phi(text: str) -> Iterator[Hit]:
    """Phi-4-mini: `<|tool_call|>{...}<|/tool_call|>`, or `functools[{...}]`."""
    for match in _PHI.finditer(text):
        found = json_calls(match.group(1))
        if found:
            yield Hit(match.start(), match.end(), tuple(found), explicit=True)
    for match in _FUNCTOOLS.finditer(text):
        decoded = decode_at(text, match.end() - 1)
        found = call_items(decoded[0]) if decoded else None
        if decoded and found:
            yield Hit(match.start(), decoded[1], tuple(found), explicit=True)


def _python_tag(text: str) -> Iterator[Hit]:
    """Llama 3.1-3.3: `<|python_tag|>` then JSON calls (`;` between them) or `name(...)`."""
    for match in _PYTHON_TAG.finditer(text):
        found = json_calls(match.group(1)) or python_calls(match.group(1))
        if found:
            yield Hit(match.start(), match.end(), tuple(found), explicit=True)


def _mistral(text: str) -> Iterator[Hit]:
    """Mistral: `[TOOL_CALLS][{...}]` (v3 tokenizer), `[TOOL_CALLS]name{...}` (v11) and
    `[TOOL_CALLS]name[ARGS]{...}` (v13: Mistral Small 3.2, Magistral, Devstral)."""
    for marker in _MISTRAL.finditer(text):
        pos = marker.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text[pos : pos + 1] in ("[", "{"):
            decoded = decode_at(text, pos)
            found = call_items(decoded[0]) if decoded else None
            if decoded and found:
                yield Hit(marker.start(), decoded[1], tuple(found), explicit=True)
            continue
        named = _MISTRAL_NAMED.match(text, pos)
        decoded = decode_at(text, named.end()) if named else None
        if named and decoded:
            yield Hit(marker.start(), decoded[1], ((named.group(1), decoded[0]),), explicit=True)


def _deepseek(text: str) -> Iterator[Hit]:
    """DeepSeek V3/R1 (`function<｜tool▁sep｜>name` then a ```json fence) and V3.1
    (`name<｜tool▁sep｜>{...}`), between `<｜tool▁call▁begin｜>` and `<｜tool▁call▁end｜>`."""
    for match in _DEEPSEEK.finditer(text):
        body = _FENCE.sub(lambda m: m.group(2), match.group(2)).strip()
        decoded = decode_at(body, 0)
        name = match.group(1).strip()
        if decoded and name:
            yield Hit(match.start(), match.end(), ((name, decoded[0]),), explicit=True)


def _fenced(text: str) -> Iterator[Hit]:
    """Fences: ``` / ```json (Qwen2.5-Coder, Llama) / ```tool_call / ```tool_code (Gemma 3),
    holding JSON calls or `name(...)` calls."""
    for match in _FENCE.finditer(text):
        lang, body = match.group(1).lower(), match.group(2)
        if lang not in _CALL_FENCES | _CODE_FENCES:
            continue
        found = json_calls(body)
        pythonic = found is None and lang != "json"
        found = found or (python_calls(body) if pythonic else None)
        if found:
            explicit = lang in _CALL_FENCES
            yield Hit(match.start(), match.end(), tuple(found), explicit, pythonic)


def _bare_json(text: str) -> Iterator[Hit]:
    """JSON anywhere: `{"name", "arguments"}`, `"parameters"` (Llama 3.x), OpenAI's
    `{"function": {...}}` and `{"tool_calls": [...]}`, lists of calls, `{{...}}`. Stops when
    the starts that held no JSON have read more than their share of the reply (`Reads`)."""
    pos, reads = 0, Reads(text)
    while reads.left > 0 and (opener := _OPENER.search(text, pos)):
        start = opener.start()
        decoded = decode_at(text, start, reads)
        if decoded is None:
            pos = start + 1
            continue
        value, end = decoded
        found = call_items(value)
        if found:
            yield Hit(start, end, tuple(found), explicit=False)
        pos = end


def _call_lines(text: str) -> Iterator[Hit]:
    """A line that is only `name(key="value")`, `name({...})` or `[a(...), b(...)]`
    (pythonic: Llama 3.2/4, Gemma 3's prompted format)."""
    for match in _CALL_LINE.finditer(text):
        found = python_calls(match.group(0))
        if found:
            yield Hit(match.start(), match.end(), tuple(found), explicit=False, pythonic=True)


FORMATS: tuple[Format, ...] = (
    Format("tagged", "Qwen2.5/Qwen3/Hermes chat templates; GLM-4.5; Qwen3-Coder", _tagged),
    Format("phi4", "Phi-4-mini chat template; vLLM phi4_mini_json", _phi),
    Format("python_tag", "Llama 3.1-3.3 prompt format; vLLM llama3_json", _python_tag),
    Format("mistral", "Mistral templates (v3, v11, v13 tokenizers); vLLM mistral", _mistral),
    Format("deepseek", "DeepSeek V3/R1 and V3.1 templates; vLLM deepseek_v3/v31", _deepseek),
    Format("fenced", "Qwen2.5-Coder-1.5B as seen; Gemma 3 tool_code", _fenced),
    Format("bare_json", "Llama 3.x JSON tool calling; OpenAI message shape as text", _bare_json),
    Format("call_line", "Llama 3.2/4 pythonic; Gemma 3 function calling guide", _call_lines),
)


# The call markup left around the calls once they are cut out.
CALL_MARKUP = re.compile(
    r"</?(?:" + _TAGS + r")>|\[TOOL_CALLS\]|<\|python_tag\|>|<\|eo[mt]_id\|>|"
    r"<[|｜]tool▁calls?▁(?:begin|end)[|｜]>|```[\w+-]*[ \t]*\n?\s*```"
)
