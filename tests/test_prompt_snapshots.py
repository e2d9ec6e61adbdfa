"""Golden files: the whole system prompt for each channel and mode.

The workspace is made in a temporary folder from the real templates (`workspace/*.md`),
with the bundled skills (`skills/*/SKILL.md`), so a change to a template, a skill, a tool's
description or a section's wording shows here as a unified diff. The host, zone, model,
tools and security policy are fixed (see test_prompt_kit.py); the workspace path and the
bundled skills' folder are replaced by `<WORKSPACE>` and `<BUNDLED_SKILLS>` before
comparing.

When a change is intended, regenerate the snapshots and review them with `git diff`:

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q tests/test_prompt_snapshots.py
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from test_prompt_kit import (
    BUNDLED_PLACEHOLDER,
    WORKSPACE_PLACEHOLDER,
    build,
    fresh_workspace,
    make_ctx,
    real_tools,
)

from agent.workspace import BUNDLED_SKILLS_DIR

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"
CHANNELS = ("telegram", "discord", "cli")
MODES = ("full", "compact", "minimal", "none")


def check_snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path}; create it with UPDATE_SNAPSHOTS=1", pytrace=False)
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"snapshots/{name} (expected)",
            tofile="built now (actual)",
        )
        pytest.fail(
            f"the prompt differs from its snapshot; if intended, rerun with UPDATE_SNAPSHOTS=1\n"
            f"{''.join(diff)}",
            pytrace=False,
        )


def stable(prompt: str, workspace: Path) -> str:
    """The prompt with this run's workspace path and this checkout's bundled skills
    replaced by fixed placeholders."""
    prompt = prompt.replace(str(BUNDLED_SKILLS_DIR), BUNDLED_PLACEHOLDER)
    return prompt.replace(str(workspace), WORKSPACE_PLACEHOLDER) + "\n"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("channel", CHANNELS)
def test_prompt_matches_snapshot(tmp_path: Path, channel: str, mode: str) -> None:
    workspace = fresh_workspace(tmp_path)
    ctx = make_ctx(workspace, channel, mode=mode, tools=real_tools(workspace, hardware=True))
    check_snapshot(f"prompt_{channel}_{mode}.md", stable(build(ctx), workspace))


def test_xml_dispatcher_prompt_matches_snapshot(tmp_path: Path) -> None:
    workspace = fresh_workspace(tmp_path)
    ctx = make_ctx(workspace, "telegram", dispatcher="xml")
    check_snapshot("prompt_telegram_full_xml.md", stable(build(ctx), workspace))


def test_xml_dispatcher_in_mode_none_keeps_the_tool_protocol(tmp_path: Path) -> None:
    workspace = fresh_workspace(tmp_path)
    ctx = make_ctx(workspace, "telegram", mode="none", dispatcher="xml")
    check_snapshot("prompt_telegram_none_xml.md", stable(build(ctx), workspace))


def test_a_cut_workspace_file_is_named_in_project_context(tmp_path: Path) -> None:
    workspace = fresh_workspace(tmp_path)
    memory = workspace / "MEMORY.md"
    notes = "".join(
        f"- 2024-05-{day:02d}: watered the basil on the balcony\n" for day in range(1, 31)
    )
    memory.write_text(memory.read_text() + "\n" + notes)
    ctx = make_ctx(workspace, "cli", bootstrap_max_chars=600)  # the templates are shorter
    check_snapshot("prompt_cli_full_cut.md", stable(build(ctx), workspace))


def test_a_group_on_discord_gets_the_shared_prompt_with_the_silent_reply(tmp_path: Path) -> None:
    workspace = fresh_workspace(tmp_path)
    # The tools of prompt_discord_full.md, so only the audience differs: a group is never
    # owner-private, so USER.md and MEMORY.md stay out.
    tools = real_tools(workspace, hardware=True)
    ctx = make_ctx(workspace, "discord", private=False, tools=tools)
    check_snapshot("prompt_discord_full_group.md", stable(build(ctx), workspace))


EXTRA = {"prompt_telegram_full_xml.md", "prompt_telegram_none_xml.md", "prompt_cli_full_cut.md"}


def test_snapshot_folder_holds_no_stale_files() -> None:
    expected = {f"prompt_{c}_{m}.md" for c in CHANNELS for m in MODES}
    expected |= EXTRA | {"prompt_discord_full_group.md", "skills_compact.md", "skills_full.md"}
    if UPDATE:
        for path in SNAPSHOTS.glob("prompt_*.md"):
            if path.name not in expected:
                path.unlink()
    assert {p.name for p in SNAPSHOTS.glob("*.md")} == expected
