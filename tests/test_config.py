"""Configuration: defaults < file < environment, and every bad file reported, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from daemon_process import agent

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
    from agent.config import make_scrubber

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


def only_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr of a command that stopped with exit status 2."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    return lines[0]


def test_a_list_setting_in_agent_env_written_as_plain_text_is_one_line(home: Path) -> None:
    """`PINCLAW_LLM__FALLBACK_MODELS=openai/gpt-4o-mini` in agent.env, as one writes any
    other variable: pydantic-settings wants JSON for a list and raises SettingsError, which
    load_settings did not catch; every command stopped with a traceback ending in 'error
    parsing value for field "llm" from source "_EnvOnlyKnownKeys"', naming no variable."""
    home.mkdir(parents=True)
    (home / "agent.env").write_text("PINCLAW_LLM__FALLBACK_MODELS=openai/gpt-4o-mini\n")
    line = only_line(agent("doctor"))
    assert line.startswith(
        "config error: environment variable PINCLAW_LLM__FALLBACK_MODELS: llm.fallback_models: "
    ), line
    assert "must be JSON" in line and "openai/gpt-4o-mini" not in line


def test_a_config_file_not_in_utf8_is_one_line(home: Path, tmp_path: Path) -> None:
    """A config.toml saved as Latin-1 (an editor's default on some systems) with a pin's
    description "Lüfter": tomllib raises UnicodeDecodeError, which is not the
    TOMLDecodeError _read_toml caught; a traceback instead of 'file: problem'."""
    config = tmp_path / "config.toml"
    config.write_bytes('[hardware.pins.fan]\npin = 9\ndescription = "Lüfter"\n'.encode("latin-1"))
    line = only_line(agent("--config", str(config), "doctor"))
    assert line.startswith(f"config error: {config}: "), line
    assert line.endswith(": not UTF-8 text (byte 44); save it as UTF-8"), line


def test_a_config_file_starting_with_a_byte_order_mark_is_read(home: Path, tmp_path: Path) -> None:
    """Notepad's UTF-8 starts with a byte order mark, which tomllib calls an invalid
    statement at line 1: a mark nobody can see in the file is skipped instead."""
    config = tmp_path / "config.toml"
    config.write_bytes(b"\xef\xbb\xbf" + b'[agent]\ntimezone = "Europe/Berlin"\n')
    assert load_settings(config).agent.timezone == "Europe/Berlin"


def test_an_unknown_timezone_is_refused_as_a_config_error(home: Path, tmp_path: Path) -> None:
    """agent.timezone = "Europe/Berln" passed validation: schedules and budgets quietly ran
    on UTC (zone_named) while the prompt told the model "Time zone: Europe/Berln", and
    `agent hardware log --since 2025-05-01` ended in ZoneInfoNotFoundError's traceback."""
    config = tmp_path / "config.toml"
    config.write_text('[agent]\ntimezone = "Europe/Berln"\n')
    line = only_line(agent("--config", str(config), "hardware", "log", "--since", "2025-05-01"))
    assert line.startswith(f"config error: {config}: agent.timezone: "), line


def test_an_unknown_table_in_the_environment_names_the_variable_not_the_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in a channel's variable (PINCLAW_CHANNELS__TELEGRAMM__BOT_TOKEN): the error's
    location is the table, channels.telegramm, and _describe looked only for a variable of
    exactly that name, so it blamed config.toml, which holds nothing of the kind."""
    config = tmp_path / "config.toml"
    config.write_text('[llm]\nmodel = "openai/gpt-4o-mini"\n')
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAMM__BOT_TOKEN", "123:abc")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    [problem] = caught.value.problems
    assert problem.startswith("environment variable PINCLAW_CHANNELS__TELEGRAMM"), problem
    assert "123:abc" not in problem
