"""Compact mode: the prompt and the tool schemas for small models and small windows.

A 1.5B model on a home server reads a 3,000-token first request for minutes, and a server
started with a 4,096-token window has little room left for the answer. Compact mode keeps
what changes what the model does — the tool names and how to call them, act don't
describe, report only what tools returned, the security policy, the workspace files — and
says each once and shortly: a tool's description is its first clause, a schema keeps its
names, types and what is required and drops examples, defaults, the optional parameters
(the tool still takes them) and every parameter's description that shows no format; the
skills are a line each. The workspace files are the owner's and stay as they are (within
the budget), but for a placeholder `agent init` wrote that nobody has written in yet. Full
mode is not touched by any of this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from agent.prompt.context import HARDWARE_TOOLS, SILENT_REPLY, PromptContext, ToolInfo
from tools.base import Tool, ToolRegistry
from tools.policy import COMMANDS_ALLOWED, PATHS_INSIDE
from tools.tool_groups import ToolGroup

COMPACT_SKILLS_CHARS = 1_200
# Examples: an aside with a quote in it ("in 10 minutes", 3 for "#3"), and ", e.g. …" up to
# the end of its clause.
_QUOTED_ASIDE = re.compile(r"\s*\([^()]*[\"`][^()]*\)")
_EG = re.compile(r",?\s*\b(?:e\.g\.|for example)\s[^;)]*?(?=[;)]|\.(?:\s|$)|$)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(\[])")
_CLAUSE_END = re.compile(r":\s|\s\(|;\s")
_PIN_GUIDE = re.compile(r"(Pins you may use:|Allowed pins:|No pins are allowed yet).*", re.S)
_DROPPED_KEYS = frozenset({"examples", "example", "title", "additionalProperties", "$schema"})


def short_text(text: str, *, formats: bool = False) -> str:
    """The first clause of the first sentence, without examples: "List a folder of the
    workspace: one entry per line, …" says enough as "List a folder of the workspace".
    `formats` (a parameter's description): the whole first sentence, and the quoted asides
    that show a value's format ("in 10 minutes") kept, as a small model needs them."""
    text = _EG.sub("", " ".join(text.split()))
    text = text if formats else _QUOTED_ASIDE.sub("", text)
    text = _SENTENCE_END.split(text, maxsplit=1)[0]
    clause = text if formats else _CLAUSE_END.split(text, maxsplit=1)[0]
    return (clause if len(clause.split()) >= 3 else text).strip().rstrip(".,;:")


def compact_schema(schema: Any, *, every_parameter: bool = False) -> Any:
    """A JSON schema with its types, names, enums and required lists, and no examples: each
    description its first sentence, an optional value's `anyOf [X, null]` just X, and the
    optional parameters left out where some are required (a small model does best without
    reaching for them). `every_parameter`: a group's (tools/tool_groups.py), whose actions
    each need some of them: all kept, as if required."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(kept) == 1 and isinstance(kept[0], dict):
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            schema = {**kept[0], **rest}
    found: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED_KEYS or key == "default":
            continue
        if key == "description" and isinstance(value, str):
            if short := short_text(value, formats=True):
                found[key] = short
        elif key == "properties" and isinstance(value, dict):
            if not value:  # {"type": "object"} says as much
                continue
            needed = set(value if every_parameter else schema.get("required") or ())
            found[key] = {
                name: _parameter(sub, name in needed)
                for name, sub in value.items()
                if name in needed or not needed  # an optional one only where all are
            }
        else:
            found[key] = compact_schema(value)
    return found


def _parameter(schema: Any, required: bool) -> Any:
    """Described only when required and its description shows a value's format (a quoted
    example: "in 10 minutes", 3 for "#3"); its name and type say the rest to a model."""
    found = compact_schema(schema)
    if isinstance(found, dict):
        shown = str(found.get("description", ""))
        if not (required and re.search(r"[\"`]", shown)):
            found.pop("description", None)
    return found


def compact_tool_infos(tools: Iterable[Tool]) -> tuple[ToolInfo, ...]:
    return tuple(
        ToolInfo(
            t.name,
            short_text(t.description),
            _json(compact_schema(t.parameters, every_parameter=isinstance(t, ToolGroup))),
        )
        for t in tools
    )


def pin_guide(tools: ToolRegistry) -> str:
    """Which pins the hardware tools may use, as each of their descriptions ends."""
    for tool in tools:
        if tool.name in HARDWARE_TOOLS and (found := _PIN_GUIDE.search(tool.description)):
            return found.group(0).strip()
    return ""


def _json(schema: Any) -> str:
    return json.dumps(schema, separators=(",", ":"), sort_keys=True)


class CompactTools(ToolRegistry):
    """The same tools, run the same way; only their `tools=` schemas are compact."""

    def __init__(self, tools: ToolRegistry) -> None:
        self.full: ToolRegistry = tools.full if isinstance(tools, CompactTools) else tools
        super().__init__(self.full)

    def schemas(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {**s["function"], **self._short(s["function"])}}
            for s in super().schemas()
        ]

    def _short(self, function: dict[str, Any]) -> dict[str, Any]:
        group = isinstance(self.get(str(function.get("name"))), ToolGroup)
        return {
            "description": short_text(str(function.get("description", ""))),
            "parameters": compact_schema(function.get("parameters", {}), every_parameter=group),
        }


# -- the sections, compact -------------------------------------------------------------


def tools(ctx: PromptContext) -> str:
    if not ctx.tools:
        return ""
    if ctx.dispatcher == "native":  # the names and schemas come with the request
        return "\n".join([f"## Tools\n\n{_ACT} {_PATHS}\n\n{_HONESTY}", *_load_first(ctx)])
    lines = ["## Tools", "", _PATHS]
    for info in ctx.tools:
        lines.append(f"- {info.name}: {info.description}")
        if info.parameters_json:
            lines.append(f"  Parameters: {info.parameters_json}")
    lines += _load_first(ctx)
    lines += [
        "",
        "## Tool Use Protocol",
        "",
        "To call a tool, write only this, then stop:",
        '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>',
        "pinclaw runs it and sends you the result. Never write a result yourself.",
        "",
        _HONESTY,
    ]
    return "\n".join(lines)


def _load_first(ctx: PromptContext) -> list[str]:
    """The tools whose schemas wait to be loaded, a line each (none: nothing)."""
    if not ctx.deferred_tools:
        return []
    lines = ["", "Load before use (load_tool with the name; find_tools searches):"]
    if ctx.deferred_by_server:
        lines[1] += " `server__: a, b` is server__a, server__b."
    return lines + [f"- {info.name}: {info.description}" for info in ctx.deferred_tools]


def hardware(ctx: PromptContext) -> str:
    present = sorted(HARDWARE_TOOLS & {info.name for info in ctx.tools})
    if not present:
        return ""
    if ctx.boards:
        lines = "\n".join(f"- {line}" for line in ctx.boards)
        return (
            f"## Hardware Access\n\nBoards are connected; their owner authorised "
            f"{', '.join(present)}. Use them when asked: do not refuse. Write board.pin when a "
            f"name is on several boards.\n{lines}"
        )
    return (
        f"## Hardware Access\n\nA board is connected; its owner authorised {', '.join(present)}. "
        "Use them when asked to switch, read, dim, move or blink something: do not refuse."
        + (f"\n{ctx.pin_guide}" if ctx.pin_guide else "")
    )


_PATHS = "Paths are relative to the workspace folder and stay inside it."
_HONESTY = (
    "Say only what a tool returned; when it failed, say so with the error. Never claim an "
    "action no tool did. Unsure what is wanted? Ask."
)
_ACT = (
    "When a message needs a tool, call it at once, then answer from its result. Do not "
    "describe what you would do: do it."
)


def task(ctx: PromptContext) -> str:
    """Said with the tools (native) or after their protocol (xml)."""
    if ctx.dispatcher == "native" and ctx.tools:
        return ""
    act = _ACT.replace("call it", "write its <tool_call>") if ctx.dispatcher == "xml" else _ACT
    return f"## Your Task\n\n{act}"


def honesty(ctx: PromptContext) -> str:
    return ""  # said in the tools' section (_HONESTY), without a heading of its own


_AUTONOMY = {
    "read_only": "Read-only: change nothing; observe and report.",
    "supervised": "Ask before anything destructive or outside this machine.",
    "full": "Act directly; when a tool refuses, explain instead of working around it.",
}


# The policy's lines a small model does without: its autonomy (the rule just said), the paths
# (_PATHS says it) and the shell commands that run without asking — another one waits for the
# owner under supervised, and read_only's refusal lists them.
_SAID_ELSEWHERE = ("- Autonomy level:", PATHS_INSIDE, COMMANDS_ALLOWED)


def safety(ctx: PromptContext) -> str:
    lines = [
        "## Safety",
        "",
        "Never reveal or store secrets ([REDACTED] marks one); prefer what can be "
        "undone; never bypass the policy. " + _AUTONOMY.get(ctx.autonomy, _AUTONOMY["supervised"]),
    ]
    if ctx.security_summary:
        policy = ctx.security_summary.replace("`", "").splitlines()
        lines += ["", *(line for line in policy if not line.startswith(_SAID_ELSEWHERE))]
    return "\n".join(lines)


def workspace(ctx: PromptContext) -> str:
    return ""  # said with the tools (_PATHS), the only ones that take paths


def date_time(ctx: PromptContext) -> str:
    return ""  # each message starts with its date, time and zone


def runtime(ctx: PromptContext) -> str:
    return ""  # the host, OS and Python change nothing the model does


def channel(ctx: PromptContext) -> str:
    caps = ctx.capabilities
    where = (
        "the user's terminal"
        if ctx.channel == "cli"
        else f"the {caps.display_name} chat (sent for you)"
    )
    markup = "plain text, no Markdown" if caps.markup == "plain" else "simple Markdown"
    lines = ["## Channel Capabilities", "", f"- Replies go to {where}: {markup}."]
    if caps.max_message_chars:
        lines.append(
            f"- Keep replies short (over {caps.max_message_chars:,} characters are split)."
        )
    if caps.media:
        kinds = ", ".join(f"[{kind}:path]" for kind in sorted(caps.media))
        lines.append(
            f"- To send a file, put {kinds} in your reply; the same marker in a user's message "
            "is a file they sent, saved at that path."
        )
    return "\n".join(lines)  # secrets: said in the safety section


def silent_replies(ctx: PromptContext) -> str:
    return (
        f"## Silent Replies\n\nIn a group, when a message needs no answer from you, reply "
        f"with exactly {SILENT_REPLY} and nothing else. In a direct chat, always answer."
    )
