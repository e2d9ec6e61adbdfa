"""Pin watches end to end: the daemon with the real Telegram adapter against the fake Bot API,
the fake LLM, and the Firmata emulator (pyfirmata2 on a pty). The model calls watch_pin; the
tests move the emulator's A0 and assert what reaches the chat, what the model was shown and
what state.db holds — through a restart, a cancel from the command line and a board that
disappears.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from daemon_process import rows
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram, SentMessage
from hardware_calls import board_env

OWNER = 42
TASK = "Tell Alice the light is on."
WATCH = {"pin": "A0", "above": 700, "task": TASK}
PINS = {"light": {"pin": "A0", "mode": "analog", "description": "light sensor"}}
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def watch_env(
    telegram_env: dict[str, str], emulator: FirmataBoard, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    values = board_env(monkeypatch, emulator.path, PINS, sampling_interval_ms="20",
                       PINCLAW_WATCHES__MIN_INTERVAL_S="0.2")  # fmt: skip
    return {**telegram_env, **values}


def to_owner(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.sent if m.method == "sendMessage" and m.chat_id == OWNER]


def user_text(request: dict[str, Any]) -> str:
    return str(next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user"))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def hold(emulator: FirmataBoard, *readings: int, each_s: float = 0.15) -> None:
    """Let A0 read each value for a while (several reports at 20 ms)."""
    for raw in readings:
        emulator.set_analog("A0", raw)
        await asyncio.sleep(each_s)


async def test_a_watch_on_a0_above_700_fires_once_per_crossing_and_a_lost_board_pauses_it(
    watch_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, home: Path, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.script(
        tool_calls(("watch_pin", WATCH)),
        text("I'll tell you when the light goes above 700."),
        text("Alice, the light is on (800)."),
        text("Alice, the light is on again."),
        text("The board is back and the light is on."),
    )
    emulator.set_analog("A0", 650)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "tell me when A0 goes above 700")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        assert tool_results(fake_llm.requests[1])[0].startswith("Watching: #1 ")
        await hold(emulator, 650)
        assert len(fake_llm.requests) == 2  # 650: nothing fired
        emulator.set_analog("A0", 800)
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2, timeout=5)
        await hold(emulator, 810, 800, 690, 800)  # stays up; 690 is within the hysteresis
        assert len(fake_llm.requests) == 3
        await hold(emulator, 600, 800)  # fell below 680: armed again, and up it goes
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=3, timeout=5)
        emulator.close()  # unplugged
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=4, timeout=5)
        await asyncio.sleep(1.2)  # the Board tries to reconnect each second meanwhile
        assert len(to_owner(fake_telegram)) == 4  # told once
        emulator.reopen()  # plugged in again; A0 still reads 800: no news, but it is back
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=5, timeout=5)
        await hold(emulator, 800, 600)
        assert len(fake_llm.requests) == 4
        emulator.set_analog("A0", 800)
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=6, timeout=5)
    said = [m.plain or "" for m in to_owner(fake_telegram)]
    assert said[:3] == [
        "I'll tell you when the light goes above 700.",
        "Alice, the light is on (800).",
        "Alice, the light is on again.",
    ]
    assert said[3].startswith("I cannot reach the board (")
    assert said[3].endswith(
        "so pin watch #1 (light (A0) above 700) is paused; it resumes by itself when the "
        "board is back."
    )
    assert said[4:] == [
        "The board is back: pin watch #1 (light (A0) above 700) is listening again.",
        "The board is back and the light is on.",
    ]
    assert len(fake_llm.requests) == 5  # nothing else ran
    assert tool_results(fake_llm.requests[1]) == [
        f"Watching: #1 watch light (A0) above 700 (again once below 680), at most every "
        f"0.2 s: {TASK}"
    ]
    envelope = user_text(fake_llm.requests[2])
    assert envelope.splitlines()[0].endswith("| telegram | pin]")
    assert "Pin watch #1 (set " in envelope and " by User): light (A0) read 800/1023 (3.91 V), " \
        "above 700 at " in envelope  # fmt: skip
    assert f"\nTask: {TASK}\n" in envelope and "Nobody is waiting on a message" in envelope
    db = home / "state.db"
    assert rows(db, "SELECT kind, status, runs, next_due, chat_key FROM schedules") == [
        ("pin", "active", 3, None, f"telegram:{OWNER}:")
    ]
    fired = rows(db, "SELECT message_id, trigger FROM inbox WHERE trigger != '' ORDER BY id")
    assert [m.startswith("pin:1:") for m, _ in fired] == [True] * 3
    assert [json.loads(t)["reading"] for _, t in fired] == [
        "light (A0) read 800/1023 (3.91 V), above 700"
    ] * 3


async def schedules_cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    """`agent schedules ...` in another process, as the owner would run it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "schedules", *args, cwd=REPO, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, out.decode()


async def test_a_watch_survives_restarts_with_and_without_the_board_and_a_cli_cancel_ends_it(
    watch_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, home: Path, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.script(tool_calls(("watch_pin", WATCH)), text("Watching A0."))
    emulator.set_analog("A0", 100)
    db = home / "state.db"
    async with daemon() as first:
        fake_telegram.inject_message(OWNER, OWNER, "tell me when A0 goes above 700")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        os.kill(os.getpid(), signal.SIGTERM)  # the daemon's own handler stops it
        assert await asyncio.wait_for(asyncio.shield(first.task), 10) == 0  # type: ignore[arg-type]
    assert rows(db, "SELECT kind, status, runs FROM schedules") == [("pin", "active", 0)]
    code, listed = await schedules_cli(watch_env, "list")
    assert code == 0 and listed.startswith(
        f"#1 watch light (A0) above 700 (again once below 680), at most every 0.2 s: {TASK}  "
        f"[telegram:{OWNER}:, set by User]"
    )
    emulator.close()  # unplugged while the daemon was down
    async with daemon():
        [_, paused] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2)
    assert (paused.plain or "").startswith("I cannot reach the board (")
    assert rows(db, "SELECT status, runs FROM schedules") == [("active", 0)]
    fake_llm.script(text("The light is on."))
    emulator.reopen()
    emulator.set_analog("A0", 800)  # while nobody listened
    async with daemon():
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=3, timeout=10)
        code, said = await schedules_cli(watch_env, "cancel", "1")
        assert code == 0 and said.startswith("Cancelled #1 watch light (A0) above 700")
        await hold(emulator, 600, 800)  # armed again, but the watch is cancelled
    said = [m.plain for m in to_owner(fake_telegram)]
    assert said == ["Watching A0.", paused.plain, "The light is on."]
    assert len(fake_llm.requests) == 3
    assert rows(db, "SELECT status, runs, note FROM schedules") == [
        ("cancelled", 1, "cancelled with agent schedules cancel")
    ]
