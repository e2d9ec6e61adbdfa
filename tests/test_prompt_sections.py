"""One test per condition of the default sections: hardware, tool protocol, autonomy,
security policy, skills, channel, date and time."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from test_prompt_kit import (
    HARDWARE,
    ZONE,
    FrozenClock,
    build,
    make_ctx,
    real_tools,
    section,
)

from agent.prompt.context import SILENT_REPLY, ToolInfo
from agent.prompt.sections import HARDWARE_TOOLS
from agent.workspace import BUNDLED_SKILLS_DIR
from channels.registry import channel_kinds


def test_default_sections_come_in_the_issue_order(workspace: Path) -> None:
    ctx = make_ctx(workspace, tools=real_tools(workspace, hardware=True))
    headings = re.findall(r"^## (.+)$", build(ctx), flags=re.M)
    assert headings == [
        "Tools", "Hardware Access", "Your Task", "Tool Honesty", "Safety", "Skills",
        "Workspace", "Project Context", "Date & Time", "Runtime", "Channel Capabilities",
        "Silent Replies",
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(HARDWARE_TOOLS))
def test_hardware_section_present_when_any_hardware_tool_is_registered(
    workspace: Path, name: str
) -> None:
    ctx = make_ctx(workspace, tools=(*real_tools(workspace), ToolInfo(name, "A board tool.")))
    text = section(build(ctx), "Hardware Access")
    assert name in text
    assert "do not refuse" in text


def test_hardware_section_absent_without_a_hardware_tool(workspace: Path) -> None:
    lookalike = ToolInfo("gpio_history", "Not a hardware tool of the list.")
    prompt = build(make_ctx(workspace, tools=(*real_tools(workspace), lookalike)))
    assert "## Hardware Access" not in prompt


def test_hardware_section_names_exactly_the_registered_hardware_tools(workspace: Path) -> None:
    text = section(build(make_ctx(workspace, tools=HARDWARE)), "Hardware Access")
    assert "gpio_write, hardware_board_info" in text
    assert "servo_write" not in text


def test_tool_use_protocol_only_with_the_xml_dispatcher(workspace: Path) -> None:
    native = build(make_ctx(workspace, dispatcher="native"))
    xml = build(make_ctx(workspace, dispatcher="xml"))
    assert "<tool_call>" not in native and "## Tool Use Protocol" not in native
    protocol = section(xml, "Tool Use Protocol")
    assert '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>' in (
        protocol
    )
    assert "<tool_result" not in protocol and "never write a tool result" in protocol
    # xml sends no tools=, so each tool's parameters are spelled out in the prompt
    assert '"required":["command"]' in section(xml, "Tools")
    assert '"required"' not in section(native, "Tools")


def test_task_section_asks_for_tool_call_blocks_only_with_the_xml_dispatcher(
    workspace: Path,
) -> None:
    native = section(build(make_ctx(workspace, dispatcher="native")), "Your Task")
    xml = section(build(make_ctx(workspace, dispatcher="xml")), "Your Task")
    assert "write the <tool_call> block for it at once" in xml
    assert "<tool_call>" not in native
    assert "use your tools to do what is asked" in native


def test_xml_tools_section_lists_every_tool_with_its_description(workspace: Path) -> None:
    tools = section(build(make_ctx(workspace, dispatcher="xml")), "Tools")
    for info in real_tools(workspace):
        assert f"- **{info.name}**: {info.description}" in tools


def test_native_tools_section_leaves_each_description_to_its_schema(workspace: Path) -> None:
    tools = section(build(make_ctx(workspace)), "Tools")
    assert tools.startswith("## Tools\n\n") and "chain calls" in tools
    for info in real_tools(workspace):
        assert info.description not in tools and f"**{info.name}**" not in tools


def test_no_tools_leaves_the_tools_section_out(workspace: Path) -> None:
    assert "## Tools" not in build(make_ctx(workspace, tools=()))


AUTONOMY_TEXT = {
    "read_only": "This runtime is read-only",
    "supervised": "Ask before anything destructive",
    "full": "You may act directly within the allowed actions",
}


@pytest.mark.parametrize("level", sorted(AUTONOMY_TEXT))
def test_safety_text_follows_the_autonomy_level(workspace: Path, level: str) -> None:
    safety = section(build(make_ctx(workspace, autonomy=level)), "Safety")
    assert AUTONOMY_TEXT[level] in safety
    for other, text in AUTONOMY_TEXT.items():
        if other != level:
            assert text not in safety
    # the common rules hold at every level
    assert "Never send private data" in safety
    assert "Prefer recoverable actions" in safety


def test_active_security_policy_subsection_shows_the_summary(workspace: Path) -> None:
    summary = "- Autonomy level: full\n- Allowed shell commands: `git`, `ls`"
    safety = section(build(make_ctx(workspace, security_summary=summary)), "Safety")
    shown = "- Autonomy level: full\n- Allowed shell commands: git, ls"  # no backticks
    assert safety.endswith(f"### Active Security Policy\n\n{shown}")


def test_no_security_summary_no_subsection(workspace: Path) -> None:
    safety = section(build(make_ctx(workspace, security_summary="")), "Safety")
    assert safety.startswith("## Safety")
    assert "Active Security Policy" not in safety


def test_skills_section_lists_location_in_compact_mode(workspace: Path) -> None:
    skills = section(build(make_ctx(workspace)), "Skills")
    assert f"<location>{BUNDLED_SKILLS_DIR}/arduino/SKILL.md</location>" in skills
    assert "read_skill(name)" in skills
    assert "<instructions>" not in skills


def test_skills_section_inlines_instructions_in_full_mode(workspace: Path) -> None:
    skills = section(build(make_ctx(workspace, skills_mode="full")), "Skills")
    assert "<instructions>\n# Arduino" in skills
    assert "hardware_board_info" in skills


def test_skills_over_their_cap_fall_back_and_say_so(workspace: Path) -> None:
    full = section(build(make_ctx(workspace, skills_mode="full")), "Skills")
    compact = section(build(make_ctx(workspace, skills_mode="compact")), "Skills")
    fallback = section(
        build(make_ctx(workspace, skills_mode="full", skills_max_chars=len(full) - 1)), "Skills"
    )
    assert "<location>" in fallback and "Shown compactly" in fallback
    names = section(build(make_ctx(workspace, skills_max_chars=len(compact) - 1)), "Skills")
    assert "Available skills: arduino, daily-notes" in names
    assert "Names only" in names
    assert len(names) <= len(compact) - 1


def test_no_skills_no_skills_section(workspace: Path) -> None:
    assert "## Skills" not in build(make_ctx(workspace, skills=()))


@pytest.mark.parametrize(
    ("channel", "shown"),
    [("telegram", "Telegram bot"), ("discord", "Discord bot"), ("cli", "terminal")],
)
def test_channel_capabilities_name_the_channel(workspace: Path, channel: str, shown: str) -> None:
    text = section(build(make_ctx(workspace, channel)), "Channel Capabilities")
    assert shown in text
    assert "Never repeat, reveal or describe credentials" in text
    assert "already redacted" in text


@pytest.mark.parametrize("channel", ["telegram", "discord"])
def test_channels_that_take_media_say_what_incoming_markers_mean(
    workspace: Path, channel: str
) -> None:
    text = section(build(make_ctx(workspace, channel, mode="minimal")), "Channel Capabilities")
    assert (
        "The same markers in a user's message are files they sent, already saved at that path "
        f"in the workspace (e.g. [IMAGE:inbox/{channel}-…/…-photo.jpg]): read one with file_read"
    ) in text


def test_the_terminal_takes_no_media_and_says_nothing_of_markers(workspace: Path) -> None:
    text = section(build(make_ctx(workspace, "cli")), "Channel Capabilities")
    assert "marker" not in text and "inbox/" not in text


SILENT_RULE = f"reply with exactly {SILENT_REPLY} and nothing else"


@pytest.mark.parametrize("channel", [kind.name for kind in channel_kinds() if kind.has_groups])
@pytest.mark.parametrize("private", [True, False])
def test_group_channels_teach_the_silent_reply(
    workspace: Path, channel: str, private: bool
) -> None:
    prompt = build(make_ctx(workspace, channel, private=private))
    text = section(prompt, "Silent Replies")
    assert SILENT_RULE in text
    assert f"- Right: {SILENT_REPLY}\n" in text
    assert "In a direct chat, always answer." in text
    assert prompt.endswith(text)  # the last section: after Channel Capabilities


@pytest.mark.parametrize(
    ("channel", "mode"), [("cli", "full"), ("telegram", "minimal"), ("discord", "minimal")]
)
def test_no_silent_reply_in_the_terminal_or_a_minimal_prompt(
    workspace: Path, channel: str, mode: str
) -> None:
    prompt = build(make_ctx(workspace, channel, mode=mode))
    assert SILENT_REPLY not in prompt and "## Silent Replies" not in prompt


def test_date_time_section_holds_the_zone_and_no_clock(workspace: Path) -> None:
    prompt = build(make_ctx(workspace))
    text = section(prompt, "Date & Time")
    assert ZONE in text
    assert not re.search(r"\d", text), text
    today = dt.date.today()
    assert today.isoformat() not in prompt
    assert today.strftime("%d.%m.%Y") not in prompt


STABLE_CASES = {
    "telegram": {},
    "discord-group": {"channel": "discord", "private": False},
    "xml-none": {"dispatcher": "xml", "mode": "none"},
    "xml-cut-file": {"dispatcher": "xml", "bootstrap_max_chars": 600},
}


@pytest.mark.parametrize("case", sorted(STABLE_CASES))
def test_prompt_is_byte_identical_when_built_at_two_different_times(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    (workspace / "MEMORY.md").write_text("- a dated note\n" * 100)  # cut in "xml-cut-file"
    ctx = make_ctx(workspace, **STABLE_CASES[case])
    clock = FrozenClock(monkeypatch)
    clock.freeze(dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC))
    early = build(ctx).encode()
    clock.freeze(dt.datetime(2035, 12, 24, 23, 59, 59, tzinfo=dt.UTC))
    late = build(ctx).encode()
    assert early == late
    assert b"2001" not in early and b"2035" not in late
    assert (b"(MEMORY.md is cut: 600 of 1,499 characters" in early) == (case == "xml-cut-file")
