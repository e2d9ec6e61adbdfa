"""Boards over the network: the Firmata emulator served over TCP as a Wi-Fi board serves its
Firmata (`socket://`, tests/fakes/tcp_serial.py) behind a proxy that delays, drops and
half-opens the link (tests/fakes/fault_proxy.py), and shared by the real ser2net in RFC 2217
mode (`rfc2217://`, tests/fakes/ser2net.py). Every write is confirmed by the board's own
report, or the tool says it could not be; a silent link is noticed within a bound."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fault_proxy import FaultProxy
from fakes.firmata_board import FirmataBoard
from fakes.ser2net import Ser2Net
from fakes.tcp_serial import TcpSerial
from hardware_calls import call, eventually

from tools.board.board import Board
from tools.config import HardwareSettings

PINS = {"led": {"pin": 13, "mode": "output"}, "door": {"pin": 2, "mode": "input"}}


def settings(port: str, **overrides: Any) -> HardwareSettings:
    values = {"enabled": True, "port": port, "connect_timeout_s": 1.0, "heartbeat_s": 0.5,
              "sampling_interval_ms": 10, "allowed_pins": [12], "pins": PINS}  # fmt: skip
    return HardwareSettings.model_validate(values | overrides)


@pytest.fixture
def proxy(emulator: FirmataBoard) -> Iterator[FaultProxy]:
    """The emulator as a Wi-Fi board on TCP, reached through the fault proxy."""
    with TcpSerial(emulator.path) as served, FaultProxy(("127.0.0.1", served.port)) as faults:
        yield faults


@pytest.fixture
async def board(proxy: FaultProxy) -> AsyncIterator[Board]:
    board = Board(settings(proxy.url()))
    yield board
    await board.close()


async def test_a_slow_link_still_confirms_each_write_with_the_boards_report(
    board: Board, proxy: FaultProxy, emulator: FirmataBoard
) -> None:
    assert (await call(board, "gpio_write", pin="led", value=0)).ok  # connected
    proxy.delay_s = 0.2  # each way: a request and its answer take 400 ms more
    started = time.monotonic()
    said = await call(board, "gpio_write", pin="led", value=1)
    took = time.monotonic() - started
    assert said.output == "led (pin 13) is now high." and said.ok
    assert emulator.level(13) == 1  # the board has it when the tool says so
    assert took >= 0.4  # the tool waited for the board's own answer
    read = await call(board, "gpio_read", pin="led")
    assert read.output == "led (pin 13): high, mode output."


async def test_a_write_on_a_link_gone_silent_is_not_claimed(
    board: Board, proxy: FaultProxy, emulator: FirmataBoard
) -> None:
    assert (await call(board, "gpio_write", pin="led", value=0)).ok
    proxy.hang()  # half-open: the connection stays up, nothing passes
    started = time.monotonic()
    said = await call(board, "gpio_write", pin="led", value=1)
    assert not said.ok
    assert said.output.startswith(
        "Not confirmed: led (pin 13) high was sent, but Lost the board at socket://127.0.0.1:"
    )
    assert (
        "(no answer to a pin state query within 1 s). Is it still powered and on the network?"
    ) in said.output
    assert time.monotonic() - started < 3.0
    assert emulator.level(13) == 0  # it never arrived; nothing claimed it did
    proxy.heal()
    again = await call(board, "gpio_write", pin="led", value=1)
    assert again.ok and emulator.level(13) == 1, again.output


async def test_a_half_open_link_is_noticed_within_heartbeat_and_timeout_and_the_watch_resumes(
    board: Board, proxy: FaultProxy, emulator: FirmataBoard
) -> None:
    """Nothing is asked of the board: only the heartbeat can tell the link went silent."""
    heard: list[float] = []
    lost: list[tuple[float, str]] = []
    await board.subscribe(2, "input", lambda _, value: heard.append(value),
                          lambda why: lost.append((time.monotonic(), why)))  # fmt: skip
    await eventually(lambda: heard == [0.0])
    proxy.hang()
    hung = time.monotonic()
    await eventually(lambda: lost, within=4.0, what="the silent link noticed")
    noticed_s = lost[0][0] - hung
    assert noticed_s <= 0.5 + 1.0 + 0.5  # heartbeat_s + connect_timeout_s, and some slack
    assert lost[0][1] == "no answer to a sync request within 1 s"
    proxy.heal()  # the Board reconnects by itself (backoff from 0.5 s) and subscribes again
    await eventually(lambda: board.connected, within=4.0, what="reconnected")
    emulator.set_input(2, 1)
    await eventually(lambda: heard[-1:] == [1.0], what="the watch hears the board again")
    assert proxy.connections == 2


async def test_a_link_dropped_mid_pattern_stops_it_and_the_next_call_reconnects(
    board: Board, proxy: FaultProxy, emulator: FirmataBoard
) -> None:
    started = await call(board, "gpio_pattern", pin="led", pattern="blink", period_ms=60)
    assert started.ok and "until stopped" in started.output
    await eventually(lambda: emulator.transitions(13) >= 3)
    proxy.drop()
    await eventually(lambda: board.patterns == {}, what="the pattern ended with the link")
    said = await call(board, "gpio_write", pin="led", value=1)
    assert said.ok and said.output.startswith("led (pin 13) is now high.")
    assert emulator.level(13) == 1 and proxy.connections == 2


async def test_a_board_that_is_not_there_says_where_it_looked(proxy: FaultProxy) -> None:
    proxy.refuse()
    board = Board(settings(proxy.url()))
    try:
        said = await call(board, "gpio_write", pin="led", value=1)
    finally:
        await board.close()
    assert not said.ok
    assert said.output.startswith(f"Could not reach the board at {proxy.url()} (")
    assert said.output.endswith(
        "Is the board powered and on the network, running StandardFirmataWiFi/Ethernet?"
    )


@pytest.fixture
def ser2net(emulator: FirmataBoard, tmp_path: Path) -> Iterator[Ser2Net]:
    missing = Ser2Net.missing()
    if missing:
        if os.environ.get("PINCLAW_REALBOARD") == "require":
            pytest.fail(missing)
        pytest.skip(missing)
    with Ser2Net(emulator.path, tmp_path / "ser2net") as server:
        yield server


async def test_a_board_shared_by_ser2net_over_rfc2217(
    ser2net: Ser2Net, emulator: FirmataBoard
) -> None:
    board = Board(settings(ser2net.url, heartbeat_s=0.0))
    try:
        assert (await call(board, "gpio_write", pin="led", value=1)).output == (
            "led (pin 13) is now high."
        )
        assert emulator.level(13) == 1
        info = await call(board, "hardware_board_info")
        assert info.output.startswith(f"Board on {ser2net.url}: StandardFirmata.ino 2.5")
    finally:
        await board.close()
    # Closed: ser2net let go of the device; the next client gets it again.
    board = Board(settings(ser2net.url, heartbeat_s=0.0))
    try:
        read = await call(board, "gpio_read", pin="led")
        assert read.output == "led (pin 13): high, mode output."
    finally:
        await board.close()


async def test_network_ports_are_checked_in_the_config() -> None:
    from pydantic import ValidationError

    for bad in ("ftp://host:21", "rfc2217://host", "socket://host:99999", " "):
        with pytest.raises(ValidationError, match="rfc2217://host:port"):
            settings(bad)
    assert settings("socket://esp32.lan:3030").port == "socket://esp32.lan:3030"
    await asyncio.sleep(0)
