"""The hardware tools against the real StandardFirmata 2.5.9, running on a simulated
ATmega328P (the simavr rig in tests/simavr): what the MCU's own registers show, not what
Firmata says. Each Board opens the port, which resets the MCU (about 2.2 s, as an Uno's DTR
line does), so the tests are few and each covers a whole flow."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram
from simavr.sim_board import SimBoard

from tools.base import ToolCallContext
from tools.board.board import Board
from tools.board.board_tools import hardware_tools
from tools.config import HardwareSettings

pytestmark = pytest.mark.realboard
REPO = Path(__file__).resolve().parents[1]
PINS = {
    "led": {"pin": 13, "mode": "output"},
    "fan": {"pin": 9, "mode": "pwm", "description": "ceiling fan"},
    "door": {"pin": 10, "mode": "servo"},
    "button": {"pin": 7, "mode": "input_pullup"},
    "sensor": {"pin": 2, "mode": "input"},
    "light": {"pin": "A0", "mode": "analog"},
}


class Tools:
    """The eight tools of one Board on the rig, called as the tool-call loop calls them."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.tools = {tool.name: tool for tool in hardware_tools(board)}

    async def __call__(self, name: str, **args: Any) -> str:
        result = await self.tools[name].run(args, ToolCallContext(workspace=REPO))
        return ("" if result.ok else "refused: ") + result.output


def settings(sim: SimBoard, **overrides: Any) -> HardwareSettings:
    values = {"enabled": True, "port": sim.port, "connect_timeout_s": 5.0,
              "sampling_interval_ms": 20, "allowed_pins": [0, 3, 11, 12], "pins": PINS}  # fmt: skip
    return HardwareSettings.model_validate(values | overrides)


@pytest.fixture
async def tools(simboard: SimBoard) -> AsyncIterator[Tools]:
    board = Board(settings(simboard))
    yield Tools(board)
    await board.close()


async def until(check: Callable[[], object], within: float) -> bool:
    """Poll the MCU while the event loop runs on (pinclaw may be restoring meanwhile)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_each_tool_on_the_real_firmware(tools: Tools, simboard: SimBoard) -> None:
    sim = simboard
    assert await tools("gpio_write", pin="led", value=1) == "led (pin 13) is now high."
    assert sim.output(13) == 1  # the write is confirmed only once the MCU has it
    assert await tools("gpio_write", pin="led", value=0) == "led (pin 13) is now low."
    assert sim.output(13) == 0
    assert await tools("servo_write", pin="door", angle=90) == "door (pin 10): servo at 90°."
    # 544 + 90/180 of (2400 - 544) microseconds, every 20 ms
    assert await until(lambda: abs(sim.pin(10).high_us - 1472) < 12, 1.0)
    # The Servo library now holds Timer1: PWM on 9 would not run, so it is refused.
    refused = await tools("pwm_write", pin="fan", duty=0.5)
    assert refused.startswith("refused: Pin 9 cannot do PWM now: its timer, Timer1, is held by")
    assert refused.endswith("Use a PWM pin on another timer: 3, 5, 6, 11.")
    assert sim.pwm(9) == -1 and sim.output(9) == 0
    assert await tools("pwm_write", pin=3, duty=0.25) == "pin 3: PWM duty 25%."
    assert sim.pwm(3) == 64
    sim.set_analog(0, 512)
    assert await tools("analog_read", pin="light") == "light (A0): 512/1023 (2.50 V)."
    sim.set_digital_input(2, 1)
    assert await tools("gpio_read", pin="sensor") == "sensor (pin 2): high, mode input."
    sim.set_digital_input(2, 0)
    assert await tools("gpio_read", pin="sensor") == "sensor (pin 2): low, mode input."
    assert await tools("gpio_read", pin="button") == "button (pin 7): high, mode input_pullup."
    sim.set_digital_input(7, 0)  # pressed
    assert await tools("gpio_read", pin="button") == "button (pin 7): low, mode input_pullup."
    started = time.monotonic()
    blinked = await tools("gpio_pattern", pin="led", pattern="blink", period_ms=100, repeat=3)
    assert (
        blinked == "led (pin 13): blink every 100 ms ran 3 times (about 0.3 s); the pin is low now."
    )
    edges = [e for e in sim.events_of("pin", 13) if e["mono"] >= started]
    assert [e["port"] for e in edges] == [1, 0, 1, 0, 1, 0]
    before = len(sim.events)
    assert (await tools("gpio_write", pin=5, value=1)).startswith(
        "refused: Pin 5 is not allowed. Allowed pins: pin 0, pin 3, pin 11, pin 12, led (pin 13),"
    )
    assert (await tools("gpio_write", pin=0, value=1)) == (
        "refused: Pin 0 is not usable on this board; its pins are 2–19."
    )
    assert (await tools("servo_write", pin="door", angle=181)).endswith("give 0 to 180 degrees.")
    changed = [e for e in sim.events[before:] if e.get("event") == "pin" and e["pin"] != 10]
    assert changed == []  # (pin 10 pulses for its servo all along)
    info = await tools("hardware_board_info")
    assert info.startswith(f"Board on {sim.port}: StandardFirmata.ino 2.5 (Firmata protocol 2.5)")
    assert (
        "Timers of an Arduino Uno/Nano (ATmega328P): Timer0: 5, 6; Timer1: 9, 10 (servos)" in info
    )
    assert '- pin 10 "door" [allowed]: mode servo, 90°;' in info
    assert '- pin 9 "fan" [allowed]: mode output, low;' in info
    capabilities = await tools("hardware_capabilities")
    assert (
        '- pin 3 [allowed], pin 5, pin 6, pin 9 "fan" [allowed], pin 10 "door" [allowed], '
        "pin 11 [allowed]: input, input_pullup, output, pwm (8-bit), servo"
    ) in capabilities


async def test_a_reset_is_undone_and_timers_guard_a_running_fan(
    tools: Tools, simboard: SimBoard
) -> None:
    sim = simboard
    assert await tools("pwm_write", pin="fan", duty=0.5) == "fan (pin 9): PWM duty 50%."
    assert await tools("gpio_write", pin="led", value=1) == "led (pin 13) is now high."
    assert sim.pwm(9) == 128
    refused = await tools("servo_write", pin="door", angle=45)
    assert refused.startswith("refused: Not done: a servo on pin 10 makes the Servo library take")
    assert sim.pwm(9) == 128 and sim.pin(10).dir == "out" and sim.output(10) == 0
    sim.reset()  # the reset button; the firmware announces itself again about 2.2 s later
    assert await until(lambda: sim.pwm(9) == -1, 1.0)
    assert await until(lambda: sim.pwm(9) == 128 and sim.output(13) == 1, 5.0)
    said = await tools("gpio_read", pin="fan")
    assert said == (
        "fan (pin 9): duty 50%, mode pwm.\nNote: The board reset; pinclaw restored pin 9 PWM "
        "50%, pin 13 high."
    )


async def test_a_finite_pattern_ends_before_the_board_is_closed(simboard: SimBoard) -> None:
    sim = simboard
    board = Board(settings(sim), pattern_grace_s=2.0)  # over 1 s runs in the background
    tools = Tools(board)
    await board.connect()
    started = time.monotonic()
    said = await tools("gpio_pattern", pin="led", pattern="pulse", period_ms=300, repeat=4)
    assert "4 times (about 1.2 s), started in the background" in said
    await board.close()  # what `agent run -m` does once its turn is over
    rises = [e for e in sim.events_of("pin", 13) if e["mono"] >= started and e["port"] == 1]
    assert len(rises) == 4 and sim.output(13) == 0


async def test_turn_on_the_fan_at_half_speed_from_telegram(
    simboard: SimBoard, telegram_env: dict[str, str], fake_llm: FakeLLM,
    fake_telegram: FakeTelegram, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_HARDWARE__ENABLED", "true")
    monkeypatch.setenv("PINCLAW_HARDWARE__PORT", simboard.port)
    monkeypatch.setenv("PINCLAW_HARDWARE__PINS", json.dumps(PINS))
    fake_llm.script(tool_calls(("pwm_write", {"pin": "fan", "duty": 0.5})),
                    text("The fan is running at half speed."))  # fmt: skip
    async with daemon():
        fake_telegram.inject_message(42, 42, "turn on the fan at half speed")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=15)
        assert simboard.pwm(9) == 128  # OC1A compare value: half of 255, on the MCU
    assert reply.plain == "The fan is running at half speed."
    tool_result = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_result[0]["content"] == "fan (pin 9): PWM duty 50%."


def test_doctor_names_the_firmware_pins_and_timers(
    simboard: SimBoard, llm_env: dict[str, str]
) -> None:
    env = {**os.environ, **llm_env, "PINCLAW_HARDWARE__ENABLED": "true",
           "PINCLAW_HARDWARE__PORT": simboard.port}  # fmt: skip
    result = subprocess.run([sys.executable, "-m", "agent", "doctor"], capture_output=True,
                            text=True, env=env, cwd=REPO, timeout=60)  # fmt: skip
    lines = result.stdout.splitlines()
    assert (
        f"ok  board: StandardFirmata.ino 2.5 on {simboard.port} (Firmata protocol 2.5), 20 pins: "
        "digital 2–19, PWM 3, 5, 6, 9–11, analog A0, A1, A2, A3, A4, A5"
    ) in lines, result.stdout
    assert (
        "note board: Arduino Uno/Nano (ATmega328P), PWM timers Timer0: 5, 6; "
        "Timer1: 9, 10 (servos); Timer2: 3, 11"
    ) in lines


async def test_one_shots_through_the_daemon_keep_the_board_as_the_last_one_left_it(
    simboard: SimBoard, llm_env: dict[str, str], fake_llm: FakeLLM,
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The daemon holds the port: a second `agent run -m` neither reopens nor resets the
    board, so the LED the first one switched on is still on."""
    monkeypatch.setenv("PINCLAW_HARDWARE__ENABLED", "true")
    monkeypatch.setenv("PINCLAW_HARDWARE__PORT", simboard.port)
    monkeypatch.setenv("PINCLAW_HARDWARE__PINS", json.dumps(PINS))
    fake_llm.script(tool_calls(("gpio_write", {"pin": "led", "value": 1})), text("LED on."),
                    tool_calls(("gpio_read", {"pin": "led"})), text("It is on."))  # fmt: skip

    async def one_shot(message: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent", "run", "-m", message, cwd=REPO, env=dict(os.environ),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()
        return out.decode().strip()

    async with daemon():  # serving: the local socket is up
        assert await one_shot("switch the LED on") == "LED on."
        after_first = simboard.stats()
        assert await one_shot("is the LED still on?") == "It is on."
        after_second = simboard.stats()
        assert simboard.output(13) == 1
    read = [m for m in fake_llm.requests[3]["messages"] if m["role"] == "tool"]
    assert read[0]["content"].startswith("led (pin 13): high")
    assert (after_second["opens"], after_second["resets"]) == (
        after_first["opens"], after_first["resets"])  # fmt: skip
