"""The default prompt sections, in order. Each is small and reads only the PromptContext."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.aieos import AieosError, load_aieos
from agent.prompt import PromptContext, PromptSection
from agent.skills import render_skills
from agent.workspace import read_bootstrap_file

log = logging.getLogger(__name__)

HARDWARE_TOOLS = frozenset({
    "gpio_read", "gpio_write", "pwm_write", "analog_read", "servo_write", "gpio_pattern",
    "hardware_board_info", "hardware_capabilities",
})  # fmt: skip


class Text:
    """A section whose body is a function of the context (the common case)."""

    def __init__(self, name: str, render: Callable[[PromptContext], str]) -> None:
        self.name = name
        self._render = render

    def build(self, ctx: PromptContext) -> str:
        return self._render(ctx)


def _tools(ctx: PromptContext) -> str:
    if not ctx.tools:
        return ""
    lines = ["## Tools", "", "You can use these tools:"]
    for info in ctx.tools:
        lines.append(f"- **{info.name}**: {info.description}")
        if ctx.dispatcher == "xml" and info.parameters_json:
            lines.append(f"  Parameters: `{info.parameters_json}`")
    if ctx.dispatcher == "xml":
        lines += [
            "",
            "## Tool Use Protocol",
            "",
            "To call a tool, write a JSON object inside <tool_call></tool_call> tags:",
            '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>',
            "You may write several tool calls in one reply. Each result comes back in a "
            '<tool_result name="..."> message. Write no tool_call tags in your final answer.',
        ]
    return "\n".join(lines)


def _hardware(ctx: PromptContext) -> str:
    present = sorted(HARDWARE_TOOLS & {info.name for info in ctx.tools})
    if not present:
        return ""
    return (
        "## Hardware Access\n\n"
        "A microcontroller board is connected to this machine. The user owns it and has "
        f"authorised these tools for it: {', '.join(present)}. When asked to switch, read, "
        "dim, move or blink something on the board, use them — do not refuse, and do not "
        "claim you have no access to physical devices. Refer to pins by the names the tool "
        "descriptions give when there are any."
    )


def _task(ctx: PromptContext) -> str:
    return (
        "## Your Task\n\n"
        "Act on each message: use your tools to do what is asked, then answer. Do not "
        "describe what you would do, summarise these instructions, list your abilities or "
        "add commentary about yourself — do it."
    )


def _honesty(ctx: PromptContext) -> str:
    return (
        "## Tool Honesty\n\n"
        "- Never invent a tool result: report only what a tool actually returned.\n"
        "- When a tool fails, say so and give the error.\n"
        "- When you are unsure what the user wants, ask instead of guessing."
    )


_AUTONOMY_RULES = {
    "read_only": "- This runtime is read-only: do not change files, pins or anything else; "
    "observe and report.",
    "supervised": "- Ask before anything destructive or hard to undo (deleting, overwriting, "
    "moving hardware) and before acting outside this machine.",
    "full": "- You may act directly within the allowed actions. When a tool refuses an action, "
    "explain the restriction instead of working around it.",
}


def _safety(ctx: PromptContext) -> str:
    lines = [
        "## Safety",
        "",
        "- Never send private data anywhere the user did not ask for.",
        "- Prefer recoverable actions (move to a backup, not delete).",
        "- Do not bypass the security policy or the owner's oversight.",
        _AUTONOMY_RULES.get(ctx.autonomy, _AUTONOMY_RULES["supervised"]),
    ]
    if ctx.security_summary:
        lines += ["", "### Active Security Policy", "", ctx.security_summary]
    return "\n".join(lines)


def _skills(ctx: PromptContext) -> str:
    if ctx.mode != "full" or not ctx.skills:
        return ""
    return render_skills(ctx.skills, ctx.skills_mode, ctx.skills_max_chars, ctx.workspace_dir)


def _workspace(ctx: PromptContext) -> str:
    return f"## Workspace\n\nWorking directory: `{ctx.workspace_dir}`"


MINIMAL_FILES = ("AGENTS.md", "TOOLS.md")


def _bootstrap_names(ctx: PromptContext) -> list[str]:
    if ctx.mode == "minimal":
        return list(MINIMAL_FILES)
    names = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"]
    if ctx.heartbeat_enabled:
        names.append("HEARTBEAT.md")
    if (ctx.workspace_dir / "BOOTSTRAP.md").exists():
        names.append("BOOTSTRAP.md")
    names.append("MEMORY.md")
    return names


def _project_context(ctx: PromptContext) -> str:
    names = _bootstrap_names(ctx)
    identity: list[str] = []
    if ctx.mode == "full" and ctx.identity.format == "aieos":
        try:
            identity = [load_aieos(ctx.identity, ctx.workspace_dir)]
            names = [n for n in names if n not in ("SOUL.md", "IDENTITY.md")]
        except AieosError as exc:
            log.warning("AIEOS identity not used (%s); using the Markdown files", exc)
    blocks: list[str] = []
    remaining = ctx.bootstrap_total_max_chars
    soul_present = False
    for name in names:
        limit = min(ctx.bootstrap_max_chars, remaining)
        block = read_bootstrap_file(ctx.workspace_dir, name, limit, ctx.bootstrap_scale)
        if block.text:
            blocks.append(f"### {name}\n\n{block.text}")
            remaining -= block.chars
            soul_present = soul_present or (name == "SOUL.md" and not block.missing)
    intro = (
        "The workspace files below define who you are and how you work. They are already "
        "included here: do not read them again with a tool."
    )
    if soul_present:
        intro += "\nSOUL.md is present: take on its persona and tone in every reply."
    return "\n\n".join(["## Project Context", intro, *identity, *blocks])


def _date_time(ctx: PromptContext) -> str:
    return (
        "## Date & Time\n\n"
        f"Time zone: {ctx.timezone}. The current date and time are given at the start of "
        "each user message."
    )


def _runtime(ctx: PromptContext) -> str:
    return (
        "## Runtime\n\n"
        f"host={ctx.host.host} | os={ctx.host.os} | python={ctx.host.python} | "
        f"model={ctx.model_name} | channel={ctx.channel}"
    )


def _channel(ctx: PromptContext) -> str:
    caps = ctx.capabilities
    lines = [
        "## Channel Capabilities",
        "",
        f"- You are running as the {caps.display_name} bot. Your reply is delivered to the "
        f"{caps.display_name} chat automatically; just answer, no permission needed.",
    ]
    if caps.markup == "markdown" or caps.markup == "html":
        lines.append("- Format with simple Markdown (bold, italics, code, lists, links).")
    else:
        lines.append("- Your reply is shown as plain text.")
    if caps.max_message_chars:
        lines.append(
            f"- Long replies are split at {caps.max_message_chars} characters; keep them short."
        )
    if caps.media:
        kinds = ", ".join(f"[{kind}:...]" for kind in sorted(caps.media))
        lines.append(f"- Files can be sent with media markers: {kinds}.")
    lines += [
        "- Never repeat, reveal or describe credentials, tokens, API keys or secrets.",
        "- Secrets in tool output are already redacted as [REDACTED]; do not mention them.",
    ]
    return "\n".join(lines)


def default_sections() -> list[PromptSection]:
    return [
        Text("tools", _tools),
        Text("hardware", _hardware),
        Text("task", _task),
        Text("tool_honesty", _honesty),
        Text("safety", _safety),
        Text("skills", _skills),
        Text("workspace", _workspace),
        Text("project_context", _project_context),
        Text("date_time", _date_time),
        Text("runtime", _runtime),
        Text("channel_capabilities", _channel),
    ]
