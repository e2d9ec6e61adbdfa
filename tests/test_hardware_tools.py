"""Each hardware tool against an emulated Uno running StandardFirmata: what lands on the pins,
and the refusals that leave the board untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.firmata_board import FirmataBoard
from hardware_calls import eventually

from tools.base import Tool, ToolCallContext, ToolResult
from tools.board.board import Board
from tools.board.board_tools import hardware_tools
from tools.config import HardwareSettings

NAMED_PINS = {
    "fan": {"pin": 9, "mode": "pwm", "description": "ceiling fan"},
    "light": {"pin": "A0", "mode": "analog"},
    "led": {"pin": 13, "mode": "output"},
    "door": {"pin": 10, "mode": "servo"},
    "button": {"pin": 7, "mode": "input_pullup"},
}
ALLOWED = [0, 2, 3, 12, 40, "A1", "A7"]


class Hardware:
    """The tools of one board, called the way the tool-call loop calls them."""

    def __init__(self, tools: list[Tool], tmp_path: Path) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.context = ToolCallContext(workspace=tmp_path)

    async def __call__(self, name: str, **args: Any) -> ToolResult:
        return await self.tools[name].run(args, self.context)

    async def ok(self, name: str, **args: Any) -> str:
        result = await self(name, **args)
        assert result.ok, result.output
        return result.output


def make_settings(port: Path, **overrides: Any) -> HardwareSettings:
    values = {"enabled": True, "port": str(port), "connect_timeout_s": 1.0,
              "sampling_interval_ms": 10, "allowed_pins": ALLOWED, "pins": NAMED_PINS}  # fmt: skip
    return HardwareSettings.model_validate(values | overrides)


@pytest.fixture
async def hw(emulator: FirmataBoard, tmp_path: Path) -> AsyncIterator[Hardware]:
    settings = make_settings(emulator.path)
    board = Board(settings)
    yield Hardware(hardware_tools(board), tmp_path)
    await board.close()


def test_eight_tools_whose_descriptions_map_names_to_pins(emulator: FirmataBoard) -> None:
    settings = make_settings(emulator.path)
    tools = {tool.name: tool for tool in hardware_tools(Board(settings))}
    assert set(tools) == {
        "gpio_read", "gpio_write", "pwm_write", "analog_read", "servo_write", "gpio_pattern",
        "hardware_board_info", "hardware_capabilities",
    }  # fmt: skip
    assert '"fan" = pin 9 (pwm: ceiling fan)' in tools["pwm_write"].description
    assert '"light" = A0 (analog)' in tools["analog_read"].description
    assert '"fan"' not in tools["hardware_capabilities"].description
    assert tools["gpio_pattern"].parameters["properties"]["pattern"]["enum"] == [
        "blink", "pulse", "heartbeat"
    ]  # fmt: skip


@pytest.mark.parametrize(("on", "off"), [(1, 0), (True, False), ("high", "low"), ("1", "off")])
async def test_gpio_write_drives_the_pin(
    hw: Hardware, emulator: FirmataBoard, on: Any, off: Any
) -> None:
    assert await hw.ok("gpio_write", pin="led", value=on) == "led (pin 13) is now high."
    assert (emulator.mode(13), emulator.level(13)) == ("output", 1)
    assert await hw.ok("gpio_write", pin=13, value=off) == "led (pin 13) is now low."
    assert emulator.level(13) == 0


async def test_gpio_write_keeps_the_other_pins_of_the_port(
    hw: Hardware, emulator: FirmataBoard
) -> None:
    await hw.ok("gpio_write", pin=12, value=1)
    await hw.ok("gpio_write", pin="led", value=1)
    await hw.ok("gpio_write", pin=12, value=0)
    assert (emulator.level(12), emulator.level(13)) == (0, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pin": 11, "value": 1}, "Pin 11 is not allowed. Allowed pins: pin 0, pin 2, pin 3,"),
        ({"pin": "fna", "value": 1}, "configured name (fan, light, led, door, button)"),
        ({"pin": 13, "value": "medium"}, "not one of 1/0, true/false or high/low"),
        ({"pin": 13, "value": 2}, "not one of 1/0"),
        ({"pin": "fan", "value": 1}, "fan (pin 9) is wired as pwm: use pwm_write."),
        ({"pin": 0, "value": 1}, "Pin 0 is not usable on this board; its pins are 2–19."),
        ({"pin": 40, "value": 1}, "Pin 40 is not usable on this board"),
        ({"pin": "A7", "value": 1}, "A7 is not an analog input of this board; it has A0, A1,"),
        ({"pin": 13}, "value: Field required"),
    ],
)
async def test_gpio_write_refusals_touch_nothing(
    hw: Hardware, emulator: FirmataBoard, args: dict[str, Any], message: str
) -> None:
    before = emulator.events()
    result = await hw("gpio_write", **args)
    assert not result.ok
    assert message in result.output
    assert emulator.events() == before


async def test_gpio_read_reads_an_input_as_the_world_sets_it(
    hw: Hardware, emulator: FirmataBoard
) -> None:
    emulator.set_input(2, 1)
    assert await hw.ok("gpio_read", pin=2) == "pin 2: high, mode input."
    assert emulator.mode(2) == "input"
    emulator.set_input(2, 0)
    assert await hw.ok("gpio_read", pin="2") == "pin 2: low, mode input."


async def test_gpio_read_uses_the_pull_up_of_a_button(hw: Hardware, emulator: FirmataBoard) -> None:
    assert await hw.ok("gpio_read", pin="button") == "button (pin 7): high, mode input_pullup."
    emulator.set_input(7, 0)  # pressed: pulls the pin to ground
    assert await hw.ok("gpio_read", pin="button") == "button (pin 7): low, mode input_pullup."


async def test_gpio_read_of_an_output_leaves_it_driving(
    hw: Hardware, emulator: FirmataBoard
) -> None:
    await hw.ok("gpio_write", pin=3, value=1)
    assert await hw.ok("gpio_read", pin=3) == "pin 3: high, mode output."
    assert await hw.ok("gpio_read", pin="led") == "led (pin 13): low, mode output."
    await hw.ok("pwm_write", pin="fan", duty=0.5)
    assert await hw.ok("gpio_read", pin="fan") == "fan (pin 9): duty 50%, mode pwm."
    assert (emulator.mode(3), emulator.level(3), emulator.mode(13)) == ("output", 1, "output")
    refused = await hw("gpio_read", pin="light")
    assert refused.output == "light (A0) is wired as analog: use analog_read."


async def test_pwm_write_sets_the_duty(hw: Hardware, emulator: FirmataBoard) -> None:
    assert await hw.ok("pwm_write", pin="fan", duty=0.5) == "fan (pin 9): PWM duty 50%."
    assert (emulator.mode(9), emulator.state(9)) == ("pwm", 128)
    await hw.ok("pwm_write", pin=3, duty=1)
    assert (emulator.mode(3), emulator.state(3)) == ("pwm", 255)
    await hw.ok("pwm_write", pin="fan", duty=0.0)
    assert emulator.state(9) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pin": "fan", "duty": 1.5}, "Duty 1.5 is out of range: give 0.0 (off) to 1.0 (full on)."),
        ({"pin": "fan", "duty": -0.1}, "out of range"),
        ({"pin": 2, "duty": 0.5}, "Pin 2 cannot do pwm; pins that can: 3, 5, 6, 9–11."),
        ({"pin": "led", "duty": 0.5}, "led (pin 13) is wired as output: use gpio_write or"),
        ({"pin": "fan", "duty": "fast"}, "duty: Input should be a valid number"),
    ],
)
async def test_pwm_write_refusals_touch_nothing(
    hw: Hardware, emulator: FirmataBoard, args: dict[str, Any], message: str
) -> None:
    before = emulator.events()
    result = await hw("pwm_write", **args)
    assert not result.ok and message in result.output
    assert emulator.events() == before


async def test_analog_read_gives_raw_and_volts(hw: Hardware, emulator: FirmataBoard) -> None:
    emulator.set_analog("A0", 512)
    assert await hw.ok("analog_read", pin="light") == "light (A0): 512/1023 (2.50 V)."
    emulator.set_analog("A0", 1023)  # the next read sees the change, not a stale report
    assert await hw.ok("analog_read", pin="A0") == "light (A0): 1023/1023 (5.00 V)."
    emulator.set_analog("A1", 0)
    assert await hw.ok("analog_read", pin="a1") == "A1: 0/1023 (0.00 V)."
    refused = await hw("analog_read", pin=3)
    assert "Pin 3 cannot do analog; pins that can: A0, A1, A2, A3, A4, A5." in refused.output


async def test_servo_write_turns_the_servo(hw: Hardware, emulator: FirmataBoard) -> None:
    assert await hw.ok("servo_write", pin="door", angle=90) == "door (pin 10): servo at 90°."
    assert (emulator.mode(10), emulator.state(10)) == ("servo", 90)
    await hw.ok("servo_write", pin="door", angle=180)
    assert emulator.state(10) == 180
    before = emulator.events()
    assert "give 0 to 180 degrees" in (await hw("servo_write", pin="door", angle=200)).output
    assert "Pin 0 is not usable" in (await hw("servo_write", pin=0, angle=10)).output
    assert emulator.events() == before


@pytest.mark.parametrize(("pattern", "per_cycle"), [("blink", 2), ("pulse", 2), ("heartbeat", 4)])
async def test_gpio_pattern_toggles_the_pin_as_often_as_asked(
    hw: Hardware, emulator: FirmataBoard, pattern: str, per_cycle: int
) -> None:
    text = await hw.ok("gpio_pattern", pin="led", pattern=pattern, period_ms=40, repeat=3)
    assert text == (
        f"led (pin 13): {pattern} every 40 ms ran 3 times (about 0.12 s); the pin is low now."
    )
    assert emulator.transitions(13) == 3 * per_cycle  # a short pattern is done when it returns
    await asyncio.sleep(0.1)
    assert emulator.transitions(13) == 3 * per_cycle
    assert emulator.level(13) == 0


async def test_a_write_stops_the_pattern_on_its_pin(hw: Hardware, emulator: FirmataBoard) -> None:
    await hw.ok("gpio_pattern", pin=12, pattern="blink", period_ms=40, repeat=0)
    await hw.ok("gpio_pattern", pin="led", pattern="blink", period_ms=40, repeat=0)
    await eventually(lambda: emulator.transitions(13) >= 3)
    await hw.ok("gpio_write", pin="led", value=1)
    stopped, other = emulator.transitions(13), emulator.transitions(12)
    await eventually(lambda: emulator.transitions(12) >= other + 4)  # the other runs on
    assert (emulator.transitions(13), emulator.level(13)) == (stopped, 1)
    info = await hw.ok("hardware_board_info")
    assert "pin 12 [allowed]: mode output, " in info and "running blink" in info


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pin": "led", "pattern": "blink", "period_ms": 5}, "period_ms 5 is out of range"),
        ({"pin": "led", "pattern": "blink", "repeat": -1}, "repeat -1 is out of range"),
        ({"pin": "led", "pattern": "strobe"}, "Input should be 'blink', 'pulse' or 'heartbeat'"),
        ({"pin": "fan", "pattern": "blink"}, "fan (pin 9) is wired as pwm"),
    ],
)
async def test_gpio_pattern_refusals_touch_nothing(
    hw: Hardware, emulator: FirmataBoard, args: dict[str, Any], message: str
) -> None:
    before = emulator.events()
    result = await hw("gpio_pattern", **args)
    assert not result.ok and message in result.output
    await asyncio.sleep(0.05)
    assert emulator.events() == before


async def test_board_info_shows_firmware_modes_and_values(
    hw: Hardware, emulator: FirmataBoard
) -> None:
    await hw.ok("pwm_write", pin="fan", duty=0.25)
    await hw.ok("gpio_write", pin="led", value=1)
    info = await hw.ok("hardware_board_info")
    assert info.splitlines()[0] == (
        f"Board on {emulator.path}: StandardFirmata.ino 2.5 (Firmata protocol 2.5), "
        "20 pins, 6 analog inputs."
    )
    assert '- pin 9 "fan" [allowed]: mode pwm, duty 25%; can input, input_pullup, output,' in info
    assert '- pin 13 "led" [allowed]: mode output, high;' in info
    assert '- A0 (pin 14) "light" [allowed]: mode analog;' in info
    assert "pin 0" not in info  # not usable, so not listed


async def test_capabilities_group_pins_by_what_they_can_do(hw: Hardware) -> None:
    text = await hw.ok("hardware_capabilities")
    assert "- pin 0 [allowed], pin 1: not usable through Firmata" in text
    assert (
        '- pin 3 [allowed], pin 5, pin 6, pin 9 "fan" [allowed], pin 10 "door" [allowed], '
        "pin 11: input, input_pullup, output, pwm (8-bit), servo"
    ) in text
    assert "A4 (pin 18), A5 (pin 19): input, input_pullup, output, analog (10-bit), servo," in text
    assert "pwm -> pwm_write" in text


async def test_with_no_pins_configured_every_pin_is_refused(
    emulator: FirmataBoard, tmp_path: Path
) -> None:
    settings = make_settings(emulator.path, allowed_pins=[], pins={})
    board = Board(settings)
    hw = Hardware(hardware_tools(board), tmp_path)
    result = await hw("gpio_write", pin=13, value=1)
    assert result.output == (
        "Pin 13 is not allowed. No pins are allowed yet: list them in [hardware] allowed_pins, "
        "or name them under [hardware.pins.NAME], in config.toml."
    )
    assert "No pins are allowed yet" in hw.tools["gpio_read"].description
    await board.close()
