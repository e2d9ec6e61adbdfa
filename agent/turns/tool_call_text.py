"""Tool calls a model wrote as text, found by a table of the formats open models emit.

Small local models and servers without a tool parser (llama-server, Ollama, LM Studio,
vLLM without `--tool-call-parser`) pass a model's call on as plain content. Each entry of
`FORMATS` finds one way of writing it, after the model's own chat template or the habits
of models trained on it (sources in the table). What counts:

- Only a tool that is offered counts, and only with arguments that fit its JSON schema
  (required keys present, no unknown key where the schema forbids them, basic types);
  anything else is text. `functions.NAME` is read as NAME.
- Explicit markup (`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`, ...) or a reply that
  is nothing but call-shaped JSON is a call attempt: when no offered tool fits it, it is a
  *near miss* the loop may send back once with what went wrong, instead of showing the
  user raw JSON. JSON or a `name(...)` line inside prose is a call only when it fits, and
  not when the prose just before it presents an example ("for example", "looks like").
- Prose around calls: the text before and between the calls is kept as the assistant
  message's content (narration such as "Let me check."), so the history reads as the
  model wrote it; it is never shown as the answer, because the loop goes on and the
  model answers from the real results. Text after the last call is dropped: it was
  written before any result existed, so it can only be a guess at one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agent.turns.tool_call_values import (
    Candidate,
    call_items,
    decode_at,
    glm_calls,
    json_calls,
    python_calls,
    qwen_xml_calls,
)
from agent.turns.tool_schema import misfit
from tools.base import Tool

Schemas = Mapping[str, Mapping[str, Any]]  # offered tool name -> its parameters schema


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class TextCalls:
    calls: tuple[TextCall, ...] = ()
    narration: str = ""  # prose before and between the calls, for the history
    near_misses: tuple[str, ...] = ()  # clear call attempts no offered tool fits


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


def find_tool_calls(text: str, schemas: Schemas) -> TextCalls:
    """The calls `text` holds, in order, with the narration and the near misses."""
    if not schemas or not text.strip():
        return TextCalls()
    # Reasoning (`<think>`, Qwen3, DeepSeek-R1) holds drafts, not calls.
    hits: list[Hit] = [Hit(m.start(), m.end(), (), True) for m in _THINK.finditer(text)]
    thinking = len(hits)
    for fmt in FORMATS:
        for hit in fmt.find(text):
            if not any(hit.start < h.end and h.start < hit.end for h in hits):
                hits.append(hit)
    hits, thoughts = hits[thinking:], hits[:thinking]
    hits.sort(key=lambda h: h.start)
    whole = bool(hits) and not _leftover(text, hits + thoughts).strip()
    calls: list[TextCall] = []
    misses: list[str] = []
    taken: list[Hit] = []  # hits that held calls
    for hit in hits:
        if not (hit.explicit or whole) and _presented_as_example(text, hit, taken):
            continue
        resolved = [_resolve(candidate, schemas) for candidate in hit.candidates]
        good = [call for call, _ in resolved if call is not None]
        attempt = hit.explicit or (whole and not hit.pythonic)
        if len(good) == len(resolved) or (good and hit.explicit):
            calls += good
            taken.append(hit)
        if len(good) < len(resolved) and attempt:
            misses += [problem for _, problem in resolved if problem]
    if not calls:
        return TextCalls(near_misses=tuple(misses))
    last = taken[-1].end
    narration = _leftover(text[:last], [h for h in hits if h.end <= last])
    return TextCalls(tuple(calls), _tidy(narration), tuple(misses))


def offered(tools: Iterable[Tool]) -> dict[str, dict[str, Any]]:
    """Name -> parameters schema of the tools offered (a ToolRegistry)."""
    return {tool.name: tool.parameters for tool in tools}


# ---- the formats ----

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)
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
    `{"function": {...}}` and `{"tool_calls": [...]}`, lists of calls, `{{...}}`."""
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        decoded = decode_at(text, start)
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


# ---- judging a hit ----


def _resolve(candidate: Candidate, schemas: Schemas) -> tuple[TextCall | None, str]:
    """The call, or why no offered tool takes it."""
    name, raw = candidate
    if name not in schemas and name.startswith("functions."):
        name = name.removeprefix("functions.")
    schema = schemas.get(name)
    if schema is None:
        return None, f"there is no tool named {name!r} (the tools are: {', '.join(schemas)})"
    arguments = raw
    if raw is None:
        arguments = {}
    elif isinstance(raw, str):
        decoded = decode_at(raw.strip(), 0) if raw.strip() else ({}, 0)
        arguments = decoded[0] if decoded else raw
    problem = misfit(arguments, schema)
    if problem:
        return None, f"{name} was not run: {problem}"
    return TextCall(name, arguments), ""


_EXAMPLE = re.compile(
    r"\b(?:for example|an example|example of|examples?:|e\.g\.|for instance|looks like|"
    r"would look like|syntax|schema)",
    re.I,
)


def _presented_as_example(text: str, hit: Hit, used: list[Hit]) -> bool:
    """The prose just before the hit presents it as an example, not as a call."""
    since = max([h.end for h in used] + [0])
    before = text[since : hit.start]
    paragraph = before[before.rfind("\n\n") + 1 :][-200:]
    return bool(_EXAMPLE.search(paragraph))


_NOISE = re.compile(
    r"</?(?:" + _TAGS + r")>|\[TOOL_CALLS\]|<\|python_tag\|>|<\|eo[mt]_id\|>|"
    r"<[|｜]tool▁calls?▁(?:begin|end)[|｜]>|```[\w+-]*[ \t]*\n?\s*```"
)


def _leftover(text: str, hits: list[Hit]) -> str:
    """The text without the hits and without the call markup left around them."""
    parts, pos = [], 0
    for hit in sorted(hits, key=lambda h: h.start):
        parts.append(text[pos : hit.start])
        pos = max(pos, hit.end)
    parts.append(text[pos:])
    joined = "".join(parts)
    previous = None
    while previous != joined:
        previous, joined = joined, _NOISE.sub("", joined)
    return joined


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()
