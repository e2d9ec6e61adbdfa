"""Hardware from chat: a Telegram message moves a pin of the emulated Arduino."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

PINS = {"fan": {"pin": 9, "mode": "pwm", "description": "ceiling fan"},
        "light": {"pin": "A0", "mode": "analog", "description": "light sensor"}}


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[FirmataBoard]:
    with FirmataBoard(tmp_path / "ttyACM0") as board:
        yield board


@pytest.fixture
def hardware_env(telegram_env: dict[str, str], emulator: FirmataBoard,
                 monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(emulator.path),
        "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "3",
        "PINCLAW_HARDWARE__PINS": json.dumps(PINS),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**telegram_env, **values}


async def test_turn_on_the_fan_at_half_speed(
    hardware_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, daemon: Callable[[], Daemon],
) -> None:
    fake_llm.script(tool_calls(("pwm_write", {"pin": "fan", "duty": 0.5})),
                    text("The fan is running at half speed."))
    async with daemon():
        fake_telegram.inject_message(42, 42, "turn on the fan at half speed")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=10)
    assert (emulator.mode(9), emulator.state(9)) == ("pwm", 128)  # 0.5 of 255
    assert reply.plain == "The fan is running at half speed."
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "## Hardware Access" in system and "ceiling fan" in system
    tool_result = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_result[0]["content"] == "fan (pin 9): PWM duty 50%."


def test_doctor_reports_the_board(hardware_env: dict[str, str], emulator: FirmataBoard) -> None:
    result = subprocess.run([sys.executable, "-m", "agent", "doctor"], capture_output=True,
                            text=True, env={**os.environ, **hardware_env},
                            cwd=Path(__file__).resolve().parent.parent, timeout=60)
    board_line = next(line for line in result.stdout.splitlines() if "board:" in line)
    assert board_line.startswith("ok  board: StandardFirmata")
    assert "20 pins" in board_line


def test_doctor_reports_a_missing_board(telegram_env: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **telegram_env, "PINCLAW_HARDWARE__ENABLED": "true",
           "PINCLAW_HARDWARE__PORT": str(tmp_path / "nothing-here"),
           "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "1"}
    result = subprocess.run([sys.executable, "-m", "agent", "doctor"], capture_output=True,
                            text=True, env=env, cwd=Path(__file__).resolve().parent.parent,
                            timeout=60)
    assert result.returncode == 1
    assert "FAIL board:" in result.stdout
