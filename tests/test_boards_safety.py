"""Safe states and interlocks on the emulated board: where a pin with `safe` goes at start,
after a lost link (before anything else is sent) and at a clean stop; and a write refused
because another pin of its interlock group is on, with the board left as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fault_proxy import FaultProxy
from fakes.firmata_board import FirmataBoard
from fakes.tcp_serial import TcpSerial
from hardware_calls import call, eventually

from tools.board.board import Board
from tools.config import HardwareSettings

PINS = {
    "pump": {"pin": 8, "mode": "output", "safe": 0},
    "fan": {"pin": 9, "mode": "pwm", "safe": 0.2},
    "heater": {"pin": 5, "mode": "pwm"},
    "vent": {"pin": 6, "mode": "output"},
    "lamp": {"pin": 12, "mode": "output"},
}


def settings(port: Path | str, **overrides: Any) -> HardwareSettings:
    values = {"enabled": True, "port": str(port), "connect_timeout_s": 1.0, "heartbeat_s": 0.5,
              "sampling_interval_ms": 10, "pins": PINS,
              "interlocks": [["heater", "vent"]]}  # fmt: skip
    return HardwareSettings.model_validate(values | overrides)


def unsafe(port: Path | str) -> HardwareSettings:
    """The same pins without safe states: what a run before the config had left."""
    pins = {name: {k: v for k, v in pin.items() if k != "safe"} for name, pin in PINS.items()}
    return settings(port, pins=pins)


async def left_on(emulator: FirmataBoard) -> None:
    """The pump high and the fan full, left so by a run without safe states."""
    before = Board(unsafe(emulator.path))
    assert (await call(before, "gpio_write", pin="pump", value=1)).ok
    assert (await call(before, "pwm_write", pin="fan", duty=1.0)).ok
    await before.close()
    assert (emulator.level(8), emulator.pwm(9)) == (1, 255)


async def test_safe_states_are_set_at_start_before_anything_else_and_at_a_clean_stop(
    emulator: FirmataBoard,
) -> None:
    await left_on(emulator)
    mark = len(emulator.events())
    board = Board(settings(emulator.path))
    said = await call(board, "gpio_write", pin="lamp", value=1)
    assert said.output == "lamp (pin 12) is now high."  # at start: no note, it is the start
    changes = [e for e in emulator.events()[mark:] if e[0] != "mode"]
    assert changes == [("level", 8, 0), ("pwm", 9, 51), ("level", 12, 1)]  # safe ones first
    assert (await call(board, "gpio_write", pin="pump", value=1)).ok
    assert (await call(board, "pwm_write", pin="fan", duty=0.75)).ok
    await board.close()  # what `agent run` does when it stops
    assert (emulator.level(8), emulator.pwm(9), emulator.level(12)) == (0, 51, 1)


@pytest.fixture
def proxy(emulator: FirmataBoard) -> Iterator[FaultProxy]:
    with TcpSerial(emulator.path) as served, FaultProxy(("127.0.0.1", served.port)) as faults:
        yield faults


async def test_a_board_whose_link_came_back_gets_its_safe_states_before_anything_else(
    proxy: FaultProxy, emulator: FirmataBoard
) -> None:
    """A Wi-Fi board keeps its outputs when the link drops; pinclaw reconnects by itself
    (there are safe states to set) and sets them before it sends anything else."""
    board = Board(settings(proxy.url()))
    try:
        assert (await call(board, "gpio_write", pin="pump", value=1)).ok
        assert (await call(board, "gpio_write", pin="lamp", value=1)).ok
        mark = len(emulator.events())
        proxy.drop()
        await eventually(lambda: emulator.level(8) == 0, within=4.0, what="the pump made safe")
        assert proxy.connections == 2  # reconnected without a tool call
        said = await call(board, "gpio_write", pin="vent", value=1)
        assert said.output == (
            "vent (pin 6) is now high.\nNote: After reconnecting, pinclaw set the safe states: "
            "pump (pin 8) low, fan (pin 9) PWM 20%."
        )
        changes = [e for e in emulator.events()[mark:] if e[0] != "mode"]
        assert changes == [("level", 8, 0), ("pwm", 9, 51), ("level", 6, 1)]
        assert emulator.level(12) == 1  # the lamp has no safe state: it was never touched
    finally:
        await board.close()


async def test_a_reset_board_gets_its_safe_states_not_the_old_outputs(
    emulator: FirmataBoard,
) -> None:
    board = Board(settings(emulator.path))
    try:
        assert (await call(board, "gpio_write", pin="pump", value=1)).ok
        assert (await call(board, "gpio_write", pin="lamp", value=1)).ok
        emulator.reset()  # a brown-out: every pin back to its power-on state
        read = await call(board, "gpio_read", pin="pump")
        assert read.output == (
            "pump (pin 8): low, mode output.\nNote: The board reset, pinclaw set the safe "
            "states: pump (pin 8) low, fan (pin 9) PWM 20%. The board reset; pinclaw restored "
            "pin 12 high."
        )
        assert (emulator.level(8), emulator.pwm(9), emulator.level(12)) == (0, 51, 1)
    finally:
        await board.close()


async def test_an_interlock_refuses_a_second_pin_of_its_group_and_names_the_first(
    emulator: FirmataBoard,
) -> None:
    board = Board(settings(emulator.path))
    try:
        assert (await call(board, "pwm_write", pin="heater", duty=0.5)).ok
        refused = await call(board, "gpio_write", pin="vent", value=1)
        assert not refused.ok
        assert refused.output == (
            "Not done: vent (pin 6) and heater (pin 5) are interlocked (never on together), "
            "and heater (pin 5) is on now; switch it off first."
        )
        assert emulator.level(6) == 0 and emulator.transitions(6) == 0
        assert (await call(board, "gpio_write", pin="vent", value=0)).ok  # off is always fine
        assert (await call(board, "pwm_write", pin="heater", duty=0)).ok
        assert (await call(board, "gpio_write", pin="vent", value=1)).ok
        refused = await call(board, "pwm_write", pin="heater", duty=0.1)
        assert refused.output.startswith("Not done: heater (pin 5) and vent (pin 6) are")
        assert emulator.pwm(5) == 0 and emulator.level(6) == 1
    finally:
        await board.close()
