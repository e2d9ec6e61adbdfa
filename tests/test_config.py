"""Configuration: defaults < file < environment, and every bad file reported, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agent.config import ConfigError, Settings, load_settings

REPO = Path(__file__).resolve().parent.parent


def _flat(data: dict[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in data.items():
        if isinstance(value, dict) and key != "pins":
            keys |= _flat(value, f"{prefix}{key}.")
        else:
            keys.add(prefix + key)
    return keys


def test_example_file_lists_every_key_with_its_default(home: Path) -> None:
    example = tomllib.loads((REPO / "config.example.toml").read_text())
    defaults = Settings().model_dump(mode="json")
    # Secrets belong in the environment, and named pins are tables: both are shown commented.
    commented = {
        "llm.api_key",
        "channels.telegram.bot_token",
        "channels.discord.bot_token",
        "hardware.pins",
        "web.brave_api_key",
        "web.tavily_api_key",
        "state.url",
    }
    assert _flat(example) == _flat(defaults) - commented
    assert Settings(**example).model_dump(mode="json") == defaults


def test_file_then_environment_override(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[llm]\nmodel = "openai/a"\ntemperature = 0.35\n'
        '[channels.telegram]\nallowed_users = [12345, "@bob"]\n'
    )
    monkeypatch.setenv("PINCLAW_LLM__MODEL", "openai/b")
    settings = load_settings(config)
    assert settings.llm.model == "openai/b"
    assert settings.llm.temperature == 0.35
    assert settings.channels.telegram.allowed_users == ["12345", "@bob"]
    assert settings.config_file == config
    assert settings.workspace_dir == home / "workspace"


def test_config_found_through_pinclaw_config(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text("[agent]\nmax_tool_iterations = 3\n")
    monkeypatch.setenv("PINCLAW_CONFIG", str(config))
    assert load_settings().agent.max_tool_iterations == 3


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[llm\nmodel = 1", "not valid TOML"),
        ('[llm]\ntemperature = "hot"', "llm.temperature: Input should be a valid number"),
        ("[llm]\ntemprature = 1.0", "llm.temprature: unknown key"),
        ("[bogus]\nx = 1", "bogus: unknown key"),
        ('[hardware.pins.fan]\nmode = "pwm"', "hardware.pins.fan.pin: required value missing"),
        ('[llm]\napi_key = "sk-abc"', "set PINCLAW_LLM__API_KEY instead"),
    ],
)
def test_bad_file_names_file_key_and_reason(
    home: Path, tmp_path: Path, content: str, expected: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert any(
        line.startswith(f"{config}: ") and expected in line for line in caught.value.problems
    ), caught.value.problems


def test_bad_environment_value_names_the_variable(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__MAX_TOOL_ITERATIONS", "lots")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.problems[0].startswith(
        "environment variable PINCLAW_AGENT__MAX_TOOL_ITERATIONS: agent.max_tool_iterations:"
    )


def test_cli_reports_every_problem_and_exits_2(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[llm]\ntemperature = "hot"\nfallback_models = 3\n[agent]\nnope = 1\n')
    result = subprocess.run(
        [sys.executable, "-m", "agent", "--config", str(config), "doctor"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=REPO,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3, result.stderr
    assert all(line.startswith(f"config error: {config}: ") for line in lines)
    assert "Traceback" not in result.stderr


def test_the_state_urls_password_is_scrubbed_and_a_url_of_another_kind_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.app import make_scrubber

    monkeypatch.setenv("PINCLAW_STATE__URL", "postgresql://pinclaw:s%40fe-p4ss@db.lan/pinclaw")
    scrub = make_scrubber(load_settings(None))
    assert "s@fe-p4ss" not in scrub("the server said: password s@fe-p4ss was wrong")
    assert "db.lan" not in scrub("postgresql://pinclaw:s%40fe-p4ss@db.lan/pinclaw")
    monkeypatch.setenv("PINCLAW_STATE__URL", "mysql://pinclaw@db.lan/pinclaw")
    with pytest.raises(ConfigError, match=r"PINCLAW_STATE__URL.*postgresql://"):
        load_settings(None)


def test_a_refused_value_is_quoted_without_a_password(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line goes to stderr, the log and the owner's chat: a secret key's value is not
    quoted at all, a URL's password in any other key's is masked."""
    monkeypatch.setenv("PINCLAW_STATE__URL", "postgresql+psycopg://pinclaw:pg-pw-1@db.lan/x")
    monkeypatch.setenv("PINCLAW_AGENT__MAX_TOOL_ITERATIONS", "http://me:other-pw-2@db.lan/")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    iterations, state = sorted(caught.value.problems)
    assert state.startswith("environment variable PINCLAW_STATE__URL: state.url: Value error")
    assert "pg-pw-1" not in state and "(got" not in state
    assert iterations.endswith("(got 'http://me:***@db.lan/')")
