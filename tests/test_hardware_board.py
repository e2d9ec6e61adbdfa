"""What the emulated board does behind pinclaw's back, and what pinclaw tells of it: timers
taken by servos, resets, the serial line's HUPCL, a port that does not speak Firmata."""

from __future__ import annotations

import asyncio
import os
import termios
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.firmata_board import MEGA, FirmataBoard
from hardware_calls import call, eventually

from tools.board.board import Board, BoardError
from tools.board.pins import Pins
from tools.config import HardwareSettings

PINS = {"fan": {"pin": 9, "mode": "pwm"}, "door": {"pin": 10, "mode": "servo"},
        "led": {"pin": 13, "mode": "output"}}  # fmt: skip


def settings(port: Path | str, **overrides: Any) -> HardwareSettings:
    values: dict[str, Any] = {"enabled": True, "port": str(port), "connect_timeout_s": 2.0,
                              "sampling_interval_ms": 10, "allowed_pins": [2, 3, 12, "A0"],
                              "pins": PINS}  # fmt: skip
    return HardwareSettings.model_validate(values | overrides)


@pytest.fixture
async def board(emulator: FirmataBoard) -> AsyncIterator[Board]:
    board = Board(settings(emulator.path))
    yield board
    await board.close()


async def test_a_servo_that_would_stop_pwm_in_use_is_refused(
    board: Board, emulator: FirmataBoard
) -> None:
    assert (await call(board, "pwm_write", pin="fan", duty=0.5)).ok
    before = emulator.events()
    refused = await call(board, "servo_write", pin="door", angle=90)
    assert not refused.ok
    assert refused.output.startswith(
        "Not done: a servo on pin 10 makes the Servo library take Timer1, which also drives "
        "the PWM on pin 9 (duty 50%); that PWM would stop until the board resets."
    )
    assert "another timer (3, 5, 6, 11)" in refused.output
    assert emulator.events() == before and emulator.pwm(9) == 128  # the fan runs on


async def test_pwm_on_a_timer_held_by_a_servo_is_refused(
    board: Board, emulator: FirmataBoard
) -> None:
    assert (await call(board, "servo_write", pin=12, angle=30)).ok  # any pin takes Timer1
    assert (await call(board, "gpio_write", pin=12, value=0)).ok  # detached: Timer1 stays
    refused = await call(board, "pwm_write", pin="fan", duty=0.5)
    assert not refused.ok
    assert refused.output == (
        "Pin 9 cannot do PWM now: its timer, Timer1, is held by the Servo library since a "
        "servo was attached, so PWM on pins 9, 10 stays off until the board resets. Use a PWM "
        "pin on another timer: 3, 5, 6, 11."
    )
    assert emulator.mode(9) == "output"
    assert (await call(board, "pwm_write", pin=3, duty=0.5)).ok and emulator.pwm(3) == 128


async def test_a_conflict_found_on_connect_is_reported_as_the_chip_has_it(
    emulator: FirmataBoard,
) -> None:
    # Another program left the fan on PWM and then attached a servo: Timer1 is gone.
    fd = os.open(emulator.path, os.O_RDWR | os.O_NOCTTY)
    os.write(fd, bytes([0xF4, 9, 3, 0xE9, 0, 1, 0xF0, 0x70, 10, 32, 4, 96, 18, 0xF7]))
    os.close(fd)
    await eventually(lambda: emulator.mode(10) == "servo")
    assert (emulator.state(9), emulator.pwm(9)) == (128, None)  # Firmata says 128; the chip: none
    board = Board(settings(emulator.path))
    try:
        info = (await call(board, "hardware_board_info")).output
        assert '- pin 9 "fan" [allowed]: mode pwm, not running: Timer1 is held by the Servo' in info
        read = await call(board, "gpio_read", pin="fan")
        assert read.output == (
            "fan (pin 9): not running: Timer1 is held by the Servo library, mode pwm."
        )
    finally:
        await board.close()


async def test_a_mega_gives_servos_timer5_first(tmp_path: Path) -> None:
    with FirmataBoard(tmp_path / "ttyACM0", layout=MEGA) as emulator:
        board = Board(settings(emulator.path, allowed_pins=[2, 9, 44], pins={}))
        try:
            info = (await call(board, "hardware_board_info")).output
            assert "Timers of an Arduino Mega 2560 (ATmega2560): Timer0: 4, 13; " in info
            assert "Timer5: 44, 45, 46 (servos)" in info
            assert (await call(board, "pwm_write", pin=9, duty=1.0)).ok
            assert (await call(board, "servo_write", pin=2, angle=10)).ok  # Timer5, not Timer2
            refused = await call(board, "pwm_write", pin=44, duty=0.5)
            assert "its timer, Timer5, is held by the Servo library" in refused.output
            assert emulator.pwm(9) == 255
        finally:
            await board.close()


async def test_an_unknown_firmware_claims_no_timer_conflict(tmp_path: Path) -> None:
    with FirmataBoard(tmp_path / "ttyACM0", firmware="Blinker.ino") as emulator:
        board = Board(settings(emulator.path))
        try:
            assert (await call(board, "pwm_write", pin="fan", duty=0.5)).ok
            assert (await call(board, "servo_write", pin="door", angle=90)).ok
            info = (await call(board, "hardware_board_info")).output
            assert "Timers: board not recognised, so no timer conflicts are predicted." in info
        finally:
            await board.close()


async def test_a_reset_is_noticed_and_the_outputs_come_back(
    board: Board, emulator: FirmataBoard
) -> None:
    await call(board, "gpio_write", pin="led", value=1)
    await call(board, "pwm_write", pin="fan", duty=0.25)
    await call(board, "gpio_read", pin=2)
    emulator.reset(boot_s=0.2)
    assert emulator.level(13) == 0
    # No tool call needed: the announcement alone brings the outputs back.
    # The three are restored one after another: wait for the last one too.
    await eventually(
        lambda: emulator.level(13) == 1 and emulator.pwm(9) == 64 and emulator.mode(2) == "input"
    )
    result = await call(board, "gpio_read", pin="led")
    assert result.output == (
        "led (pin 13): high, mode output.\nNote: The board reset; pinclaw restored pin 13 high, "
        "pin 9 PWM 25%, pin 2 input."
    )
    assert (
        "Last reset: The board reset; pinclaw restored"
        in (await call(board, "hardware_board_info")).output
    )


async def test_a_write_cut_by_a_reset_lands_after_it(board: Board, emulator: FirmataBoard) -> None:
    await call(board, "gpio_write", pin=12, value=1)
    emulator.reset(boot_s=0.3)
    started = time.monotonic()
    result = await call(board, "gpio_write", pin="led", value=1)
    assert result.ok, result.output
    assert time.monotonic() - started >= 0.25  # it waited for the board to come back
    assert (emulator.level(12), emulator.level(13)) == (1, 1)
    assert "The board reset; pinclaw restored pin 12 high" in result.output


async def test_a_write_cut_off_while_it_is_confirmed_is_what_a_reset_puts_back(
    board: Board, emulator: FirmataBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner switches the pump off and the turn is stopped while the board confirms it:
    after a brown-out pinclaw must put back off, not the on before."""
    await call(board, "gpio_write", pin="led", value=1)
    confirm = Pins._confirm

    def slow_confirm(pins: Pins, pin: int, mode: int) -> Any:
        time.sleep(0.5)  # the board's report, slow on a busy link
        return confirm(pins, pin, mode)

    monkeypatch.setattr(Pins, "_confirm", slow_confirm)
    writing = asyncio.create_task(call(board, "gpio_write", pin="led", value=0))
    await eventually(lambda: emulator.level(13) == 0)
    writing.cancel()  # the turn stopped
    await asyncio.gather(writing, return_exceptions=True)
    await asyncio.sleep(0.6)  # the write's thread done
    monkeypatch.undo()
    emulator.reset(boot_s=0.2)
    result = await call(board, "gpio_read", pin="led")
    lost = "Note: The board reset (nothing pinclaw had set was lost)."
    said = f"led (pin 13): low, mode output.\n{lost}"
    assert (emulator.level(13), result.output) == (0, said)


async def test_without_restore_the_result_says_what_was_lost(emulator: FirmataBoard) -> None:
    board = Board(settings(emulator.path, restore_after_reset=False))
    try:
        await call(board, "gpio_write", pin="led", value=1)
        emulator.reset()
        result = await call(board, "gpio_read", pin="led")
        assert result.output == (
            "led (pin 13): low, mode output.\nNote: The board reset; these settings were lost: "
            "pin 13 high ([hardware] restore_after_reset is off: set them again if they are "
            "still wanted)."
        )
        assert emulator.level(13) == 0
    finally:
        await board.close()


async def test_the_port_is_left_so_that_closing_it_does_not_reset_the_board(
    board: Board, emulator: FirmataBoard
) -> None:
    fd = os.open(emulator.path, os.O_RDWR | os.O_NOCTTY)
    try:
        attrs = termios.tcgetattr(fd)
        attrs[2] |= termios.HUPCL  # as a USB serial port starts: DTR drops on close
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        await board.connect()
        assert not termios.tcgetattr(fd)[2] & termios.HUPCL
    finally:
        os.close(fd)


def babbling_pty(tmp_path: Path, stop: threading.Event) -> Path:
    """A serial device that prints text, as a board running another sketch does."""
    master, slave = os.openpty()
    link = tmp_path / "ttyUSB0"
    link.symlink_to(os.ttyname(slave))

    def babble() -> None:
        while not stop.wait(0.05):
            os.write(master, b"temp=21.5C\r\n")
        os.close(master)
        os.close(slave)

    threading.Thread(target=babble, daemon=True).start()
    return link


async def test_a_board_without_firmata_gets_a_hint(tmp_path: Path) -> None:
    stop = threading.Event()
    board = Board(settings(babbling_pty(tmp_path, stop), connect_timeout_s=0.6))
    try:
        with pytest.raises(BoardError) as raised:
            await board.connect()
    finally:
        stop.set()
        await board.close()
    assert "sends data" in str(raised.value)
    assert "does not answer as a Firmata board" in str(raised.value)
    assert "Upload StandardFirmata" in str(raised.value) and "baud (57600)" in str(raised.value)
