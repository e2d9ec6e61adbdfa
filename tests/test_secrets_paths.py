"""Secrets on the paths issue 36 found open, each through the real `agent run` at the most
verbose logging: a provider's 401 that echoes the key (on both transports), the bot token in
the URLs httpx and python-telegram-bot log."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, env_of
from fakes.llm_server import FakeLLM, error
from fakes.telegram_server import FakeTelegram

OWNER = 42
# No well-known key format: only the scrubber's knowledge of the configured value catches it.
KEY = "pc-live-Hq7Zr2Wx9Lm4Tb8Kd"
ECHO = f"Incorrect API key provided: {KEY}. Find yours at example."
MOST_VERBOSE = ("-vvv",)


def db_text(home: Path) -> str:
    """Every value of every table of state.db, as text."""
    found: list[str] = []
    with sqlite3.connect(home / "state.db") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                found.extend(str(value) for value in row)
    return "\n".join(found)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    """Daemons a test started, stopped at its end whatever happened."""
    daemons: list[DaemonProcess] = []
    yield daemons
    for daemon in daemons:
        daemon.ensure_stopped()


def start(env: dict[str, str], log: Path, running: list[DaemonProcess]) -> DaemonProcess:
    daemon = DaemonProcess(env_of(**env), log, flags=MOST_VERBOSE).start()
    running.append(daemon)
    return daemon.wait_ready()


@pytest.mark.parametrize("client", ["auto", "litellm"])  # auto: the OpenAI SDK at 127.0.0.1
@pytest.mark.parametrize("variable", ["PINCLAW_LLM__API_KEY", "OPENAI_API_KEY"])
def test_an_echoed_key_reaches_no_chat_status_log_or_db(
    client: str,
    variable: str,
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    home: Path,
    tmp_path: Path,
    running: list[DaemonProcess],
) -> None:
    env = {
        **telegram_env,
        variable: KEY,
        "PINCLAW_LLM__CLIENT": client,
        "PINCLAW_LLM__NUM_RETRIES": "0",
        "PINCLAW_PEOPLE__OWNER__TELEGRAM": str(OWNER),
        "PINCLAW_PEOPLE__OWNER__OWNER": "true",
    }
    fake_llm.script(*[error(401, ECHO)] * 4)
    daemon = start(env, tmp_path / "daemon.log", running)
    fake_telegram.inject_message(OWNER, OWNER, "hello")
    fake_telegram.wait_for(lambda m: m.method == "sendMessage", timeout=20)
    fake_telegram.inject_message(OWNER, OWNER, "/status")
    sent = fake_telegram.wait_for(lambda m: m.method == "sendMessage", count=2, timeout=20)
    assert daemon.terminate() == 0
    assert fake_llm.requests, "the model was asked"
    chat = "\n".join(m.plain or "" for m in sent)
    assert "refused the API key (Incorrect API key provided: [REDACTED]" in chat, chat
    assert KEY not in chat
    assert "Incorrect API key provided: [REDACTED]" in daemon.log
    assert KEY not in daemon.log
    assert KEY not in db_text(home)
