"""max_on_s across a crash: `agent run` as a real process (Telegram on the fake Bot API, the
fake LLM, the emulated board) switches a pump on for a chat, is killed with SIGKILL while it
runs, and started again: the restarted daemon switches it off at the original deadline (kept
in state.db), tells the chat that switched it on, and `agent hardware log` shows both."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, agent, env_of, rows, wait_until
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

OWNER = 42
MAX_ON_S = 12.0
PINS = {"pump": {"pin": 8, "mode": "output", "max_on_s": MAX_ON_S, "description": "water pump"}}


@pytest.fixture
def started(telegram_env: dict[str, str], tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    daemons: list[DaemonProcess] = []
    yield daemons
    for daemon in daemons:
        daemon.ensure_stopped()


def hardware_env(emulator: FirmataBoard) -> dict[str, str]:
    return {
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(emulator.path),
        "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "3",
        "PINCLAW_HARDWARE__PINS": json.dumps(PINS),
        "PINCLAW_LLM__NUM_RETRIES": "0",
    }


def start(daemons: list[DaemonProcess], tmp_path: Path, emulator: FirmataBoard) -> DaemonProcess:
    env = env_of(**hardware_env(emulator))
    daemon = DaemonProcess(env, tmp_path / f"daemon{len(daemons)}.log").start()
    daemons.append(daemon)
    return daemon.wait_ready()


def to_owner(fake: FakeTelegram) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == OWNER]


def test_a_pump_on_when_the_daemon_was_killed_goes_off_at_its_original_deadline(
    started: list[DaemonProcess], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, home: Path, tmp_path: Path,
) -> None:  # fmt: skip
    fake_llm.script(tool_calls(("gpio_write", {"pin": "pump", "value": 1})), text("Pump on."))
    first = start(started, tmp_path, emulator)
    fake_telegram.inject_message(OWNER, OWNER, "run the pump")
    wait_until(lambda: to_owner(fake_telegram) == ["Pump on."], 30, "the reply", first)
    assert emulator.level(8) == 1
    [(due, chat)] = rows(home / "state.db", "SELECT due, chat_key FROM output_deadlines")
    assert chat == f"telegram:{OWNER}:" and due - time.time() > MAX_ON_S - 4
    first.kill9()  # the host process dies with the pump running
    assert emulator.level(8) == 1  # nobody switched it off
    second = start(started, tmp_path, emulator)
    assert time.time() < due - 1, "the restart took too long for this test to mean anything"
    wait_until(lambda: emulator.level(8) == 0, MAX_ON_S + 5, "the pump switched off", second)
    off_at = time.time() - (time.monotonic() - emulator.changed_at(8))
    assert due - 0.2 <= off_at <= due + 1.5  # the original deadline, not a new one
    wait_until(lambda: len(to_owner(fake_telegram)) == 2, 10, "the chat told", second)
    assert to_owner(fake_telegram)[1] == (
        "pinclaw switched pump (pin 8) off: it had been on for 12 s, its max_on_s. It is now low."
    )
    assert rows(home / "state.db", "SELECT * FROM output_deadlines") == []
    assert len(fake_llm.requests) == 2  # the notice is pinclaw's own: no turn ran for it
    second.terminate()
    log = agent("hardware", "log", "--since", "1h").stdout.splitlines()
    assert len(log) == 2, log
    assert log[0].endswith(
        f"pump (pin 8): high, confirmed high; gpio_write by User in telegram:{OWNER}:"
    )
    assert log[1].endswith(
        f"pump (pin 8): off, confirmed low; max_on_s by pinclaw in telegram:{OWNER}:"
    )
    assert agent("hardware", "log", "--board", "garage").stderr.strip() == (
        "No change of an output on garage since 24h."
    )


def test_a_pump_a_one_shot_switched_on_goes_off_after_a_restart_and_the_owner_is_told_once(
    started: list[DaemonProcess], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The chat that switched it on was a one-shot (`agent run -m` through the daemon):
    nobody reads that afterwards, so the owner's private chat hears it, once."""
    owner = {"me": {"telegram": str(OWNER), "owner": True}}
    monkeypatch.setenv("PINCLAW_PEOPLE", json.dumps(owner))
    for name, value in hardware_env(emulator).items():  # the one-shot's settings: the daemon's
        monkeypatch.setenv(name, value)
    fake_llm.script(tool_calls(("gpio_write", {"pin": "pump", "value": 1})), text("Pump on."))
    first = start(started, tmp_path, emulator)
    done = agent("run", "-m", "run the pump")
    assert (done.returncode, done.stdout.strip()) == (0, "Pump on."), done.stderr
    assert "one-shot from the local socket" in first.log  # the daemon ran it
    assert emulator.level(8) == 1
    [(chat,)] = rows(home / "state.db", "SELECT chat_key FROM output_deadlines")
    assert chat.startswith("cli:oneshot:")
    first.kill9()
    second = start(started, tmp_path, emulator)
    wait_until(lambda: emulator.level(8) == 0, MAX_ON_S + 5, "the pump switched off", second)
    notice = (
        "pinclaw switched pump (pin 8) off: it had been on for 12 s, its max_on_s. It is now low."
    )
    wait_until(lambda: to_owner(fake_telegram) == [notice], 10, "the owner told", second)
    time.sleep(1.5)
    assert to_owner(fake_telegram) == [notice]  # once
    assert "not told" not in second.log
    assert rows(home / "state.db", "SELECT status FROM outbox") == [("sent",)]
