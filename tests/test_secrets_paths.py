"""Secrets on the paths issue 36 found open, each through the real `agent run` at the most
verbose logging: a provider's 401 that echoes the key (on both transports), the bot token in
the URLs httpx and python-telegram-bot log, in a traceback, or in a library's own handler."""

from __future__ import annotations

import io
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import enable_telegram
from daemon_process import DaemonProcess, env_of
from fakes.llm_server import FakeLLM, error, text
from fakes.telegram_server import FakeTelegram

from agent.cli.logs import NOISY, setup_logging
from agent.security import REDACTED, Scrubber, ScrubbingFilter

OWNER = 42
# No well-known key format: only the scrubber's knowledge of the configured value catches it.
KEY = "pc-live-Hq7Zr2Wx9Lm4Tb8Kd"
ECHO = f"Incorrect API key provided: {KEY}. Find yours at example."
MOST_VERBOSE = ("-vvv",)
# A bot token as BotFather makes them: the well-known pattern catches it too.
TOKEN = "7123456789:AAHk3Jd92kLmQpRsTuVwXyZ0123456789ab"


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


@pytest.fixture
def real_token() -> Iterator[FakeTelegram]:
    with FakeTelegram(TOKEN) as server:
        yield server


def test_no_bot_token_in_the_most_verbose_log(
    llm_env: dict[str, str],
    fake_llm: FakeLLM,
    real_token: FakeTelegram,
    tmp_path: Path,
    running: list[DaemonProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {**llm_env, **enable_telegram(real_token, monkeypatch)}
    fake_llm.script(text("Hello there."))
    daemon = start(env, tmp_path / "daemon.log", running)
    real_token.inject_message(OWNER, OWNER, "hello")
    real_token.wait_for(lambda m: m.method == "sendMessage", timeout=20)
    assert daemon.terminate() == 0
    assert f"/bot{REDACTED}/sendMessage" in daemon.log  # httpx logged the request's URL
    assert TOKEN not in daemon.log
    assert TOKEN.split(":")[1] not in daemon.log


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """setup_logging changes the process's logging: put it back for the next test."""
    root = logging.getLogger()
    handlers, level, factory = root.handlers[:], root.level, logging.getLogRecordFactory()
    levels = {name: logging.getLogger(name).level for name in NOISY}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.setLogRecordFactory(factory)
    for name, noisy_level in levels.items():
        logging.getLogger(name).setLevel(noisy_level)


@pytest.mark.usefixtures("logging_restored")
def test_every_record_is_scrubbed_whoever_writes_it(
    real_token: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library's own handler (LiteLLM keeps one), a traceback and a request httpx logs, at
    -vv: none carries the token, which the scrubber knows as a configured secret."""
    known = "pc-bot-secret-Hq7Zr2Wx9Lm4"  # no well-known format
    setup_logging(2, False, ScrubbingFilter(Scrubber([known])))
    own = io.StringIO()
    library = logging.getLogger("some_library")
    library.addHandler(logging.StreamHandler(own))  # added after setup, as a lazy import does
    library.propagate = False
    try:
        library.debug("calling %s", f"{real_token.api_base}{TOKEN}/getMe with {known}")
        try:
            raise RuntimeError(f"Client error for url '{real_token.api_base}{TOKEN}/getMe'")
        except RuntimeError:
            logging.getLogger("agent.some_module").exception("sending failed (%s)", known)
        logging.getLogger("agent.other").warning("here", stack_info=True, extra={"k": known})
        with httpx.Client() as client:
            assert client.post(f"{real_token.api_base}{TOKEN}/getMe").status_code == 200
    finally:
        library.handlers.clear()
        library.propagate = True
    written = capsys.readouterr().err + own.getvalue()
    assert "Traceback" in written and "RuntimeError: Client error" in written
    assert "HTTP Request: POST" in written and f"/bot{REDACTED}/getMe" in written
    assert TOKEN not in written and TOKEN.split(":")[1] not in written
    assert known not in written
