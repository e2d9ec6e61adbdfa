"""Usage, kept and shown: every model call of every kind of turn — a Telegram message, a pin
watch, a schedule, the heartbeat, a one-shot — leaves a row in state.db with its tokens (the
fake LLM's usage block, cached tokens too), LiteLLM's price (NULL for a model it cannot
price), the model, the chat, the person and what started it; `/usage` and `agent usage` show
them. The daemon with the real Telegram adapter on the fake Bot API, the model on the fake
provider (through LiteLLM, and directly with the fake standing in for OpenAI
itself, priced from LiteLLM's table), the Firmata emulator for the watch; `agent` as a
subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, Outcome, last_user_content, text, tool_calls
from fakes.telegram_server import FakeTelegram
from hardware_calls import board_env
from model_ways import PRICED_WAYS

from agent.app import open_store
from agent.durable.file import migrations
from agent.durable.file.migrations import APPLICATION_ID, LATEST
from agent.model.profiles.litellm_import import load_litellm

REPO = Path(__file__).resolve().parent.parent
OWNER, CAROL = 42, 7
PRICED = "openai/gpt-4o-mini"  # LiteLLM has its price; the fake answers for it
CACHED = 3
PINS = {"light": {"pin": "A0", "mode": "analog", "description": "light sensor"}}
ROW = "SELECT started_by, chat_key, person, model, input_tokens, cached_tokens, output_tokens, "
ROW += "cost_usd FROM usage ORDER BY id"


async def agent(*args: str) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the owner runs it in another terminal, off the event loop."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent", *args],
        capture_output=True, text=True, env=dict(os.environ), cwd=REPO, timeout=60,
    )  # fmt: skip


def respond(body: dict[str, Any]) -> Outcome:
    """The model, by what it is asked: the set-up message calls two tools, a trigger's turn
    answers as its kind, the heartbeat stays silent."""
    if body["messages"][-1]["role"] == "tool":
        return text("Both are set.")
    asked = str(last_user_content(body))
    if "set things up" in asked:
        watch = {"pin": "A0", "above": 700, "task": "Say the light is on."}
        return tool_calls(
            ("watch_pin", watch), ("schedule_task", {"when": "in 1 seconds", "task": "Say hi."})
        )
    if "Heartbeat (no one wrote)" in asked:
        return text("NO_REPLY")
    if "Pin watch #" in asked:
        return text("The light is on.")
    if "Scheduled task #" in asked:
        return text("Hi!")
    return text("echo: " + asked.splitlines()[-1])


@pytest.fixture(params=list(PRICED_WAYS))
def usage_env(
    request: pytest.FixtureRequest,
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    emulator: FirmataBoard,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    values = {
        "PINCLAW_LLM__MODEL": PRICED,
        "OPENAI_BASE_URL": fake_llm.base_url,
        **PRICED_WAYS[request.param],
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
        "PINCLAW_HEARTBEAT__ENABLED": "true",
        "PINCLAW_HEARTBEAT__INTERVAL_MINUTES": "0.03",
        "PINCLAW_AGENT__TIMEZONE": "Europe/Berlin",
        **board_env(
            monkeypatch,
            emulator.path,
            PINS,
            sampling_interval_ms="20",
            PINCLAW_WATCHES__MIN_INTERVAL_S="0.2",
        ),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**telegram_env, **values}


def texts(fake: FakeTelegram, chat: int = OWNER) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat]


def price(input_tokens: int, cached: int, output_tokens: int) -> float:
    """What LiteLLM's price map says such a call of PRICED costs."""
    rates = load_litellm().model_cost["gpt-4o-mini"]
    return (
        (input_tokens - cached) * rates["input_cost_per_token"]
        + cached * rates["cache_read_input_token_cost"]
        + output_tokens * rates["output_cost_per_token"]
    )


def summary(kept: list[tuple[Any, ...]]) -> str:
    """/usage's figures for these rows of ROW."""
    return (
        f"${sum(r[7] for r in kept):.4f} — {len(kept)} calls, "
        f"{sum(r[4] for r in kept):,} tokens in ({sum(r[5] for r in kept):,} cached), "
        f"{sum(r[6] for r in kept):,} out"
    )


async def test_every_kind_of_turn_keeps_its_calls_and_the_owner_sees_them(
    usage_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, home: Path, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.responder = respond
    fake_llm.cached_tokens = CACHED
    emulator.set_analog("A0", 650)
    db = home / "state.db"
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "set things up")
        await fake_telegram.await_for(lambda m: m.plain == "Both are set.", timeout=10)
        emulator.set_analog("A0", 800)
        await fake_telegram.await_for(lambda m: m.plain == "The light is on.", timeout=5)
        await fake_telegram.await_for(lambda m: m.plain == "Hi!", timeout=5)
        await eventually(
            lambda: rows(db, "SELECT 1 FROM usage WHERE started_by = 'heartbeat'"),
            within=10, what="a heartbeat's call",
        )  # fmt: skip
        one_shot = await agent("run", "-m", "how are you")  # answered by the daemon
        assert one_shot.returncode == 0, one_shot.stderr
        assert one_shot.stdout.strip() == "echo: how are you"
        fake_telegram.inject_message(OWNER, OWNER, "/usage")
        fake_telegram.inject_message(CAROL, CAROL, "/usage", username="carol")
        [shown] = await fake_telegram.await_for(lambda m: "Today (" in (m.plain or ""))
        [refused] = await fake_telegram.await_for(lambda m: m.chat_id == CAROL)
    kept = rows(db, ROW)
    assert {row[0] for row in kept} == {"message", "watch", "schedule", "heartbeat", "one-shot"}
    assert [row[:4] for row in kept if row[0] == "message"] == [
        ("message", f"telegram:{OWNER}:", "me", PRICED)
    ] * 2  # the call that asked for the tools, and the one that answered
    chats = {"watch": f"telegram:{OWNER}:", "schedule": f"telegram:{OWNER}:"}
    chats |= {"heartbeat": f"telegram:{OWNER}:", "one-shot": "cli:oneshot"}
    for kind, chat in chats.items():
        assert (kind, chat, "me", PRICED) in [row[:4] for row in kept], kind
    for _, _, _, _, input_tokens, cached, output_tokens, cost in kept:
        assert input_tokens > CACHED and cached == CACHED and output_tokens > 0
        assert cost == pytest.approx(price(input_tokens, cached, output_tokens))
    assert shown.chat_id == OWNER
    lines = (shown.plain or "").splitlines()
    # The calls before /usage was answered (heartbeats go on meanwhile): their sum, shown.
    said = [summary(kept[:n]) for n in range(1, len(kept) + 1)]
    assert lines[0].startswith("Today (") and lines[0].split("): ", 1)[1] in said
    assert lines[1].startswith("This month (") and lines[1].split("): ", 1)[1] in said
    assert lines[-1] == "(days in Europe/Berlin; agent usage shows more)"  # `code` as plain
    assert refused.plain == "Only the owner can use /usage, in their private chat with me."

    by_kind = await agent("usage", "--by", "trigger")
    assert by_kind.returncode == 0, by_kind.stderr
    table = by_kind.stdout
    assert "Model usage since " in table and "(Europe/Berlin), by trigger" in table
    for kind in ("message", "watch", "schedule", "heartbeat", "one-shot", "total"):
        assert kind in table, (kind, table)
    calls = len(rows(db, ROW))
    total_line = next(line for line in table.splitlines() if "total" in line)
    assert f" {calls} " in f" {total_line} "  # the total's calls column
    by_day = await agent("usage")
    day = datetime.now(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d")
    [bar] = [line for line in by_day.stdout.splitlines() if day in line and "█" in line]
    assert bar.rstrip().endswith(f"${sum(r[7] for r in rows(db, ROW)):.4f}")


async def test_a_model_without_a_price_keeps_its_tokens_and_an_unknown_cost(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(text("fine, thanks"))
    answered = await agent("run", "-m", "how are you", "--no-daemon")
    assert answered.returncode == 0, answered.stderr
    [(kind, chat, person, model, input_tokens, cached, output_tokens, cost)] = rows(
        home / "state.db", ROW
    )
    assert (kind, chat, person, model) == ("one-shot", "cli:oneshot", "owner", "openai/test-model")
    assert input_tokens > 0 and cached == 0 and output_tokens > 0 and cost is None
    shown = await agent("usage", "--by", "model")
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if "openai/test-model" in line]
    assert line.strip(" │").split()[-1] == "unknown"  # the cost column
    assert "1 of 1 calls were to models with no price" in shown.stdout
    assert f"{input_tokens + output_tokens:,} tokens" in shown.stdout  # the day's bar: tokens


async def test_agent_usage_with_nothing_kept_and_a_bad_since(llm_env: dict[str, str]) -> None:
    empty = await agent("usage", "--since", "month")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith("No model calls since ")
    bad = await agent("usage", "--since", "last tuesday")
    assert bad.returncode == 2
    assert "'last tuesday': write e.g. 7d, 12h, 2w, today, month or 2030-01-31" in bad.stderr


def test_a_version_2_state_db_gains_the_usage_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrations.memory_schema.ensure(conn, str)
        conn.execute("BEGIN")
        for step in migrations.STEPS[:2]:
            step.apply(conn)
        conn.execute("PRAGMA user_version = 2")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("INSERT INTO chats (chat_key, session) VALUES ('telegram:42:', 1)")
        conn.execute("COMMIT")
    assert "usage" not in {name for (name,) in rows(path, "SELECT name FROM sqlite_master")}

    async def bring_up() -> None:
        store = await open_store(path)
        await store.db.close()

    asyncio.run(bring_up())
    assert rows(path, "PRAGMA user_version") == [(LATEST,)] and LATEST >= 3
    tables = {name for (name,) in rows(path, "SELECT name FROM sqlite_master")}
    assert {"usage", "budget_overrides", "budget_notices", "chat_models"} <= tables
    assert rows(path, "SELECT chat_key FROM chats") == [("telegram:42:",)]
    assert rows(path, "SELECT COUNT(*) FROM usage") == [(0,)]


async def test_agent_usage_shows_chat_keys_names_and_models_verbatim(
    llm_env: dict[str, str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat key that spells an emoji code (`:100:`), a name holding rich markup and a
    model name with brackets are data: each table prints them as they are."""
    from agent.durable.owner.usage import Call, UsageBook

    store = await open_store(home / "state.db")
    book, now = UsageBook(store.db), datetime.now().timestamp()
    for chat, person, model in (
        ("telegram:100:", "[bold]Ann[/] :smile:", "openai/[red]mini"),
        ("discord:7:[/]", "Bob [/]", "openai/:100:"),
    ):
        await book.record(Call(now, chat, person, "message", model, 1200, 0, 30, None))
    await store.db.close()
    monkeypatch.setenv("COLUMNS", "120")
    shown = {by: (await agent("usage", "--by", by)) for by in ("chat", "person", "model")}
    for done in shown.values():
        assert done.returncode == 0, done.stderr
    rows_of = {
        by: [line for line in done.stdout.splitlines() if " 1,200 │" in line]
        for by, done in shown.items()
    }
    calls = "│     1 │     1,200 │      0 │         30 │ unknown │"
    assert sorted(rows_of["chat"]) == [f"│ discord:7:[/] {calls}", f"│ telegram:100: {calls}"]
    assert sorted(rows_of["person"]) == [
        f"│ Bob [/]              {calls}",
        f"│ [bold]Ann[/] :smile: {calls}",
    ]
    models = [f"│ openai/:100:     {calls}", f"│ openai/[red]mini {calls}"]
    assert sorted(rows_of["model"]) == models
    assert "💯" not in "".join(done.stdout for done in shown.values())


def test_every_console_of_the_cli_prints_data_verbatim() -> None:
    """agent/cli/verbatim.py's console, which `agent usage`, `agent chat` and the one-shot's
    screen print through: a line of data is printed as it is."""
    import io

    from agent.cli import verbatim

    out = io.StringIO()
    verbatim.console(file=out, width=100).print("telegram:100: [bold]Ann[/] :smile: [/]")
    assert out.getvalue() == "telegram:100: [bold]Ann[/] :smile: [/]\n"
