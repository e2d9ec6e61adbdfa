"""The builder: prompt modes, custom sections, determinism and the token budget."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_prompt_kit import (
    build,
    count,
    file_block,
    fresh_workspace,
    make_ctx,
    real_tools,
    section,
    skills_of,
)

from agent.prompt.builder import BuiltPrompt, SystemPromptBuilder
from agent.prompt.context import IDENTITY_LINE, IdentityInfo, PromptContext, PromptSection
from agent.prompt.sections import default_sections

DEFAULT_NAMES = [
    "tools", "hardware", "task", "tool_honesty", "safety", "skills", "workspace",
    "project_context", "date_time", "runtime", "channel_capabilities", "silent_replies",
]  # fmt: skip


class Schedule:
    name = "schedule"

    def build(self, ctx: PromptContext) -> str:
        return "## Schedule\n\nWater the plants on Sundays."


class Silent:
    name = "silent"

    def build(self, ctx: PromptContext) -> str:
        return ""


# -- modes ---------------------------------------------------------------------------------


def test_minimal_mode_injects_only_agents_and_tools_and_no_skills(workspace: Path) -> None:
    prompt = build(make_ctx(workspace, mode="minimal", heartbeat_enabled=True))
    assert re.findall(r"^### (\S+\.md)$", prompt, flags=re.M) == ["AGENTS.md", "TOOLS.md"]
    assert "## Skills" not in prompt
    assert "persona and tone" not in prompt
    for kept in ("## Tools", "## Safety", "## Workspace", "## Runtime", "## Channel Capabilities"):
        assert kept in prompt


def test_minimal_mode_ignores_an_aieos_identity(workspace: Path) -> None:
    identity = IdentityInfo(format="aieos", aieos_inline='{"identity": {"name": "Nova"}}')
    prompt = build(make_ctx(workspace, mode="minimal", identity=identity))
    assert "Nova" not in prompt


def test_none_mode_is_one_identity_line(workspace: Path) -> None:
    prompt = build(make_ctx(workspace, mode="none", tools=real_tools(workspace, hardware=True)))
    assert prompt == IDENTITY_LINE
    assert "\n" not in prompt


def test_none_mode_with_the_xml_dispatcher_keeps_the_tools_and_their_protocol(
    workspace: Path,
) -> None:
    tools = real_tools(workspace, hardware=True)
    prompt = build(make_ctx(workspace, mode="none", dispatcher="xml", tools=tools))
    full = build(make_ctx(workspace, dispatcher="xml", tools=tools))
    assert prompt.startswith(f"{IDENTITY_LINE}\n\n## Tools\n")
    assert re.findall(r"^## (.+)$", prompt, flags=re.M) == ["Tools", "Tool Use Protocol"]
    assert section(prompt, "Tools") == section(full, "Tools")  # each tool's parameters too
    assert section(prompt, "Tool Use Protocol") == section(full, "Tool Use Protocol") != ""


def test_none_mode_with_the_xml_dispatcher_and_no_tools_is_the_identity_line(
    workspace: Path,
) -> None:
    assert build(make_ctx(workspace, mode="none", dispatcher="xml", tools=())) == IDENTITY_LINE


# -- custom sections -----------------------------------------------------------------------


def before_runtime(extra: PromptSection) -> SystemPromptBuilder:
    """The default sections with `extra` listed before the Runtime section."""
    sections = default_sections()
    at = [s.name for s in sections].index("runtime")
    return SystemPromptBuilder([*sections[:at], extra, *sections[at:]])


def test_the_defaults_are_the_twelve_sections_in_order() -> None:
    assert [s.name for s in default_sections()] == DEFAULT_NAMES


def test_a_custom_section_is_built_where_it_is_listed(workspace: Path) -> None:
    text = before_runtime(Schedule()).build(make_ctx(workspace))
    assert "Sundays.\n\n## Runtime\n\n" in text
    assert section(text, "Date & Time") and text.index("## Date & Time") < text.index("Sundays")


def test_a_section_returning_nothing_leaves_no_gap(workspace: Path) -> None:
    text = before_runtime(Silent()).build(make_ctx(workspace))
    assert text == build(make_ctx(workspace))
    assert "\n\n\n" not in text


# -- determinism ---------------------------------------------------------------------------


def test_two_builds_give_identical_bytes(tmp_path: Path) -> None:
    one = fresh_workspace(tmp_path / "one")
    two = fresh_workspace(tmp_path / "two")
    first = build(make_ctx(one)).encode()
    assert build(make_ctx(one)).encode() == first
    assert build(make_ctx(two)).replace(str(two), str(one)).encode() == first


def test_skills_are_sorted_by_name(workspace: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        folder = workspace / "skills" / name
        folder.mkdir()
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} job.\n---\n")
    skills = skills_of(workspace)
    names = [s.name for s in skills]
    assert names == sorted(names)
    prompt = build(make_ctx(workspace, skills=tuple(reversed(skills))))
    shown = re.findall(r"<name>(.+)</name>", prompt)
    assert shown == sorted(shown) == ["alpha", "arduino", "daily-notes", "mid", "zeta"]


# -- the token budget ----------------------------------------------------------------------


@pytest.fixture
def heavy(workspace: Path) -> PromptContext:
    """Big workspace files and skills inlined in full: a prompt of a few thousand tokens."""
    (workspace / "AGENTS.md").write_text("a" * 8_000)
    (workspace / "USER.md").write_text("u" * 4_000)
    folder = workspace / "skills" / "garden"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: garden\ndescription: Gardening.\n---\n" + "g" * 3_000
    )
    return make_ctx(workspace, skills=skills_of(workspace), skills_mode="full")


def within(
    ctx: PromptContext, budget: int, caplog: pytest.LogCaptureFixture
) -> tuple[BuiltPrompt, list[str]]:
    """Build within `budget`: the result and the warnings logged."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent.prompt"):
        built = SystemPromptBuilder.with_defaults().build_within(ctx, budget, count)
    assert built.text == "\n\n".join(s.text for s in built.sections)
    return built, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def one_warning_naming(warnings: list[str], cuts: tuple[str, ...]) -> str:
    assert len(warnings) == 1
    assert all(cut in warnings[0] for cut in cuts)
    return warnings[0]


def test_within_budget_nothing_is_cut(
    heavy: PromptContext, caplog: pytest.LogCaptureFixture
) -> None:
    built, warnings = within(heavy, count(build(heavy)), caplog)
    assert (built.text, built.cuts, warnings) == (build(heavy), (), [])


def test_workspace_files_are_cut_first_and_proportionally(
    heavy: PromptContext, caplog: pytest.LogCaptureFixture
) -> None:
    target = replace(heavy, bootstrap_scale=0.75)
    built, warnings = within(heavy, count(build(target)), caplog)
    assert built.cuts == (
        "workspace files cut to 75% of their length (at least 500 characters each)",
    )
    one_warning_naming(warnings, built.cuts)
    assert built.text == build(target)
    assert file_block(built.text, "AGENTS.md").startswith(
        "a" * 6_000 + "\n\n[... truncated at 6000"
    )
    assert file_block(built.text, "USER.md").startswith("u" * 3_000 + "\n\n[... truncated at 3000")
    assert "<instructions>" in section(built.text, "Skills")  # skills untouched
    context = section(built.text, "Project Context")
    assert "(AGENTS.md is cut: 6,000 of 8,000 characters shown; read the rest" in context
    assert "(USER.md is cut: 3,000 of 4,000 characters shown; read the rest" in context


def test_then_skills_become_compact(heavy: PromptContext, caplog: pytest.LogCaptureFixture) -> None:
    target = replace(heavy, bootstrap_scale=0.0, skills_mode="compact")
    built, warnings = within(heavy, count(build(target)), caplog)
    assert built.cuts == (
        "workspace files cut to at most 500 characters each",
        "skills listed compactly",
    )
    one_warning_naming(warnings, built.cuts)
    assert "<location>skills/garden/SKILL.md</location>" in built.text
    assert "<instructions>" not in built.text
    assert file_block(built.text, "AGENTS.md").startswith("a" * 500 + "\n\n[... truncated at 500")


def test_then_skills_are_named_only_and_core_sections_stay(
    heavy: PromptContext, caplog: pytest.LogCaptureFixture
) -> None:
    built, warnings = within(heavy, 1, caplog)
    assert built.cuts == (
        "workspace files cut to at most 500 characters each",
        "skills listed by name only",
    )
    assert "still over" in one_warning_naming(warnings, built.cuts)
    assert "Available skills: arduino, daily-notes, garden" in section(built.text, "Skills")
    full = build(heavy)
    for kept in ("Tools", "Safety", "Channel Capabilities"):
        assert section(built.text, kept) == section(full, kept) != ""


def test_over_budget_with_nothing_to_cut_still_warns(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = make_ctx(workspace, skills=())
    built, warnings = within(ctx, 1, caplog)
    assert built.cuts == ()
    assert built.text == build(ctx)
    assert "nothing could be cut" in one_warning_naming(warnings, ())
