"""Budgets that stop runaway spending, end to end: the daemon with the real Telegram adapter on
the fake Bot API and the fake provider (through LiteLLM, and standing in for OpenAI itself,
called directly), for a model LiteLLM has a price for. The
heartbeat's own limit stops the heartbeat while the chat still answers; the daily limit, set
by the owner in their chat, warns once at 80 %, then answers chats with one line and calls
no model; raised, it answers again. `agent budget` keeps the owner's value until config.toml
changes that limit; `max_tokens_per_turn` stops a turn of a model without a price."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.llm_server import FakeLLM, Outcome, last_user_content, text, tool_calls
from fakes.telegram_server import FakeTelegram
from model_ways import PRICED_WAYS

REPO = Path(__file__).resolve().parent.parent
OWNER = 42
PRICED = "openai/gpt-4o-mini"


async def agent(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the owner runs it in another terminal, off the event loop."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent", *args],
        capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO, timeout=60,
    )  # fmt: skip


def respond(body: dict[str, Any]) -> Outcome:
    asked = str(last_user_content(body))
    if "Heartbeat (no one wrote)" in asked:
        return text("NO_REPLY")
    return text("re: " + asked.splitlines()[-1])


@pytest.fixture(params=list(PRICED_WAYS))
def budget_env(
    request: pytest.FixtureRequest,
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """Heartbeats every 1.2 s whose own limit the first one spends; a daily limit far off."""
    values = {
        "PINCLAW_LLM__MODEL": PRICED,
        "OPENAI_BASE_URL": fake_llm.base_url,
        **PRICED_WAYS[request.param],
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
        "PINCLAW_HEARTBEAT__ENABLED": "true",
        "PINCLAW_HEARTBEAT__INTERVAL_MINUTES": "0.02",
        "PINCLAW_BUDGET__HEARTBEAT_DAILY_USD": "0.0001",
        "PINCLAW_BUDGET__DAILY_USD": "1",
        "PINCLAW_AGENT__TIMEZONE": "Europe/Berlin",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**telegram_env, **values}


def said(fake: FakeTelegram) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == OWNER]


def heartbeats(fake_llm: FakeLLM) -> int:
    return sum("Heartbeat (no one wrote)" in str(r["messages"]) for r in fake_llm.requests)


async def test_the_heartbeat_stops_then_chats_get_one_line_until_the_owner_raises_it(
    budget_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon], caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fake_llm.responder = respond
    db = home / "state.db"
    caplog.set_level(logging.WARNING, logger="agent.runtime.owner.budget")

    async def ask(words: str) -> str:
        """The answer to `words` (a notice the turn gave meanwhile may come before it)."""
        before = len(said(fake_telegram))
        fake_telegram.inject_message(OWNER, OWNER, words)

        def answers() -> list[str]:
            return [line for line in said(fake_telegram)[before:] if not is_notice(line)]

        await eventually(answers, within=10, what=f"the answer to {words}")
        return answers()[0]

    async with daemon():
        await eventually(lambda: heartbeats(fake_llm) == 1, within=10, what="a heartbeat")
        stopped = "The daily budget for heartbeats is spent ("
        await fake_telegram.await_for(lambda m: (m.plain or "").startswith(stopped), timeout=5)
        await asyncio.sleep(3)  # two more heartbeats come due: neither calls the model
        assert heartbeats(fake_llm) == 1
        assert rows(db, "SELECT COUNT(*) FROM usage WHERE started_by = 'heartbeat'") == [(1,)]
        assert await ask("hello 1") == "re: hello 1"  # the chat still answers

        [(spent,)] = rows(db, "SELECT SUM(cost_usd) FROM usage")
        [(turn,)] = rows(db, "SELECT cost_usd FROM usage ORDER BY id DESC LIMIT 1")
        limit = f"{spent + 1.2 * turn:.6f}"  # the next turn passes 80 %, the one after 100 %
        set_to = await ask(f"/budget daily {limit}")
        assert set_to.startswith(f"The daily limit is now ${float(limit):.6f}".rstrip("0"))
        assert await ask("hello 2") == "re: hello 2"
        assert await ask("hello 3") == "re: hello 3"
        calls = len(fake_llm.requests)
        refusal = await ask("hello 4")
        assert refusal.startswith("The daily budget ($") and " is spent; it resets at " in refusal
        assert "(00:00 Europe/Berlin, in " in refusal
        assert refusal.endswith("The owner can raise it with /budget daily AMOUNT.")
        assert len(fake_llm.requests) == calls  # no model was called for it
        await asyncio.sleep(1.5)  # a heartbeat comes due meanwhile: it calls nothing either
        assert len(fake_llm.requests) == calls
        assert (await ask("/budget daily 5")).startswith("The daily limit is now $5.00")
        assert await ask("hello 5") == "re: hello 5"
        assert await ask("/budget") == "\n".join([
            "Budget (days and months in Europe/Berlin):",
            f"  daily: $5.00, spent {usd(db)} (set by hand)",
            f"  monthly: none, spent {usd(db)}",
            f"  heartbeat: $0.0001, spent {usd(db, 'heartbeat')}",
            "  schedules: none, spent $0.00",
            "  watches: none, spent $0.00",
            "  jobs: none, spent $0.00",
            "  tokens: none",
            "Change one with /budget NAME AMOUNT (0: no limit); /budget reset: "
            "config.toml's again.",
        ])  # fmt: skip
    told = said(fake_telegram)
    warned = [line for line in told if line.startswith("80 % of the daily budget is spent (")]
    spent_all = [line for line in told if line.startswith("The daily budget is spent (")]
    assert len(warned) == 1 and len(spent_all) == 1  # each once
    ends = f" of ${float(limit):.6f}".rstrip("0") + "). Raise it with /budget daily AMOUNT."
    assert warned[0].endswith(ends)
    assert ": proactive turns stop and chats are answered with one line until it resets " \
        "at midnight (00:00 Europe/Berlin, in " in spent_all[0]  # fmt: skip
    order = [told.index(line) for line in ("re: hello 1", warned[0], "re: hello 3")]
    assert order == sorted(order)  # told by the turn of hello 2
    order = [told.index(line) for line in ("re: hello 2", spent_all[0], refusal)]
    assert order == sorted(order)  # told by the turn of hello 3
    logged = [r.getMessage() for r in caplog.records if r.name == "agent.runtime.owner.budget"]
    assert f"budget: {warned[0]}" in logged and f"budget: {spent_all[0]}" in logged


def is_notice(line: str) -> bool:
    return line.startswith(("80 % of the ", "The daily budget is spent (", "The daily budget for"))


def usd(db: Path, kind: str | None = None) -> str:
    """What /budget shows as spent today, of every kind or one."""
    from agent.runtime.owner.budget import usd as shown

    where = "" if kind is None else f" WHERE started_by = '{kind}'"
    [(spent,)] = rows(db, f"SELECT TOTAL(cost_usd) FROM usage{where}")
    return shown(spent)


async def test_agent_budget_holds_until_config_changes_that_limit(llm_env: dict[str, str]) -> None:
    config = {"PINCLAW_BUDGET__DAILY_USD": "1"}
    changed = await agent("budget", "set", "daily", "5", **config)
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.strip() == (
        "The daily limit is now $5.00 (config.toml says $1.00; yours holds until that changes)."
    )
    shown = await agent("budget", "show", **config)
    assert "  daily: $5.00, spent $0.00 (set by hand)" in shown.stdout.splitlines()
    newer = await agent("budget", "show", PINCLAW_BUDGET__DAILY_USD="2")  # config.toml moved on
    assert "  daily: $2.00, spent $0.00" in newer.stdout.splitlines()
    bad = await agent("budget", "set", "daily", "lots")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: 'lots' is not an amount: write e.g. 5 or 0.50"
    )
    again = await agent("budget", "show", **config)  # the override is still there for $1
    assert "  daily: $5.00, spent $0.00 (set by hand)" in again.stdout.splitlines()
    reset = await agent("budget", "reset", **config)
    assert reset.stdout.strip() == "Back to the limits of config.toml (1 of yours dropped)."
    assert "  daily: $1.00, spent $0.00" in (await agent("budget", "show", **config)).stdout


async def test_a_turn_of_a_model_without_a_price_stops_at_max_tokens_per_turn(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(tool_calls(("list_schedules", {})), text("never asked"))
    answered = await agent(
        "run", "-m", "what is planned?", "--no-daemon", PINCLAW_BUDGET__MAX_TOKENS_PER_TURN="50"
    )
    assert answered.returncode == 0, answered.stderr
    [(tokens,)] = rows(home / "state.db", "SELECT input_tokens + output_tokens FROM usage")
    assert answered.stdout.strip() == (
        f"Stopped: this answer used {tokens:,} tokens of a model without a price, past "
        "budget.max_tokens_per_turn (50). The owner can raise it with /budget tokens AMOUNT."
    )
    assert len(fake_llm.requests) == 1  # the second call was never made
    assert "[turn ended: budget; " in answered.stderr
