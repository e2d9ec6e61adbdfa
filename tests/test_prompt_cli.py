"""`agent prompt show` with PINCLAW_HOME in a temporary folder: the click command called in
this process (click's CliRunner), and once the installed `agent` as a subprocess."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_prompt_kit import count

from agent.app import build_tools, prompt_source
from agent.cli.main import cli
from agent.config import load_settings
from agent.prompt.context import IDENTITY_LINE
from agent.workspace import ensure_workspace
from channels.telegram.kind import TELEGRAM
from tools.policy import SecurityPolicy

MODEL = "openai/gpt-4o-mini"  # LiteLLM knows it: a 128,000-token window, so a 32,000 budget


@pytest.fixture
def env(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("PINCLAW_LLM__MODEL", MODEL)
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def show(*args: str) -> Result:
    """`agent prompt show ARGS` through click in this process, with this environment. The
    command sets up logging as `agent` does; the loggers are put back as they were after."""
    loggers = logging.Logger.manager.loggerDict
    levels = {name: log.level for name, log in loggers.items() if isinstance(log, logging.Logger)}
    root = logging.getLogger()
    root_level, root_handlers = root.level, root.handlers[:]
    try:
        argv = ["prompt", "show", *args]
        return CliRunner().invoke(cli, argv, prog_name="agent", obj={}, catch_exceptions=False)
    finally:
        root.setLevel(root_level)
        root.handlers[:] = root_handlers
        for name, log in list(loggers.items()):
            if isinstance(log, logging.Logger):
                log.setLevel(levels.get(name, logging.NOTSET))


def in_process_prompt() -> str:
    """The Telegram prompt built here from the same settings, with a simple counter."""
    settings = load_settings()
    ensure_workspace(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(settings.security, settings.workspace_dir)
    source = prompt_source(settings, build_tools(settings, policy), policy, budget_tokens=10**6)
    source = replace(source, count_tokens=count)
    return source.build(source.context("telegram", TELEGRAM.capabilities)).text


def test_the_installed_agent_prompt_show_prints_exactly_the_prompt(
    env: dict[str, str], home: Path
) -> None:
    """The one subprocess: the `agent` script pip installed, end to end, from elsewhere."""
    installed = Path(sys.executable).with_name("agent")
    assert installed.exists(), f"no {installed}: `pip install -e .` installs it"
    result = subprocess.run(
        [str(installed), "prompt", "show", "--channel", "telegram"],
        env=env,
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == in_process_prompt()


def test_prompt_show_prints_exactly_the_prompt(env: dict[str, str]) -> None:
    result = show("--channel", "telegram")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("## Tools\n")
    capabilities = result.stdout[result.stdout.index("## Channel Capabilities") :]
    assert "You are running as the Telegram bot" in capabilities
    assert result.stdout == in_process_prompt()


def test_prompt_show_mode_none_prints_the_identity_line(env: dict[str, str]) -> None:
    result = show("--channel", "discord", "--mode", "none")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == IDENTITY_LINE


def test_prompt_show_mode_none_with_the_xml_dispatcher_keeps_the_tool_protocol(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__TOOL_DISPATCHER", "xml")
    result = show("--channel", "cli", "--mode", "none")
    assert result.exit_code == 0, result.stderr
    shown = result.stdout
    assert shown.startswith(f"{IDENTITY_LINE}\n\n## Tools\n")
    assert "- **file_read**: " in shown
    protocol = shown[shown.index("## Tool Use Protocol") :]
    assert '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>' in (
        protocol
    )
    assert "## Safety" not in shown and "## Project Context" not in shown


def test_prompt_show_stats_prints_a_row_per_section_a_total_and_the_budget(
    env: dict[str, str],
) -> None:
    result = show("--channel", "telegram", "--stats")
    assert result.exit_code == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines()[1:]:
        match = re.fullmatch(r"(\w+)\s+([\d,]*)\s+([\d,]+)", line)
        assert match, f"not a table row: {line!r}"
        rows[match[1]] = (match[2], int(match[3].replace(",", "")))
    assert result.stdout.splitlines()[0].split() == ["section", "chars", "tokens"]
    assert list(rows) == [
        "tools", "task", "tool_honesty", "safety", "skills", "workspace", "project_context",
        "date_time", "runtime", "channel_capabilities", "silent_replies", "total", "budget",
    ]  # fmt: skip
    sections = [tokens for name, (_, tokens) in rows.items() if name not in ("total", "budget")]
    assert all(tokens > 0 for tokens in sections)
    total = rows["total"][1]
    assert sum(sections) * 0.9 <= total <= sum(sections) * 1.1
    assert int(rows["total"][0].replace(",", "")) == len(in_process_prompt())
    assert rows["budget"] == ("", 32_000)
