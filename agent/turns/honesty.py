"""What a final reply may not do: carry a tool result the model wrote, claim an action no
tool took, or say nothing; and what stands in for one that cannot be shown.

Only pinclaw writes tool results. A reply with a result marker (`<tool_result>`,
`{"tool_result": ...}`, `<tool_response>`, "Tool result:" lines, the result tokens of
common chat templates) or one that claims an action while no tool ran in the turn is a
protocol slip: the loop re-asks once with `correction(...)`, and a second slip reaches
the user with the made-up results cut out and a one-line note. The claim patterns are a
small, conservative English list: a false alarm costs one extra call and a note, a miss
shows a claim as the model made it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence

from agent.model.profiles.text_call_values import decode_at, read_json
from agent.model.responses import Message

_RESULT_LINE = re.compile(
    r"(?im)^[ \t*_]*(?:tool|function) ?(?:result|output|response)s?[*_]*[ \t]*:"
)
# (what it is, where it starts, where it ends: None for the line, "" for the end of text)
_BLOCKS: tuple[tuple[str, re.Pattern[str], str | None], ...] = (
    ("<tool_result>", re.compile(r"</?tool_result\b[^>]*>"), "</tool_result>"),
    ("<tool_response>", re.compile(r"</?tool_response>"), "</tool_response>"),
    ("<|tool_response|>", re.compile(r"<\|tool_response\|>"), "<|end|>"),
    ("[TOOL_RESULTS]", re.compile(r"\[TOOL_RESULTS\]"), "[/TOOL_RESULTS]"),
    ("a tool output token", re.compile(r"<[|｜]tool▁outputs?▁begin[|｜]>"), ""),
    ("<|observation|>", re.compile(r"<\|observation\|>"), ""),
    ("an ipython turn", re.compile(r"<\|start_header_id\|>ipython<\|end_header_id\|>"), ""),
    ("a tool result line", _RESULT_LINE, None),
)
_JSON_RESULT = re.compile(r'\{\s*"(?:tool_result|tool_response|tool_output|function_result)"\s*:')
_CLAIMS = (
    re.compile(
        r"\bI(?:'ve| have)?\s+(?:just\s+|now\s+|already\s+|successfully\s+)?"
        r"(?:wrote|written|saved|stored|created|deleted|removed|edited|updated|appended|"
        r"listed|ran|run|executed|scheduled|recorded)\b(?!\s+(?:into|out)\b)"
        r"(?:\W+\w+){0,5}?\W+(?:files?|folders?|director(?:y|ies)|memory|memories|notes?|"
        r"commands?|scripts?|reminders?|schedules?|tasks?|pins?|disk|workspace|`|[\w-]+\.\w{1,5}\b)",
        re.I,
    ),
    re.compile(
        r"\bI(?:'ve| have)\s+(?:now\s+|already\s+|successfully\s+)?"
        r"(?:saved|stored|executed|run|scheduled)\b(?!\s+(?:into|out)\b)",
        re.I,
    ),
    re.compile(
        r"\b(?:has|have) been (?:successfully\s+)?"
        r"(?:written|saved|stored|created|deleted|removed|updated|executed|scheduled)\b",
        re.I,
    ),
    re.compile(r"(?:^|\n)[ \t]*(?:All )?Done[.!,:]", re.I),
    re.compile(r"\bthe file now (?:contains|says|reads)\b", re.I),
)

# "I'm sorry, but I can't assist with that.", "Sorry, I didn't understand your request."
_REFUSAL = re.compile(
    r"(?:(?:I[’']?m |I am )?sorry|I apologi[sz]e)?[\s,.!]*(?:but\s+)?"
    r"I(?: cannot| can not| can[’']?t|[’']m unable to| am unable to| didn[’']?t) "
    r"(?:assist|help|understand|receive)\b",
    re.I,
)

FAKE_RESULT = (
    "pinclaw: your reply contains a tool result ({what}) that you wrote yourself. Only "
    "pinclaw writes tool results, and it sends them after running a call. If you need a "
    "tool, call it now; otherwise answer without any result you did not receive."
)
NO_TOOL_RAN = (
    "pinclaw: no tool ran in this turn, so nothing was written, saved, run or listed. If "
    "the request needs a tool, call it now; otherwise answer honestly that it is not done."
)
EMPTY = "pinclaw: your reply was empty. Answer the user now, in plain text."
BARE_JSON = (
    "pinclaw: your reply is only JSON, and no tool ran in this turn. If it stands for what a "
    "tool would return, call the tool now; if the user asked for JSON, send it again."
)
NEAR_MISS = (
    "pinclaw: that looked like a tool call, but nothing ran: {problems}. Call the tool "
    "again with arguments that fit its parameters, or answer in plain text."
)
NOTE_NO_TOOL = "(Note: no tool ran for this answer, so nothing in it was done or checked.)"
NOTE_CUT = "(Note: a tool result the model wrote itself was left out; only real results count.)"
NOTE_NOT_RUN = "(Note: a tool call was written that fits no tool here, so it was not run.)"
CUT_CALL = (
    "pinclaw: your reply reached its length limit (llm.max_tokens) while you were writing a "
    "tool call, so the call stops short and nothing ran. Send less in one call (a long file "
    "in parts, say), or answer in plain text."
)
NOTE_CUT_CALL = "(Note: a tool call was cut off at the reply's length limit, so it was not run.)"

# Where a call written as text opens: call markup, or JSON (fenced or at a line's start)
# naming a tool. A reply cut at its length limit after one ends in half a call.
_MARKUP_OPENS = re.compile(
    r"<(?:tool_call|tools|tool|function_call|functioncall|toolcall|tool_use)>|<\|tool_call\|>"
    r"|<\|python_tag\|>|\[TOOL_CALLS\]|<[|｜]tool▁calls?▁begin[|｜]>"
)
_JSON_OPENS = re.compile(
    r'(?m)(?:```[\w-]*[ \t]*\n?|^)[ \t]*\[?\s*\{\s*"(?:name|function|tool)"\s*:\s*'
    r'"(?:functions\.)?([\w.-]+)"'
)


def result_marker(text: str) -> str:
    """What tool-result marker `text` carries, or ""."""
    for what, start, _ in _BLOCKS:
        if start.search(text):
            return what
    return '{"tool_result": ...}' if _JSON_RESULT.search(text) else ""


def bare_json(text: str) -> bool:
    """Whether `text` is only a JSON object or list, fenced or not. With no tool run and no
    JSON asked for, a small model's made-up result: `{"files": ["docs/file1.md", ...]}`
    answered "Which files are in docs?" (Qwen2.5-Coder-1.5B, twice in these benches)."""
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    try:
        return isinstance(read_json(body), dict | list)
    except json.JSONDecodeError:
        return False


def asks_for_json(history: Sequence[Message]) -> bool:
    """Whether the turn's user messages (those after the last answer) mention JSON."""
    for message in reversed(history):
        if message.get("role") == "assistant":
            return False
        if message.get("role") == "user" and "json" in str(message.get("content")).lower():
            return True
    return False


def claims_action(text: str) -> bool:
    """Whether `text` says something was written, saved, run... (English only)."""
    return any(pattern.search(text) for pattern in _CLAIMS)


def without_results(text: str) -> str:
    """`text` with the tool results the model wrote cut out."""
    for _, start, end in _BLOCKS:
        text = _cut_blocks(text, start, end)
    while match := _JSON_RESULT.search(text):
        decoded = decode_at(text, match.start())
        stop = decoded[1] if decoded else _line_end(text, match.start())
        text = text[: match.start()] + text[stop:]
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _cut_blocks(text: str, start: re.Pattern[str], end: str | None) -> str:
    while match := start.search(text):
        if match.group(0).startswith("</"):  # a closing tag alone: only the tag goes
            stop = match.end()
        elif end is None:
            stop = _line_end(text, match.start())
            fence = re.match(r"\s*```.*?```", text[stop:], re.S)
            stop += fence.end() if fence else 0
        elif end and (found := text.find(end, match.end())) >= 0:
            stop = found + len(end)
        else:
            stop = len(text)
        text = text[: match.start()] + text[stop:]
    return text


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def slipped_answer(text: str, tools_ran: bool) -> str:
    """A reply that slipped twice, as the user gets it: made-up results out, one note."""
    kept = without_results(text)
    note = NOTE_CUT if tools_ran else NOTE_NO_TOOL
    return f"{kept}\n\n{note}" if kept else note


def cut_call_at(text: str, names: Collection[str]) -> int | None:
    """Where, in a reply cut at its length limit, the call it was writing as text begins
    (call markup, or JSON naming one of the offered tools `names`); None: no call begins."""
    starts = [found.start() for found in _MARKUP_OPENS.finditer(text)]
    starts += [found.start() for found in _JSON_OPENS.finditer(text) if found[1] in names]
    return min(starts, default=None)


def cut_call_answer(before: str) -> str:
    """A reply cut twice inside a call it wrote as text, as the user gets it: what it said
    `before` the call (never half a call), one note."""
    return f"{before}\n\n{NOTE_CUT_CALL}" if before else NOTE_CUT_CALL


def not_run_answer(narration: str) -> str:
    """A reply that was a call fitting no tool, twice, as the user gets it: the call taken
    out (never shown raw), what was said around it kept, one note."""
    return f"{narration}\n\n{NOTE_NOT_RUN}" if narration else NOTE_NOT_RUN


def account(events: Sequence[tuple[str, bool]]) -> str:
    """The one line that stands in for an answer the model never gave."""
    if not events:
        return "(No answer from the model, and no tool ran.)"
    done = ", ".join(f"{name} {'ok' if ok else 'failed'}" for name, ok in events)
    return f"(No answer from the model. Tools run: {done}.)"


_WHY_STOPPED = {
    "loop_detected": "the same tool call came again with the same arguments",
    "iteration_limit": "too many rounds of tool calls",
    "call_limit": "too many tool calls",
}


def stopped_answer(reason: str, messages: Sequence[Message]) -> str:
    """The answer when the model's last word was one more call: said plainly, with the last
    result that came back (never the raw call)."""
    said = f"(I stopped: {_WHY_STOPPED.get(reason, 'the tools did not finish')}."
    for name, content in reversed(_results(messages)):
        if not content.startswith("Error:"):
            return f"{said} What {name} returned last:)\n{_cut(content)}"
    return f"{said} No tool gave a result.)"


def refuses(text: str) -> bool:
    """A reply that only says it cannot help or did not understand."""
    return len(text) < 400 and bool(_REFUSAL.match(text.strip()))


def made_again(name: str, output: str) -> str:
    """The answer when a reply only asks again for work that already ran (a small model's
    habit: the same schedule, the same edit): what it returned, not a second model call,
    which the same model answered with "the previous command did not change the file"."""
    said = (
        f"({name} ran; the model asked for it again, and it was not run twice. What it returned:)"
    )
    return f"{said}\n{_cut(output)}"


def done_anyway(name: str, output: str) -> str:
    """The answer in place of a refusal that came after the model had made a call again
    (Qwen2.5-Coder-1.5B: "I'm sorry, but I can't assist with that." once its edit was made;
    "I didn't receive any input" after reading the file twice): what the call returned."""
    said = f"(The model said it could not help, but {name} had run. What it returned:)"
    return f"{said}\n{_cut(output)}"


def _cut(content: str) -> str:
    return content if len(content) <= 1500 else content[:1500] + " […]"


_XML_RESULT = re.compile(r'<tool_result name="([^"]*)">\n(.*?)\n</tool_result>', re.S)


def _results(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """Every tool result of the turn, in order, as (tool, text): `tool` messages, or the
    xml protocol's <tool_result> blocks."""
    found: list[tuple[str, str]] = []
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "tool":
            found.append((str(message.get("name") or "the last tool"), content))
        elif message.get("role") == "user":
            found += _XML_RESULT.findall(content)
    return found
