"""Project Context: which workspace files are injected, how they are cut, and the AIEOS
identity that can replace SOUL.md and IDENTITY.md."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_prompt_kit import (
    HOST,
    build,
    count,
    file_block,
    make_ctx,
    section,
)

from agent.config import AgentSettings, Settings, WorkspaceSettings
from agent.prompt.builder import SystemPromptBuilder
from agent.prompt.context import IdentityInfo, PromptContext
from agent.prompt.source import PromptSource
from agent.workspace import read_bootstrap_file, strip_front_matter
from channels.telegram.kind import TELEGRAM as TELEGRAM_KIND
from tools.base import ToolRegistry
from tools.paths import PathRules

TELEGRAM = TELEGRAM_KIND.capabilities

FULL_FILES = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "MEMORY.md"]


def injected(prompt: str) -> list[str]:
    return re.findall(r"^### (\S+\.md)$", section(prompt, "Project Context"), flags=re.M)


def test_full_mode_injects_the_files_in_order(workspace: Path) -> None:
    prompt = build(make_ctx(workspace))
    assert injected(prompt) == ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md",
                                "BOOTSTRAP.md", "MEMORY.md"]  # fmt: skip
    assert "already included" in section(prompt, "Project Context")
    assert "persona and tone SOUL.md describes" in prompt


def test_compact_mode_leaves_a_placeholder_out_until_the_owner_writes_in_it(
    workspace: Path,
) -> None:
    compact = make_ctx(workspace, mode="compact")
    assert injected(build(compact)) == ["AGENTS.md", "SOUL.md", "IDENTITY.md", "BOOTSTRAP.md"]
    (workspace / "USER.md").write_text("Ada; tends the greenhouse.\n")
    assert injected(build(compact)) == ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md",
                                        "BOOTSTRAP.md"]  # fmt: skip
    assert "Ada; tends the greenhouse." in file_block(build(compact), "USER.md")
    assert "MEMORY.md" in injected(build(make_ctx(workspace)))  # full mode keeps them all


def test_missing_file_gets_a_one_line_marker(workspace: Path) -> None:
    (workspace / "USER.md").unlink()
    block = file_block(build(make_ctx(workspace)), "USER.md")
    assert block.startswith("[missing: USER.md")
    assert "\n" not in block


def test_missing_soul_drops_the_persona_line(workspace: Path) -> None:
    (workspace / "SOUL.md").unlink()
    assert "persona and tone" not in build(make_ctx(workspace))


def test_bootstrap_md_only_when_it_exists(workspace: Path) -> None:
    assert "### BOOTSTRAP.md" in build(make_ctx(workspace))
    (workspace / "BOOTSTRAP.md").unlink()
    prompt = build(make_ctx(workspace))
    assert "BOOTSTRAP.md" not in prompt  # no missing marker either: it is optional
    assert injected(prompt) == FULL_FILES


def test_emptied_file_is_left_out(workspace: Path) -> None:
    (workspace / "BOOTSTRAP.md").write_text("\n  \n")
    assert injected(build(make_ctx(workspace))) == FULL_FILES


def test_heartbeat_md_only_when_heartbeat_is_enabled(workspace: Path) -> None:
    assert "HEARTBEAT.md" not in build(make_ctx(workspace))
    prompt = build(make_ctx(workspace, heartbeat_enabled=True))
    assert "# Heartbeat checklist" in file_block(prompt, "HEARTBEAT.md")


def test_front_matter_is_stripped(workspace: Path) -> None:
    body = "# How you work\n\n- Be brief."
    (workspace / "AGENTS.md").write_text(
        f"---\nsummary: secret-ish metadata\nread_when: x\n---\n{body}\n"
    )
    block = file_block(build(make_ctx(workspace)), "AGENTS.md")
    assert block == body


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [
        ("---\na: 1\n---\nbody", "body"),
        ("\ufeff---\na: 1\n...\nbody", "body"),
        ("\ufeffbody", "body"),
        ("---\nno closing fence", "---\nno closing fence"),
        ("text\n---\nnot front matter\n---\n", "text\n---\nnot front matter\n---\n"),
    ],
)
def test_strip_front_matter(raw: str, stripped: str) -> None:
    assert strip_front_matter(raw) == stripped


KOREAN_AND_EMOJI = "안녕하세요 세계 🌍👩‍💻 한국어와 이모지 🎉🇰🇷 테스트입니다. "


def test_truncation_counts_characters_and_keeps_valid_utf8(workspace: Path) -> None:
    limit = 1_000
    content = (KOREAN_AND_EMOJI * 100).strip()
    assert len(content) > limit and len(content.encode()) > 3 * limit
    (workspace / "USER.md").write_text(content, encoding="utf-8")
    block = file_block(build(make_ctx(workspace, bootstrap_max_chars=limit)), "USER.md")
    kept, marker = block.split("\n\n[... truncated at ", 1)
    assert len(kept) == limit
    assert kept == content[:limit]
    assert kept.encode("utf-8").decode("utf-8") == kept
    assert marker.startswith(f"{limit} characters; the full file is {workspace / 'USER.md'}]")


def test_file_at_exactly_the_limit_is_not_truncated(workspace: Path) -> None:
    (workspace / "USER.md").write_text("가" * 500)
    block = file_block(build(make_ctx(workspace, bootstrap_max_chars=500)), "USER.md")
    assert block == "가" * 500


def test_total_cap_limits_all_files_together(workspace: Path) -> None:
    for index, name in enumerate(FULL_FILES):
        (workspace / name).write_text(str(index) * 3_000)
    (workspace / "BOOTSTRAP.md").unlink()
    prompt = build(make_ctx(workspace, bootstrap_total_max_chars=7_000))
    blocks = {name: file_block(prompt, name) for name in FULL_FILES}
    assert blocks["AGENTS.md"] == "0" * 3_000
    assert blocks["SOUL.md"] == "1" * 3_000
    assert blocks["TOOLS.md"].startswith("2" * 1_000 + "\n\n[... truncated at 1000 characters")
    for name in ("IDENTITY.md", "USER.md", "MEMORY.md"):
        assert blocks[name].startswith("[omitted: the workspace files' total limit is reached")
    kept = [b.split("\n\n[")[0] for b in blocks.values() if not b.startswith("[")]
    assert sum(len(text) for text in kept) == 7_000


def cut_lines(prompt: str) -> list[str]:
    """The lines of Project Context's introduction that name a cut file."""
    intro = section(prompt, "Project Context").split("\n\n")[1]
    return [line for line in intro.splitlines() if line.startswith("(")]


def test_a_file_over_its_limit_is_named_with_how_much_is_shown(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("m" * 48_211)
    prompt = build(make_ctx(workspace, bootstrap_max_chars=20_000))
    assert cut_lines(prompt) == [
        "(MEMORY.md is cut: 20,000 of 48,211 characters shown; read the rest with file_read "
        "when it matters)"
    ]
    assert "do not read them again with a tool, except the rest of a cut file:" in (
        section(prompt, "Project Context")
    )
    assert file_block(prompt, "MEMORY.md").startswith("m" * 20_000 + "\n\n[... truncated")


def test_files_within_their_limits_get_no_cut_line(workspace: Path) -> None:
    (workspace / "USER.md").write_text("가" * 600)  # exactly at the limit: whole
    prompt = build(make_ctx(workspace, bootstrap_max_chars=600))  # the templates are shorter
    assert cut_lines(prompt) == []
    assert "do not read them again with a tool.\n" in section(prompt, "Project Context")


def test_the_total_limit_names_the_cut_file_and_the_left_out_ones(workspace: Path) -> None:
    for index, name in enumerate(FULL_FILES):
        (workspace / name).write_text(str(index) * 3_000)
    (workspace / "BOOTSTRAP.md").unlink()
    prompt = build(make_ctx(workspace, bootstrap_total_max_chars=7_000))
    left_out = [
        f"({name} is left out: 0 of 3,000 characters shown, the total limit was reached; "
        "read it with file_read when it matters)"
        for name in ("IDENTITY.md", "USER.md", "MEMORY.md")
    ]
    assert cut_lines(prompt) == [
        "(TOOLS.md is cut: 1,000 of 3,000 characters shown; read the rest with file_read "
        "when it matters)",
        *left_out,
    ]


def test_without_file_read_the_cut_line_names_no_missing_tool(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("a" * 900)
    prompt = build(make_ctx(workspace, bootstrap_max_chars=600, tools=()))
    assert cut_lines(prompt) == [
        "(AGENTS.md is cut: 600 of 900 characters shown; read the rest with a tool when it matters)"
    ]
    assert "with file_read" not in section(prompt, "Project Context")


def test_compact_context_cuts_each_file_at_6000_characters(workspace: Path, home: Path) -> None:
    (workspace / "AGENTS.md").write_text("a" * 10_000)
    settings = Settings(
        agent=AgentSettings(compact_context=True), workspace=WorkspaceSettings(path=str(workspace))
    )
    source = PromptSource(
        settings=settings,
        tools=ToolRegistry(),
        builder=SystemPromptBuilder.with_defaults(),
        security_summary="",
        host=HOST,
        count_tokens=count,
        budget_tokens=100_000,
    )
    ctx = source.context("telegram", TELEGRAM)
    assert ctx.bootstrap_max_chars == 6_000
    block = file_block(source.build(ctx).text, "AGENTS.md")
    assert block.startswith("a" * 6_000 + "\n\n[... truncated at 6000 characters")
    roomy = Settings(workspace=WorkspaceSettings(path=str(workspace)))
    assert replace(source, settings=roomy).context("telegram", TELEGRAM).bootstrap_max_chars == (
        20_000
    )


AIEOS = {
    "standard": {"protocol": "AIEOS", "version": "1.1"},
    "identity": {"names": {"first": "Nova", "nickname": "N"}, "bio": "A careful helper."},
    "psychology": {"traits": ["curious", "patient"]},
    "linguistics": {"style": {"formality": "casual", "humor": "dry"}},
}


def aieos_ctx(workspace: Path, **identity: str) -> PromptContext:
    return make_ctx(workspace, identity=IdentityInfo(format="aieos", **identity))


def test_valid_aieos_replaces_soul_and_identity(workspace: Path) -> None:
    (workspace / "identity.json").write_text(json.dumps(AIEOS))
    prompt = build(aieos_ctx(workspace, aieos_path="identity.json"))
    context = section(prompt, "Project Context")
    assert "### Identity (AIEOS)\n\nYou are Nova." in context
    assert "- Traits:\n  - curious\n  - patient" in context
    assert "- Formality: casual" in context
    assert "Standard" not in context and "1.1" not in context  # metadata, not persona
    assert "Your identity is given below in AIEOS form" in context
    assert injected(prompt) == ["AGENTS.md", "TOOLS.md", "USER.md", "BOOTSTRAP.md", "MEMORY.md"]


def test_inline_aieos_is_used_too(workspace: Path) -> None:
    prompt = build(aieos_ctx(workspace, aieos_inline=json.dumps(AIEOS)))
    assert "You are Nova." in prompt
    assert "### SOUL.md" not in prompt


@pytest.mark.parametrize(
    ("identity", "reason"),
    [
        ({"aieos_path": "nowhere.json"}, "cannot read"),
        ({}, "neither aieos_path nor aieos_inline"),
        ({"aieos_inline": "{not json"}, "not valid JSON"),
        ({"aieos_inline": '{"psychology": {}}'}, "no `identity` object"),
    ],
)
def test_missing_or_invalid_aieos_falls_back_to_markdown_and_logs_why(
    workspace: Path, caplog: pytest.LogCaptureFixture, identity: dict[str, str], reason: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.prompt.sections"):
        prompt = build(aieos_ctx(workspace, **identity))
    assert "Identity (AIEOS)" not in prompt
    assert "### SOUL.md" in prompt and "### IDENTITY.md" in prompt
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "AIEOS identity not used" in warnings[0] and reason in warnings[0]


def test_read_bootstrap_file_scale_never_goes_below_the_floor(workspace: Path) -> None:
    (workspace / "USER.md").write_text("x" * 4_000)
    files = PathRules.build(workspace, ())
    assert read_bootstrap_file(files, "USER.md", 20_000, 0.5).chars == 2_000
    assert read_bootstrap_file(files, "USER.md", 20_000, 0.0).chars == 500
