"""The Board against an emulated StandardFirmata board: connecting, describing, losing the
port and getting it back, and the [hardware] settings."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.firmata_board import NANO, FirmataBoard
from hardware_calls import call, eventually
from pydantic import ValidationError

from tools.board.board import Board, BoardError
from tools.config import HardwareSettings

REPO = Path(__file__).resolve().parents[1]


def settings(port: Path | str, **overrides: Any) -> HardwareSettings:
    values: dict[str, Any] = {
        "enabled": True,
        "port": str(port),
        "connect_timeout_s": 1.0,
        "sampling_interval_ms": 10,
        "allowed_pins": [2, 3, 13, "A6"],
        "pins": {"led": {"pin": 12, "mode": "output"}},
    }
    return HardwareSettings.model_validate(values | overrides)


@pytest.fixture
async def board(emulator: FirmataBoard) -> AsyncIterator[Board]:
    board = Board(settings(emulator.path))
    yield board
    await board.close()


async def test_describe_reports_what_the_board_said(board: Board, emulator: FirmataBoard) -> None:
    info = await board.describe()
    assert info is not None
    assert (info.port, info.firmware, info.firmware_version) == (
        str(emulator.path),
        "StandardFirmata.ino",
        "2.5",
    )
    assert info.protocol_version == "2.5"
    assert info.pin_count == 20
    assert info.pins[0].capabilities == {}  # RX: not usable through Firmata
    assert info.pins[9].capabilities == {
        "input": 1, "input_pullup": 1, "output": 1, "pwm": 8, "servo": 14
    }  # fmt: skip
    assert info.pins[14].analog_channel == 0 and info.pins[14].label == "A0 (pin 14)"
    assert info.pins[14].mode == "analog" and info.pins[13].mode == "output"  # as reset left them
    assert emulator.sampling_interval_ms == 10


async def test_pins_follow_the_board_not_an_assumed_uno(tmp_path: Path) -> None:
    with FirmataBoard(tmp_path / "ttyUSB0", layout=NANO) as emulator:
        board = Board(settings(emulator.path))
        try:
            info = await board.describe()
            assert info is not None and info.pin_count == 22
            assert info.pins[20].capabilities == {"analog": 10}  # A6: analog only
            emulator.set_analog("A6", 300)
            assert (await call(board, "analog_read", pin="A6")).output == "A6: 300/1023 (1.47 V)."
            refused = await call(board, "gpio_write", pin="A6", value=1)
            assert not refused.ok
            assert "cannot do output; pins that can: 2–19" in refused.output
        finally:
            await board.close()


async def test_no_board_says_how_to_configure_one(tmp_path: Path) -> None:
    board = Board(settings(tmp_path / "ttyACM9"))
    assert await board.describe() is None
    assert board.last_error is not None
    assert board.last_error.startswith("No Arduino board is connected (could not open")
    assert "[hardware]" in board.last_error and "StandardFirmata" in board.last_error
    result = await call(board, "gpio_write", pin=13, value=1)
    assert not result.ok and result.output.startswith("No Arduino board is connected")
    with pytest.raises(BoardError):
        await board.connect()
    await board.close()


async def test_a_silent_port_fails_within_the_timeout_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    with FirmataBoard(tmp_path / "ttyACM0", answers=False) as emulator:
        board = Board(settings(emulator.path, connect_timeout_s=0.5))
        ticking = asyncio.create_task(ticker())
        started = time.monotonic()
        with pytest.raises(BoardError, match=r"No Firmata board answered .* within 0.5 s"):
            await board.connect()
        took = time.monotonic() - started
        stop.set()
        await ticking
        await board.close()
    assert 0.5 <= took < 3.0  # bounded by connect_timeout_s, not pyfirmata2's 5 s busy-wait
    assert max(gaps) < 0.3  # the loop kept running while the worker thread waited


async def test_a_vanished_port_fails_the_call_and_the_next_call_reconnects(
    board: Board, emulator: FirmataBoard
) -> None:
    assert (await call(board, "gpio_write", pin=13, value=1)).ok
    emulator.close()  # unplugged
    started = time.monotonic()
    lost = await call(board, "gpio_write", pin=13, value=0)
    assert not lost.ok
    assert lost.output.startswith(
        (
            "Lost the board on",
            "No Arduino board is connected",
            "Not confirmed: pin 13 low was sent, but Lost the board on",
        )
    )
    assert time.monotonic() - started < 2.0
    emulator.reopen()  # plugged back in, reset
    assert emulator.level(13) == 0
    again = await call(board, "gpio_write", pin=13, value=1)
    assert again.ok, again.output
    assert emulator.level(13) == 1


async def test_a_port_lost_mid_session_is_noticed_by_a_read(
    board: Board, emulator: FirmataBoard
) -> None:
    assert (await call(board, "gpio_read", pin=2)).ok
    emulator.close()
    assert not (await call(board, "gpio_read", pin=2)).ok
    emulator.reopen()
    emulator.set_input(2, 1)
    assert (await call(board, "gpio_read", pin=2)).output == (
        "pin 2: high, mode input.\nNote: After reconnecting, the board had lost pinclaw's "
        "settings; pinclaw restored pin 2 input."
    )


async def test_close_stops_running_patterns(board: Board, emulator: FirmataBoard) -> None:
    assert (await call(board, "gpio_pattern", pin="led", pattern="blink", period_ms=40)).ok
    await eventually(lambda: emulator.transitions(12) >= 2)
    await board.close()
    count = emulator.transitions(12)
    await asyncio.sleep(0.15)
    assert emulator.transitions(12) == count
    assert board.patterns == {}


async def test_concurrent_calls_all_land(board: Board, emulator: FirmataBoard) -> None:
    writes = [call(board, "gpio_write", pin=pin, value=i % 2)
              for i in range(1, 25) for pin in (2, 3, 13)]  # fmt: skip
    results = await asyncio.gather(*writes)
    assert all(result.ok for result in results)
    assert [emulator.level(pin) for pin in (2, 3, 13)] == [0, 0, 0]  # i = 24 wrote last


def test_importing_the_tools_leaves_pyfirmata2_unloaded() -> None:
    code = (
        "import sys, tools.board.board, tools.board.pin_tools; print('pyfirmata2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_settings_spell_pins_one_way() -> None:
    hw = HardwareSettings.model_validate(
        {"allowed_pins": ["13", "a1", "D7", 13, 2], "pins": {"fan": {"pin": "9", "mode": "pwm"}}}
    )
    assert hw.allowed_pins == [13, "A1", 7, 2]
    assert hw.pins["fan"].pin == 9


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"allowed_pins": ["X9"]}, "a pin is a digital pin number (13) or an analog name"),
        ({"allowed_pins": [-1]}, "a pin is a digital pin number"),
        ({"pins": {"Fan": {"pin": 9}}}, "use lowercase letters"),
        ({"pins": {"a0": {"pin": 9}}}, "reads like a pin"),
        ({"pins": {"fan": {"pin": 9}, "heater": {"pin": "D9"}}}, "named both 'fan' and 'heater'"),
        ({"pins": {"fan": {"pin": 9, "mode": "laser"}}}, "Input should be 'output'"),
    ],
)
def test_settings_refuse_bad_pins(overrides: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        HardwareSettings(**overrides)
