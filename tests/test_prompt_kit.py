"""Shared helpers of the prompt tests: a fixed host, zone and tool list, a workspace made
from the real templates, the bundled skills, and a context built from them.

The other test_prompt_* modules import it as `from test_prompt_kit import ...`. Its own
tests check the fixture workspace is what `agent init` makes.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.prompt.builder import SystemPromptBuilder
from agent.prompt.context import HostInfo, PromptContext, SkillInfo, ToolInfo
from agent.prompt.skills import SkillCatalog
from agent.prompt.source import tool_infos
from agent.workspace import BOOTSTRAP_FILES, BUNDLED_SKILLS_DIR, TEMPLATES_DIR, init_workspace
from channels.registry import capabilities_of
from tools.config import SecuritySettings, ShellSettings
from tools.files import FileTools
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool
from tools.skills.skill_tools import ReadSkillTool

HOST = HostInfo(host="testhost", os="Linux 6.1.0 (x86_64)", python="3.11.9")
ZONE = "Europe/Berlin"
MODEL = "openai/gpt-4o-mini"
WORKSPACE_PLACEHOLDER = "<WORKSPACE>"
BUNDLED_PLACEHOLDER = "<BUNDLED_SKILLS>"
SECURITY = SecuritySettings(
    allowed_commands=["ls", "cat", "git"], forbidden_paths=["/etc", "/proc"]
)
HARDWARE = (
    ToolInfo("gpio_write", "Switch a digital output pin on or off."),
    ToolInfo("hardware_board_info", "Describe the connected board and its named pins."),
)


def count(text: str) -> int:
    """A deterministic stand-in for a tokenizer: four characters per token."""
    return len(text) // 4


def fresh_workspace(root: Path) -> Path:
    """A workspace as `agent init` makes it: the templates and an empty skills folder."""
    workspace = root / "workspace"
    init_workspace(workspace)
    return workspace


def skills_of(workspace: Path) -> tuple[SkillInfo, ...]:
    """The skills a runtime with the board enabled offers: the workspace's and the bundled."""
    return SkillCatalog(workspace / "skills", hardware=True).infos()


def real_tools(workspace: Path, *, hardware: bool = False) -> tuple[ToolInfo, ...]:
    """The shell, file and read_skill tools as the prompt shows them, plus hardware names if
    asked."""
    policy = SecurityPolicy.from_settings(SECURITY, workspace)
    shell = ShellTool(policy, ShellSettings(), choose_sandbox("off"))
    found = tool_infos([shell, *FileTools(policy).tools(), ReadSkillTool(list)])
    return found + HARDWARE if hardware else found


def make_ctx(workspace: Path, channel: str = "telegram", **changes: Any) -> PromptContext:
    """The fixed context every prompt test starts from; `changes` replace fields."""
    policy = SecurityPolicy.from_settings(SECURITY, workspace)
    base = PromptContext(
        workspace_dir=workspace,
        model_name=MODEL,
        channel=channel,
        capabilities=capabilities_of(channel),
        host=HOST,
        timezone=ZONE,
        tools=real_tools(workspace),
        skills=skills_of(workspace),
        security_summary=policy.summary(),
    )
    return replace(base, **changes)


def build(ctx: PromptContext) -> str:
    return SystemPromptBuilder.with_defaults().build(ctx)


def section(prompt: str, heading: str) -> str:
    """The text of `## heading` up to the next `## ` heading ("" when absent)."""
    marker = f"## {heading}\n"
    if prompt.startswith(marker):
        start = 0
    elif f"\n\n{marker}" in prompt:
        start = prompt.index(f"\n\n{marker}") + 2
    else:
        return ""
    end = prompt.find("\n\n## ", start + len(marker))
    return prompt[start:] if end == -1 else prompt[start:end]


def file_block(prompt: str, name: str) -> str:
    """The body of `### name` in Project Context, without its heading ("" when absent)."""
    marker = f"\n\n### {name}\n\n"
    if marker not in prompt:
        return ""
    start = prompt.index(marker) + len(marker)
    ends = [i for i in (prompt.find("\n\n### ", start), prompt.find("\n\n## ", start)) if i >= 0]
    return prompt[start : min(ends)] if ends else prompt[start:]


class FrozenClock:
    """Every clock a section could read, frozen at one moment: time.*, datetime.*, and the
    same names imported into the prompt modules."""

    MODULES = (
        "agent.prompt.builder",
        "agent.prompt.sections",
        "agent.prompt.skills",
        "agent.workspace",
        "agent.prompt.aieos",
    )

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch

    def freeze(self, when: dt.datetime) -> None:
        stamp = when.timestamp()
        patch = self._monkeypatch
        patch.setattr(time, "time", lambda: stamp)
        patch.setattr(time, "time_ns", lambda: int(stamp * 1e9))
        patch.setattr(time, "localtime", lambda secs=None: time.gmtime(stamp))
        fixed = _frozen_datetime(when)
        patch.setattr(dt, "datetime", fixed)
        patch.setattr(dt, "date", _frozen_date(when.date()))
        for name in self.MODULES:
            module = sys.modules.get(name)
            if module is not None and hasattr(module, "datetime"):
                patch.setattr(module, "datetime", fixed)


def _frozen_datetime(when: dt.datetime) -> type[dt.datetime]:
    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Frozen:
            return cls.fromtimestamp(when.timestamp(), tz)

        @classmethod
        def today(cls) -> Frozen:
            return cls.fromtimestamp(when.timestamp())

    return Frozen


def _frozen_date(day: dt.date) -> type[dt.date]:
    class Frozen(dt.date):
        @classmethod
        def today(cls) -> Frozen:
            return cls(day.year, day.month, day.day)

    return Frozen


def test_fresh_workspace_holds_every_template_and_offers_every_bundled_skill(
    tmp_path: Path,
) -> None:
    workspace = fresh_workspace(tmp_path)
    for name in BOOTSTRAP_FILES:
        assert (workspace / name).read_text() == (TEMPLATES_DIR / name).read_text()
    assert list((workspace / "skills").iterdir()) == []  # read where they ship, not copied
    bundled = sorted(p.parent.name for p in BUNDLED_SKILLS_DIR.glob("*/SKILL.md"))
    skills = make_ctx(workspace).skills
    assert [s.name for s in skills] == bundled
    assert {s.location.parent.parent for s in skills} == {BUNDLED_SKILLS_DIR}


def test_section_helpers_find_headings(tmp_path: Path) -> None:
    prompt = build(make_ctx(fresh_workspace(tmp_path)))
    assert section(prompt, "Tools").startswith("## Tools\n")
    assert section(prompt, "Runtime") == (
        "## Runtime\n\nhost=testhost | os=Linux 6.1.0 (x86_64) | python=3.11.9 | "
        "model=openai/gpt-4o-mini | channel=telegram"
    )
    assert file_block(prompt, "MEMORY.md") == (TEMPLATES_DIR / "MEMORY.md").read_text().strip()
    assert section(prompt, "No Such Section") == ""
