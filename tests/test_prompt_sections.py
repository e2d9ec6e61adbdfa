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
    fresh_workspace,
    make_ctx,
    real_tools,
    section,
)

from agent.prompt.context import ToolInfo
from agent.prompt.sections import HARDWARE_TOOLS
from agent.workspace import BUNDLED_SKILLS_DIR


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return fresh_workspace(tmp_path)


def test_default_sections_come_in_the_issue_order(workspace: Path) -> None:
    ctx = make_ctx(workspace, tools=real_tools(workspace, hardware=True))
    headings = re.findall(r"^## (.+)$", build(ctx), flags=re.M)
    assert headings == [
        "Tools", "Hardware Access", "Your Task", "Tool Honesty", "Safety", "Skills",
        "Workspace", "Project Context", "Date & Time", "Runtime", "Channel Capabilities",
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
    assert '<tool_result name="...">' in protocol
    # xml sends no tools=, so each tool's parameters are spelled out in the prompt
    assert '"required":["command"]' in section(xml, "Tools")
    assert '"required"' not in section(native, "Tools")


def test_tools_section_lists_every_tool_with_its_description(workspace: Path) -> None:
    tools = section(build(make_ctx(workspace)), "Tools")
    for info in real_tools(workspace):
        assert f"- **{info.name}**: {info.description}" in tools


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
    summary = "- Autonomy level: full\n- Allowed shell commands: `git`"
    safety = section(build(make_ctx(workspace, security_summary=summary)), "Safety")
    assert safety.endswith(f"### Active Security Policy\n\n{summary}")


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


def test_date_time_section_holds_the_zone_and_no_clock(workspace: Path) -> None:
    prompt = build(make_ctx(workspace))
    text = section(prompt, "Date & Time")
    assert ZONE in text
    assert not re.search(r"\d", text), text
    today = dt.date.today()
    assert today.isoformat() not in prompt
    assert today.strftime("%d.%m.%Y") not in prompt


def test_prompt_is_byte_identical_when_built_at_two_different_times(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FrozenClock(monkeypatch)
    clock.freeze(dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC))
    early = build(make_ctx(workspace)).encode()
    clock.freeze(dt.datetime(2035, 12, 24, 23, 59, 59, tzinfo=dt.UTC))
    late = build(make_ctx(workspace)).encode()
    assert early == late
    assert b"2001" not in early and b"2035" not in late
