"""Changes without a restart, in the daemon of this process: config.toml edited while it runs
(its file watch reads it again) — a new allowed user answered, a new model used from the next
turn while the running turn finishes on the old one, a broken edit kept out with the owner
told once, a bot token changed in agent.env restarting only that channel with nothing lost;
and the two rules beneath: how changed keys are sorted, how agent.env is read again. SIGHUP
and `agent reload` as a process: tests/test_reload_process.py; boards and MCP servers:
tests/test_reload_tools.py."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Daemon, enable_discord, eventually
from daemon_process import agent, rows
from fakes.discord_server import FakeDiscord
from fakes.llm_server import FakeLLM, delay
from fakes.llm_server import text as llm_text
from fakes.model_double import ScriptedModel, text
from fakes.telegram_server import FakeTelegram

from agent.config import load_settings, make_scrubber
from agent.daemon.setting_changes import SettingChanges
from agent.security import ScrubbingFilter

OWNER = 42
RELOAD_S = 15.0  # a poll (1 s), the file held still, the reload; on a loaded machine


def write_config(home: Path, body: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(body)
    return path


def write_env(home: Path, body: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "agent.env"
    path.write_text(body)
    return path


def said(caplog: pytest.LogCaptureFixture, words: str) -> int:
    return sum(words in record.getMessage() for record in caplog.records)


async def reloaded(caplog: pytest.LogCaptureFixture, words: str, count: int = 1) -> None:
    await eventually(lambda: said(caplog, words) >= count, RELOAD_S, f"a reload: {words!r}")


def plain(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat_id]


@pytest.fixture(autouse=True)
def _status_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pinclaw")  # "settings read again (...)"


async def test_a_user_added_to_allowed_users_is_answered_without_a_restart(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS")  # the file says it
    allowed = '[channels.telegram]\nallowed_users = ["42"]\npairing = false\n'
    config = write_config(home, allowed)
    async with daemon():
        fake_telegram.inject_message(77, 77, "hello?", username="dave")
        [refused] = await fake_telegram.await_for(lambda m: m.chat_id == 77)
        config.write_text(allowed.replace('["42"]', '["42", "77"]'))
        await reloaded(caplog, "applied: channels.telegram.allowed_users")
        fake_telegram.inject_message(77, 77, "and now?", username="dave")
        await fake_telegram.await_for(lambda m: m.chat_id == 77, count=2)
    assert "allowed_users" in (refused.plain or "")  # the polite refusal, before
    answer = plain(fake_telegram, 77)[1]
    assert answer.startswith("echo: ") and answer.endswith("and now?")
    assert len(model.requests) == 1  # the stranger's first message never reached the model


async def test_a_new_model_answers_the_next_turn_and_the_running_one_ends_on_the_old(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PINCLAW_LLM__MODEL")
    monkeypatch.setenv("PINCLAW_AGENT__PROMPT_MODE", "full")  # its Runtime line names the model
    config = write_config(home, '[llm]\nmodel = "openai/test-model"\n')
    async with daemon():
        fake_llm.script(delay(4, llm_text("slow answer from the old model")))
        fake_telegram.inject_message(OWNER, OWNER, "first")
        await eventually(lambda: len(fake_llm.requests) == 1, 10, "the slow turn's call")
        config.write_text('[llm]\nmodel = "openai/other-model"\n')
        await reloaded(caplog, "applied: llm.model")
        assert plain(fake_telegram, OWNER) == []  # the slow turn still runs
        [slow] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        fake_telegram.inject_message(OWNER, OWNER, "second")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2)
    assert slow.plain == "slow answer from the old model"
    assert [r["model"] for r in fake_llm.requests] == ["test-model", "other-model"]
    prompts = [r["messages"][0]["content"] for r in fake_llm.requests]
    assert "model=openai/test-model" in prompts[0]  # the prompt built again, for the new one
    assert "model=openai/other-model" in prompts[1]
    assert "second" in plain(fake_telegram, OWNER)[1]


@pytest.mark.usefixtures("owner_is_42")
async def test_a_broken_edit_is_kept_out_and_the_owner_told_once(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = write_config(home, "[agent]\nmax_tool_iterations = 5\n")
    broken = "[agent]\nmax_tool_iterations = 0\n"
    async with daemon():
        config.write_text(broken)
        [told] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=RELOAD_S)
        fake_telegram.inject_message(OWNER, OWNER, "still there?")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2)
        config.write_text(broken + "# saved again, the same mistake\n")
        await reloaded(caplog, "settings not applied", count=2)
        doctor = agent("doctor", env=dict(os.environ))
        config.write_text("[agent]\nmax_tool_iterations = 6\n")
        await reloaded(caplog, "applied: agent.max_tool_iterations")
    problem = f"{config}: agent.max_tool_iterations: Input should be greater than or equal to 1"
    assert told.plain == f"Settings not applied; the last good ones stay:\n{problem} (got 0)"
    assert plain(fake_telegram, OWNER)[1].endswith("still there?")  # the old settings answer
    assert len(plain(fake_telegram, OWNER)) == 2  # told once, not at the second save
    assert doctor.returncode == 2 and f"config error: {problem}" in doctor.stderr


@pytest.fixture
def scrubbed_log_records() -> Iterator[None]:
    """Every log record scrubbed as it is made, with the scrubber `agent run` makes from its
    settings (agent/cli/main.py `_load`); the record factory put back afterwards."""
    before = logging.getLogRecordFactory()
    ScrubbingFilter(make_scrubber(load_settings())).cover_every_record()
    yield
    logging.setLogRecordFactory(before)


@pytest.mark.usefixtures("owner_is_42")
async def test_a_refused_state_url_in_agent_env_is_not_told_to_the_owner_or_logged(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
    scrubbed_log_records: None,  # after the settings fixtures: it reads them
) -> None:
    """The owner puts the PostgreSQL URL in agent.env as SQLAlchemy spells it
    (postgresql+psycopg://): the running daemon reads agent.env again, refuses the value,
    and says why in the log and in the owner's private chat. The password must not go."""
    password = "Pg-Pass-9f3c1e7a2b"  # no KEY/TOKEN/... in it, no well-known key format
    caplog.set_level(logging.INFO)
    async with daemon():
        url = f"postgresql+psycopg://pinclaw:{password}@127.0.0.1:5432/pinclaw"
        write_env(home, f"PINCLAW_STATE__URL={url}\n")
        [told] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=RELOAD_S)
        await reloaded(caplog, "settings not applied")
    problem = "environment variable PINCLAW_STATE__URL: state.url: Value error, must be a"
    assert problem in (told.plain or "")  # the variable, the key and what is wrong
    assert password not in (told.plain or "")  # the owner's Telegram chat
    assert password not in "\n".join(record.getMessage() for record in caplog.records)


async def test_a_new_bot_token_restarts_only_telegram_and_queued_messages_are_answered(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    fake_discord: FakeDiscord,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    enable_discord(fake_discord, monkeypatch)
    name = "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN"
    monkeypatch.delenv(name)  # agent.env gives it; the environment is put back after
    env_file = write_env(home, f"{name}={fake_telegram.token}\n")
    async with daemon():
        await fake_discord.await_for(lambda: fake_discord.identify_count == 1)
        model.script(delay(6, text("never sent: the restart cuts this turn")))
        fake_telegram.inject_message(OWNER, OWNER, "first")
        await eventually(lambda: len(model.requests) == 1, 10, "the slow turn")
        fake_telegram.inject_message(OWNER, OWNER, "second")
        pending = "SELECT count(*) FROM inbox WHERE status = 'pending'"
        await eventually(lambda: rows(home / "state.db", pending) == [(2,)], 10, "2 pending")
        fake_telegram.token = "654321:NEWTOKEN"  # the old one revoked at @BotFather
        env_file.write_text(f"{name}={fake_telegram.token}\n")
        await reloaded(caplog, "telegram restarted for: channels.telegram.bot_token")
        answered = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2, timeout=20)
    assert [m.plain.rsplit("\n", 1)[-1] for m in answered if m.plain] == ["first", "second"]
    assert fake_discord.identify_count == 1  # Discord went on as it was
    assert rows(home / "state.db", pending) == [(0,)]


def test_changes_are_sorted_into_live_a_channels_restart_and_a_full_restart(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.config import load_settings

    write_config(home, '[llm]\nmodel = "openai/a"\n')
    running = load_settings()
    write_config(
        home,
        '[llm]\nmodel = "openai/b"\n[workspace]\npath = "elsewhere"\n'
        '[channels.telegram]\nallowed_users = ["1"]\ngroup_mode = "all"\n'
        '[security]\napproval_timeout_s = 30\nautonomy = "full"\n'
        '[people.ann]\ntelegram = "5"\n',
    )
    changes = SettingChanges.between(running, load_settings())
    assert changes.live == (
        "llm.model",
        "security.approval_timeout_s",
        "channels.telegram.allowed_users",
        "people.ann",
    )
    assert changes.channels == {"telegram": ("channels.telegram.group_mode",)}
    assert changes.restart == ("workspace.path", "security.autonomy")
    kept = changes.settings  # what the daemon runs with: the restart's keys as they were
    assert kept.workspace_dir == running.workspace_dir and kept.security.autonomy == "supervised"
    assert kept.security.approval_timeout_s == 30 and kept.llm.model == "openai/b"
    assert changes.lines(["telegram restarted"])[-1] == (
        "restart pinclaw for: workspace.path, security.autonomy"
    )


def test_agent_env_read_again_changes_what_it_gave_never_what_the_shell_exported(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.home import load_env_file, reload_env_file, restore_env

    given, dropped, new, shell = (f"PINCLAW_TEST_{n}" for n in ("GIVEN", "DROPPED", "NEW", "SH"))
    for name in (given, dropped, new):
        monkeypatch.setenv(name, "")  # so that the test's end puts the environment back
        monkeypatch.delenv(name)
    monkeypatch.setenv(shell, "exported")
    write_env(home, f"{given}=1\n{dropped}=x\n{shell}=from the file\n")
    load_env_file(home, os.environ)
    write_env(home, f"{given}=2\n{shell}=edited\n{new}=n\n")
    before = reload_env_file(home)
    now = {name: os.environ.get(name) for name in (given, dropped, new, shell)}
    assert now == {given: "2", dropped: None, new: "n", shell: "exported"}
    assert before == {given: "1", dropped: "x", new: None}
    restore_env(home, before)  # the settings were refused: as it was
    now = {name: os.environ.get(name) for name in (given, dropped, new, shell)}
    assert now == {given: "1", dropped: "x", new: None, shell: "exported"}
