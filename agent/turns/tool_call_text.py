"""Tool calls a model wrote as text: which of them run, and what the history keeps.

Small local models and servers without a tool parser (llama-server, Ollama, LM Studio,
vLLM without `--tool-call-parser`) pass a model's call on as plain content. Where calls are
is found by the table of the ways open models write them
(agent/model/profiles/text_call_formats.py's `FORMATS`); what counts is judged here:

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.model.profiles.text_call_formats import CALL_MARKUP, FORMATS, THINK, Hit
from agent.model.profiles.text_call_values import Candidate, decode_at
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


def find_tool_calls(text: str, schemas: Schemas) -> TextCalls:
    """The calls `text` holds, in order, with the narration and the near misses. A reply
    nested deeper than Python reads (a small model repeating "[") holds none: it is text,
    whichever step of the reading (JSON, the call shapes, the schema) ran out of depth."""
    if not schemas or not text.strip():
        return TextCalls()
    try:
        return _found(text, schemas)
    except RecursionError:
        return TextCalls()


def _found(text: str, schemas: Schemas) -> TextCalls:
    hits: list[Hit] = [Hit(m.start(), m.end(), (), True) for m in THINK.finditer(text)]
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
        if not hits and (unread := _unread_call(text, schemas)):
            misses.append(unread)
        return TextCalls(near_misses=tuple(misses))
    last = taken[-1].end
    narration = _leftover(text[:last], [h for h in hits if h.end <= last])
    return TextCalls(tuple(calls), _tidy(narration), tuple(misses))


def offered(tools: Iterable[Tool]) -> dict[str, dict[str, Any]]:
    """Name -> parameters schema of the tools offered (a ToolRegistry)."""
    return {tool.name: tool.parameters for tool in tools}


# ---- judging a hit ----

# A whole reply, fenced or not, that names an offered tool in a shape no format reads, as a
# 1.5B model wrote them: `file_list(docs)`, `file_read( plans-2031.txt)`, `file_write,
# path=a.txt, content=milk`, `{"memory_store": "my cat is Miso"}`.
_CALL_SHAPE = re.compile(
    r"\[?\s*(?:functions\.)?([A-Za-z_]\w*)\s*(?:\((.*)\)\s*\]?|,\s*\w+\s*=.*)", re.S
)
_WHOLE_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)\n?\s*```", re.S)


def _unread_call(text: str, schemas: Schemas) -> str:
    """Why a reply that is only an offered tool's name in a call's shape did not run ("" when
    it is not one): shown to the user, it would be a raw call instead of an answer."""
    body = THINK.sub("", text).strip()
    if fence := _WHOLE_FENCE.fullmatch(body):
        body = fence.group(1).strip()
    shape = _CALL_SHAPE.fullmatch(body)
    names = {shape.group(1)} if shape else set()
    decoded = decode_at(body, 0) if body.startswith("{") else None
    if decoded and decoded[1] == len(body) and isinstance(decoded[0], dict):
        names = set(decoded[0])
    named = sorted(names & set(schemas))
    if not named:
        return ""
    quoted = body if len(body) <= 80 else body[:79] + "…"
    return (
        f"{named[0]} was not run: {quoted!r} is not a call pinclaw can read "
        "(arguments go by name, as JSON)"
    )


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
        previous, joined = joined, CALL_MARKUP.sub("", joined)
    return joined


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()
