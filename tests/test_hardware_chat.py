"""Hardware from chat and the command line: a Telegram message moves a pin of the emulated
Arduino, a one-shot waits for its pattern, doctor describes the board or says why not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon, eventually
from daemon_process import agent
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram
from hardware_calls import board_env

PINS = {
    "fan": {"pin": 9, "mode": "pwm", "description": "ceiling fan"},
    "light": {"pin": "A0", "mode": "analog", "description": "light sensor"},
}


@pytest.fixture
def hardware_env(
    telegram_env: dict[str, str], emulator: FirmataBoard, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    return {**telegram_env, **board_env(monkeypatch, emulator.path, PINS)}


async def test_turn_on_the_fan_at_half_speed(
    hardware_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    emulator: FirmataBoard,
    daemon: Callable[[], Daemon],
) -> None:
    fake_llm.script(
        tool_calls(("pwm_write", {"pin": "fan", "duty": 0.5})),
        text("The fan is running at half speed."),
    )
    async with daemon():
        fake_telegram.inject_message(42, 42, "turn on the fan at half speed")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=10)
    assert (emulator.mode(9), emulator.state(9)) == ("pwm", 128)  # 0.5 of 255
    assert reply.plain == "The fan is running at half speed."
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "## Hardware Access" in system and "ceiling fan" in system
    tool_result = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_result[0]["content"] == "fan (pin 9): PWM duty 50%."


def test_a_one_shot_waits_for_its_pattern_to_end(
    hardware_env: dict[str, str], fake_llm: FakeLLM, emulator: FirmataBoard
) -> None:
    blink = {"pin": 13, "pattern": "blink", "period_ms": 100, "repeat": 8}
    fake_llm.script(tool_calls(("gpio_pattern", blink)), text("Blinking."))
    env = {**hardware_env, "PINCLAW_AGENT__TOOL_TIMEOUT_S": "1.5",  # longer than 0.75 s: background
           "PINCLAW_HARDWARE__ALLOWED_PINS": "[13]"}  # fmt: skip
    result = agent("run", "-m", "blink the LED 8 times", env=env)
    assert result.returncode == 0, result.stderr
    # The process did not exit mid-pattern: all 8 blinks ran and the pin ended low.
    assert (emulator.transitions(13), emulator.level(13)) == (16, 0)
    assert "waiting for the pattern on pin 13 to end (at most 1.5 s)" in result.stderr
    said = next(m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert said.startswith("pin 13: blink every 100 ms, 8 times (about 0.8 s), started in the")


def test_doctor_reports_the_board(hardware_env: dict[str, str], emulator: FirmataBoard) -> None:
    lines = agent("doctor", env=hardware_env).stdout.splitlines()
    assert (
        f"ok  board: StandardFirmata.ino 2.5 on {emulator.path} (Firmata protocol 2.5), 20 pins: "
        "digital 2–19, PWM 3, 5, 6, 9–11, analog A0, A1, A2, A3, A4, A5"
    ) in lines
    assert (
        "note board: Arduino Uno/Nano (ATmega328P), PWM timers Timer0: 5, 6; "
        "Timer1: 9, 10 (servos); Timer2: 3, 11"
    ) in lines


def test_doctor_tells_a_board_without_firmata_what_to_do(
    telegram_env: dict[str, str], tmp_path: Path
) -> None:
    with FirmataBoard(tmp_path / "ttyACM0", answers=False) as silent:
        env = {**telegram_env, "PINCLAW_HARDWARE__ENABLED": "true",
               "PINCLAW_HARDWARE__PORT": str(silent.path),
               "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "0.5"}  # fmt: skip
        result = agent("doctor", env=env)
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if "board:" in line]
    assert line.startswith(f"FAIL board: No Firmata board answered on {silent.path} within 0.5 s.")
    assert "Is StandardFirmata uploaded, and does [hardware] baud (57600) match it" in line


def test_doctor_reports_a_missing_board(telegram_env: dict[str, str], tmp_path: Path) -> None:
    env = {
        **telegram_env,
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(tmp_path / "nothing-here"),
        "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "1",
    }
    result = agent("doctor", env=env)
    assert result.returncode == 1
    assert "FAIL board:" in result.stdout


async def test_a_stopping_daemon_cuts_a_long_pattern_within_its_grace(
    hardware_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A 30 s pattern is not waited for the tool timeout (60 s) at SIGTERM: the daemon
    gives it `shutdown_grace_s` (2 s here), then leaves the pin low."""
    import time

    monkeypatch.setenv("PINCLAW_HARDWARE__ALLOWED_PINS", "[13]")
    fake_llm.script(
        tool_calls(("gpio_pattern", {"pin": 13, "pattern": "blink", "repeat": 30})),
        text("Blinking for half a minute."),
    )
    running = daemon()
    async with running:
        fake_telegram.inject_message(42, 42, "blink the LED for 30 s")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=10)
        assert emulator.transitions(13) >= 1
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 6
    # The low was written before the daemon ended; the board reads its serial line on its own.
    await eventually(lambda: emulator.level(13) == 0, within=2, what="pin 13 low")
