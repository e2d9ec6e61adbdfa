"""Patterns that outlive their tool call, and pins the board reports by itself (the API pin
watches build on), against the emulated board."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.firmata_board import FirmataBoard
from hardware_calls import call, eventually

from tools.board.board import Board
from tools.board.patterns import Patterns
from tools.config import HardwareSettings


def make_board(port: Path, grace_s: float = 1.0, **overrides: Any) -> Board:
    values: dict[str, Any] = {"enabled": True, "port": str(port), "connect_timeout_s": 2.0,
                              "sampling_interval_ms": 10,
                              "allowed_pins": [2, 7, 13, "A0"]}  # fmt: skip
    return Board(HardwareSettings.model_validate(values | overrides), pattern_grace_s=grace_s)


@pytest.fixture
async def board(emulator: FirmataBoard) -> AsyncIterator[Board]:
    board = make_board(emulator.path)
    yield board
    await board.close()


async def test_a_finite_pattern_in_the_background_ends_before_close_returns(
    emulator: FirmataBoard,
) -> None:
    board = make_board(emulator.path, grace_s=1.0)  # patterns over 0.5 s run in the background
    result = await call(board, "gpio_pattern", pin=13, pattern="blink", period_ms=100, repeat=7)
    assert result.output == (
        "pin 13: blink every 100 ms, 7 times (about 0.7 s), started in the background (a "
        "gpio_write on the pin stops it). If pinclaw stops before it ends, it waits up to 1 s "
        "for it, then cuts it and leaves the pin low."
    )
    assert emulator.transitions(13) < 14
    await board.close()  # as `agent run -m` does right after the turn
    # The emulator reads the serial line in a thread of its own: what close wrote last is
    # there a moment later.
    await eventually(lambda: (emulator.transitions(13), emulator.level(13)) == (14, 0))


async def test_a_pattern_too_long_to_wait_for_is_cut_low_and_said(
    emulator: FirmataBoard, caplog: pytest.LogCaptureFixture
) -> None:
    board = make_board(emulator.path, grace_s=0.3)
    await call(board, "gpio_pattern", pin=13, pattern="pulse", period_ms=100, repeat=50)
    await eventually(lambda: emulator.level(13) == 1)  # cut while the pin is high
    with caplog.at_level(logging.WARNING):
        await board.close()
    await eventually(lambda: emulator.level(13) == 0)  # as above: read in its own thread
    [cut] = [r.getMessage() for r in caplog.records if "was cut" in r.getMessage()]
    assert cut.startswith("The pulse on pin 13 was cut after ")
    assert cut.endswith(
        " of 50 cycles: it did not end within 0.3 s of pinclaw exiting; pin 13 left low."
    )


async def test_a_pattern_cut_while_it_writes_high_still_leaves_the_pin_low() -> None:
    """The link sends a level at once and then waits for the read-back: a cut in that wait
    (the process exiting) must not take the pin for the low it was before."""
    line: dict[int, int] = {}

    async def write(pin: int, level: int) -> float:
        line[pin] = level
        if level:
            await asyncio.sleep(5)  # the read-back of the high, still awaited at the cut
        return float(level)

    patterns = Patterns(write)
    patterns.start(13, "pulse", [(0, 0.01), (1, 0.01)], repeat=3)
    await eventually(lambda: line.get(13) == 1)
    [note] = await patterns.finish(0.05)
    assert (line[13], note.endswith("pin 13 left low.")) == (0, True)


async def test_an_endless_pattern_stops_low_at_close(board: Board, emulator: FirmataBoard) -> None:
    await call(board, "gpio_pattern", pin=13, pattern="heartbeat", period_ms=200)
    await eventually(lambda: emulator.level(13) == 1)
    await board.close()
    stopped = emulator.transitions(13)
    await asyncio.sleep(0.25)
    assert (emulator.transitions(13), emulator.level(13)) == (stopped, 0)


async def test_a_short_pattern_reports_what_ran_when_the_board_goes(
    board: Board, emulator: FirmataBoard
) -> None:
    async def unplug() -> None:
        # At the third cycle's first write the second is counted; unplugged at the fourth
        # write, its read-back could fail under load and leave the second uncounted.
        await eventually(lambda: emulator.transitions(13) >= 5)
        emulator.close()

    unplugging = asyncio.create_task(unplug())
    result = await call(board, "gpio_pattern", pin=13, pattern="blink", period_ms=100, repeat=5)
    await unplugging
    assert result.ok
    assert result.output.startswith("pin 13: blink every 100 ms stopped after 2 of 5 times: ")
    assert result.output.endswith("The pin's level is unknown.")  # the board is gone


async def test_watching_an_analog_input_hears_the_board_report_it(
    board: Board, emulator: FirmataBoard
) -> None:
    heard: list[tuple[object, float]] = []
    emulator.set_analog("A0", 100)
    sub = await board.subscribe("A0", "analog", lambda pin, value: heard.append((pin, value)))
    await eventually(lambda: ("A0", 100.0) in heard)
    emulator.set_analog("A0", 900)
    await eventually(lambda: heard[-1] == ("A0", 900.0))
    sub.cancel()
    await asyncio.sleep(0.05)
    count = len(heard)
    emulator.set_analog("A0", 5)
    await asyncio.sleep(0.1)
    assert len(heard) == count and not sub.active


async def test_a_watched_input_is_heard_on_change_and_survives_a_reset(
    board: Board, emulator: FirmataBoard
) -> None:
    levels: list[float] = []
    await board.subscribe(7, "input_pullup", lambda pin, value: levels.append(value))
    await eventually(lambda: levels == [1.0])  # the pull-up, reported when reporting starts
    emulator.set_input(7, 0)
    await eventually(lambda: levels == [1.0, 0.0])
    emulator.reset(boot_s=0.1)
    await eventually(lambda: emulator.mode(7) == "input_pullup")  # subscribed again
    emulator.set_input(7, 1)
    await eventually(lambda: levels[-1] == 1.0)
    assert (await call(board, "gpio_read", pin=2)).output.endswith(
        "pinclaw restored pin 7 input_pullup."
    )


async def test_a_watcher_hears_the_board_is_lost_and_its_return(
    board: Board, emulator: FirmataBoard
) -> None:
    values: list[float] = []
    lost: list[str] = []
    sub = await board.subscribe("A0", "analog", lambda _, v: values.append(v), lost.append)
    emulator.close()
    await eventually(lambda: lost != [])
    assert sub.lost is not None and lost[0] == sub.lost
    emulator.reopen()
    emulator.set_analog("A0", 321)
    await eventually(lambda: values[-1:] == [321.0], within=5.0)  # reconnected without a call
    assert sub.lost is None
