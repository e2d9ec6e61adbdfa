"""The default prompt sections, in order. Each is small and reads only the PromptContext."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.prompt import compact
from agent.prompt.aieos import AieosError, load_aieos
from agent.prompt.context import (
    HARDWARE_TOOLS,
    SILENT_REPLY,
    PromptContext,
    PromptSection,
)
from agent.prompt.skills import render_skills
from agent.workspace import BootstrapBlock, holds_only_its_template, read_bootstrap_file
from channels.registry import has_groups

log = logging.getLogger(__name__)

Render = Callable[[PromptContext], str]


class Text:
    """A section whose body is a function of the context (the common case); in compact
    mode its `compact` body when it has one."""

    def __init__(self, name: str, render: Render, compact: Render | None = None) -> None:
        self.name = name
        self._render = render
        self._compact = compact

    def build(self, ctx: PromptContext) -> str:
        if ctx.mode == "compact" and self._compact is not None:
            return self._compact(ctx)
        return self._render(ctx)


def _tools(ctx: PromptContext) -> str:
    if not ctx.tools:
        return ""
    if ctx.dispatcher == "native":  # each tool's description comes with its schema
        lines = ["## Tools", "", _TOGETHER]
    else:
        lines = ["## Tools", "", "You can use these tools:"]
        for info in ctx.tools:
            lines.append(f"- **{info.name}**: {info.description}")
            if info.parameters_json:
                lines.append(f"  Parameters: {info.parameters_json}")
    if ctx.deferred_tools:
        by_server = (
            " `server__: a, b` names server__a and server__b." if ctx.deferred_by_server else ""
        )
        lines += ["", "### Tools to Load First", "", _LOAD_FIRST + by_server]
        lines += [f"- {info.name}: {info.description}" for info in ctx.deferred_tools]
    if ctx.dispatcher == "xml":
        lines += [
            "",
            "## Tool Use Protocol",
            "",
            "To call a tool, write a JSON object inside <tool_call></tool_call> tags:",
            '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>',
            "You may write several tool calls in one reply; then stop and wait. pinclaw runs "
            "them and sends each result back to you in the next message: never write a tool "
            "result yourself. Write no tool_call tags in your final answer.",
        ]
    return "\n".join(lines)


# What the schemas cannot say: how the tools go together.
_TOGETHER = (
    "Each tool's schema says what it does; chain calls as a job needs, one result feeding the next."
)

_LOAD_FIRST = (
    "Their parameters are not shown yet: call load_tool with a name to get them, then call "
    "that tool. find_tools finds one by what it does."
)


def _hardware(ctx: PromptContext) -> str:
    present = sorted(HARDWARE_TOOLS & {info.name for info in ctx.tools})
    if not present:
        return ""
    if ctx.boards:
        return (
            "## Hardware Access\n\n"
            "Microcontroller boards are connected to this machine, each by its name. The user "
            f"owns them and has authorised these tools for them: {', '.join(present)}. When "
            "asked to switch, read, dim, move or blink something on a board, use them — do not "
            "refuse. A pin name on several boards is written board.pin (garage.door), or give "
            "board. The boards and their pins:\n" + "\n".join(f"- {line}" for line in ctx.boards)
        )
    return (
        "## Hardware Access\n\n"
        "A microcontroller board is connected to this machine. The user owns it and has "
        f"authorised these tools for it: {', '.join(present)}. When asked to switch, read, "
        "dim, move or blink something on the board, use them — do not refuse, and do not "
        "claim you have no access to physical devices. Refer to pins by the names the tool "
        "descriptions give when there are any."
    )


def _task(ctx: PromptContext) -> str:
    act = "use your tools to do what is asked, then answer"
    if ctx.dispatcher == "xml":
        act = (
            "when it needs a tool, write the <tool_call> block for it at once (as the Tool "
            "Use Protocol shows), then answer from the result"
        )
    return (
        "## Your Task\n\n"
        f"Act on each message: {act}. Do not describe your plan, restate these instructions "
        "or talk about yourself: do it."
    )


def _honesty(ctx: PromptContext) -> str:
    return (
        "## Tool Honesty\n\n"
        "Report only what tools actually returned, never an invented result; when one fails, "
        "say so with its error. Unsure what the user wants? Ask."
    )


_AUTONOMY_RULES = {
    "read_only": "- This runtime is read-only: do not change files, pins or anything else; "
    "observe and report.",
    "supervised": "- Ask before anything destructive or hard to undo, and before acting outside "
    "this machine.",
    "full": "- You may act directly within the allowed actions. When a tool refuses an action, "
    "explain the restriction instead of working around it.",
}


def _safety(ctx: PromptContext) -> str:
    lines = [
        "## Safety",
        "",
        "- Never send private data anywhere the user did not ask for.",
        "- Prefer recoverable actions (a backup, not a delete).",
        "- Never bypass the security policy or the owner's oversight.",
        _AUTONOMY_RULES.get(ctx.autonomy, _AUTONOMY_RULES["supervised"]),
    ]
    if ctx.security_summary:  # no backticks: they cost a token a command
        lines += ["", "### Active Security Policy", "", ctx.security_summary.replace("`", "")]
    return "\n".join(lines)


def _skills(ctx: PromptContext) -> str:
    if ctx.mode not in ("full", "compact") or not ctx.skills:
        return ""
    return render_skills(
        ctx.skills,
        ctx.skills_mode,
        ctx.skills_max_chars,
        ctx.workspace_dir,
        short=ctx.mode == "compact",
    )


def _workspace(ctx: PromptContext) -> str:
    return (
        f"## Workspace\n\nWorking directory: `{ctx.workspace_dir}` (tool paths are relative to it)."
    )


MINIMAL_FILES = ("AGENTS.md", "TOOLS.md")
AIEOS_REPLACES = ("SOUL.md", "IDENTITY.md")


def _bootstrap_names(ctx: PromptContext) -> list[str]:
    if ctx.mode == "minimal":
        return list(MINIMAL_FILES)
    names = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md"]
    if ctx.private:
        names.append("USER.md")
    if ctx.heartbeat_enabled:
        names.append("HEARTBEAT.md")
    if (ctx.workspace_dir / "BOOTSTRAP.md").exists():
        names.append("BOOTSTRAP.md")
    if ctx.private:
        names.append("MEMORY.md")
    return names


def _aieos_identity(ctx: PromptContext) -> str:
    """The AIEOS identity rendered, or "" (with a logged reason) to use the Markdown files."""
    if ctx.mode not in ("full", "compact") or ctx.identity.format != "aieos":
        return ""
    try:
        return load_aieos(ctx.identity, ctx.workspace_files)
    except AieosError as exc:
        log.warning("AIEOS identity not used (%s); using SOUL.md and IDENTITY.md instead", exc)
        return ""


@dataclass
class _Files:
    blocks: list[str] = field(default_factory=list)  # each file under its heading
    cuts: list[str] = field(default_factory=list)  # one line per file the limits cut
    soul: bool = False  # SOUL.md was injected


def _file_blocks(ctx: PromptContext, names: list[str]) -> _Files:
    """Each file under its heading, within the per-file and total limits (and the budget's
    scale), with a line for each file that was cut."""
    files = _Files()
    remaining = ctx.bootstrap_total_max_chars
    for name in names:
        limit = min(ctx.bootstrap_max_chars, remaining)
        block = read_bootstrap_file(ctx.workspace_files, name, limit, ctx.bootstrap_scale)
        if ctx.mode == "compact" and holds_only_its_template(name, block.text):
            continue
        if block.text:
            files.blocks.append(f"### {name}\n\n{block.text}")
            remaining -= block.chars
            files.soul = files.soul or (name == "SOUL.md" and not block.missing)
            cut = _cut_line(ctx, name, block)
            if cut:
                files.cuts.append(cut)
    return files


def _cut_line(ctx: PromptContext, name: str, block: BootstrapBlock) -> str:
    """One line saying how much of a cut file is shown, so the model reads the rest itself.
    A block carries a marker beyond the characters it counts only when it was cut."""
    if block.missing or len(block.text) <= block.chars:
        return ""
    whole = read_bootstrap_file(ctx.workspace_files, name, sys.maxsize).chars
    if whole <= block.chars:
        return ""
    reader = "file_read" if any(t.name == "file_read" for t in ctx.tools) else "a tool"
    if block.chars == 0:
        return (
            f"({name} is left out: 0 of {whole:,} characters shown, the total limit was "
            f"reached; read it with {reader} when it matters)"
        )
    return (
        f"({name} is cut: {block.chars:,} of {whole:,} characters shown; read the rest "
        f"with {reader} when it matters)"
    )


def _project_context(ctx: PromptContext) -> str:
    names = _bootstrap_names(ctx)
    identity = _aieos_identity(ctx)
    if identity:
        names = [n for n in names if n not in AIEOS_REPLACES]
    files = _file_blocks(ctx, names)
    intro = (
        "These workspace files define who you are and how you work, already included: do "
        "not read them again with a tool"
        + (", except the rest of a cut file:" if files.cuts else ".")
    )
    if ctx.mode == "compact":
        intro = "Your workspace files, already read" + (
            " (the rest of a cut one: read it when it matters):" if files.cuts else ":"
        )
    for cut in files.cuts:
        intro += f"\n{cut}"
    if identity:
        intro += "\nYour identity is given below in AIEOS form: embody it in every reply."
    if files.soul and ctx.mode != "compact":  # compact: SOUL.md's words say what they are
        intro += "\nSpeak with the persona and tone SOUL.md describes; the rules above come first."
    parts = ["## Project Context", intro, *([identity] if identity else []), *files.blocks]
    return "\n\n".join(parts)


def _date_time(ctx: PromptContext) -> str:
    return (
        "## Date & Time\n\n"
        f"Time zone: {ctx.timezone}. Each user message starts with the current date and time."
    )


def _runtime(ctx: PromptContext) -> str:
    return (
        "## Runtime\n\n"
        f"host={ctx.host.host} | os={ctx.host.os} | python={ctx.host.python} | "
        f"model={ctx.model_name} | channel={ctx.channel}"
    )


def _presence(ctx: PromptContext) -> str:
    name = ctx.capabilities.display_name
    if ctx.channel == "cli":
        return "- You are running in the user's terminal: your reply is printed there."
    return (
        f"- You are running as the {name} bot: your reply goes to the {name} chat by "
        "itself, no permission needed."
    )


def _channel(ctx: PromptContext) -> str:
    caps = ctx.capabilities
    lines = ["## Channel Capabilities", "", _presence(ctx)]
    if caps.markup == "plain":
        lines.append("- Your reply is shown as plain text: do not use Markdown.")
    else:
        lines.append("- Simple Markdown works.")
    if caps.max_message_chars:
        lines.append(
            f"- Replies longer than {caps.max_message_chars:,} characters are split into "
            "several messages: keep them short."
        )
    if caps.media:
        kinds = ", ".join(f"[{kind}:...]" for kind in sorted(caps.media))
        lines.append(f"- To send a file, put a media marker in your reply: {kinds}.")
        example = f"[IMAGE:inbox/{ctx.channel}-…/…-photo.jpg]"
        lines.append(
            "- The same markers in a user's message are files they sent, already saved at "
            f"that path in the workspace (e.g. {example}): read one with file_read or your "
            "other tools when it matters. A voice note's transcript, when there is one, follows "
            "its marker; when an image is attached to the message too, look at it directly."
        )
    lines.append(
        "- Never repeat, reveal or describe credentials, tokens, API keys or secrets; in tool "
        "output they are already redacted."
    )
    return "\n".join(lines)


def _silent_replies(ctx: PromptContext) -> str:
    """Only where groups exist, and not in minimal mode (sub-agents speak in no group)."""
    if ctx.mode not in ("full", "compact") or not has_groups(ctx.channel):
        return ""
    token = SILENT_REPLY
    return (
        "## Silent Replies\n\n"
        "In a group chat not every message is meant for you. When a group message needs no "
        f"answer from you, reply with exactly {token} and nothing else: no words before or "
        f"after it, no quotes, no formatting. That reply is not sent.\n"
        f"- Right: {token}\n"
        f'- Wrong: "{token}", **{token}**, Noted. {token}\n'
        f"When you do answer, leave {token} out. In a direct chat, always answer."
    )


def _compact_silent(ctx: PromptContext) -> str:
    return compact.silent_replies(ctx) if _silent_replies(ctx) else ""


def default_sections() -> list[PromptSection]:
    return [
        Text("tools", _tools, compact.tools),
        Text("hardware", _hardware, compact.hardware),
        Text("task", _task, compact.task),
        Text("tool_honesty", _honesty, compact.honesty),
        Text("safety", _safety, compact.safety),
        Text("skills", _skills),
        Text("workspace", _workspace, compact.workspace),
        Text("project_context", _project_context),
        Text("date_time", _date_time, compact.date_time),
        Text("runtime", _runtime, compact.runtime),
        Text("channel_capabilities", _channel, compact.channel),
        Text("silent_replies", _silent_replies, _compact_silent),
    ]
