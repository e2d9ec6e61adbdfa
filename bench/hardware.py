"""Latency of a hardware tool call, LLM aside: gpio_write then gpio_read on one pin, through
the tool layer (argument validation, pin policy, Board lock, worker thread, pyfirmata2's
parser, the port), against the emulated StandardFirmata board (`--board emulator`, a Python
double that answers at once) or the real StandardFirmata 2.5.9 on a simulated ATmega328P
(`--board simavr`, tests/simavr: 57600 baud, the MCU paced to real time).

Each board is reached four ways (`--link`): `direct` (its pty, as /dev/ttyACM0),
`socket` (socket://, the pty served over loopback TCP as a Wi-Fi board serves its Firmata,
tests/fakes/tcp_serial.py), `rfc2217` (rfc2217://, the real ser2net sharing the pty over
loopback, tests/fakes/ser2net.py, with docs/arduino.md's `tcp(nodelay)` and `chardelay: false`) and
`rfc2217-defaults` (the same with ser2net's defaults: Nagle on, each reply held ~1 ms).

Each write is confirmed by reading the pin back and each read asks the board, so every call
is a real round trip. "write -> pin" runs from the call's start to the moment the pin's
level changes: in the emulator's pin table, or in the simulated MCU's port register (as the
rig timestamps it); "gpio_write" is the write confirmed by the board. A USB board adds its
own latency (about 1-4 ms per round trip).

    .venv/bin/python bench/hardware.py [--board emulator|simavr|both]
        [--link direct|socket|rfc2217|all] [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes.firmata_board import FirmataBoard  # noqa: E402
from fakes.ser2net import Ser2Net  # noqa: E402
from fakes.tcp_serial import TcpSerial  # noqa: E402

from tools.base import ToolCallContext  # noqa: E402
from tools.board.board import Board  # noqa: E402
from tools.board.board_tools import hardware_tools  # noqa: E402
from tools.config import HardwareSettings  # noqa: E402

ROWS = ("write -> pin", "gpio_write", "gpio_read", "write + read")
PinChange = Callable[[float], float]  # call start -> when the pin changed after it
LINKS = ("direct", "socket", "rfc2217", "rfc2217-defaults")


@contextlib.contextmanager
def emulated() -> Iterator[tuple[str, PinChange]]:
    with tempfile.TemporaryDirectory() as tmp, FirmataBoard(Path(tmp) / "ttyACM0") as board:
        yield str(board.path), lambda _: board.changed_at(13)


@contextlib.contextmanager
def simulated() -> Iterator[tuple[str, PinChange]]:
    from simavr.sim_board import SimBoard

    with SimBoard(max_lifetime=900) as sim:

        def changed(since: float) -> float:
            event = sim.wait_event(
                lambda e: e.get("event") == "pin" and e["pin"] == 13 and e["mono"] >= since, 2.0
            )
            if event is None:
                raise SystemExit("the simulated pin 13 never changed")
            return float(event["mono"])

        yield sim.port, changed


@contextlib.contextmanager
def reached(device: str, link: str) -> Iterator[str]:
    """The port pinclaw opens to reach `device` over `link`."""
    if link == "direct":
        yield device
    elif link == "socket":
        with TcpSerial(device) as served:
            yield served.url
    else:
        if missing := Ser2Net.missing():
            raise SystemExit(missing)
        tuned = not link.endswith("defaults")
        with (
            tempfile.TemporaryDirectory() as tmp,
            Ser2Net(device, Path(tmp), tuned=tuned) as server,
        ):
            yield server.url


async def measure(
    port: str, pin_changed: PinChange, calls: int
) -> tuple[float, dict[str, list[float]]]:
    timings: dict[str, list[float]] = {row: [] for row in ROWS}
    settings = HardwareSettings(enabled=True, port=port, allowed_pins=[13], heartbeat_s=0)
    board = Board(settings)
    tools = {tool.name: tool for tool in hardware_tools(board)}
    context = ToolCallContext(workspace=ROOT)
    started = time.perf_counter()
    await board.connect()
    connect_s = time.perf_counter() - started
    for i in range(calls + 20):  # the first 20 warm up and are not counted
        level = (i + 1) % 2
        t0, mono0 = time.perf_counter(), time.monotonic()
        wrote = await tools["gpio_write"].run({"pin": 13, "value": level}, context)
        t1 = time.perf_counter()
        read = await tools["gpio_read"].run({"pin": 13}, context)
        t2 = time.perf_counter()
        expected = f"pin 13: {'high' if level else 'low'}, mode output."
        if not (wrote.ok and read.output == expected):
            raise SystemExit(f"call {i} went wrong: {wrote.output!r}, {read.output!r}")
        if i >= 20:
            timings["write -> pin"].append(pin_changed(mono0) - mono0)
            timings["gpio_write"].append(t1 - t0)
            timings["gpio_read"].append(t2 - t1)
            timings["write + read"].append(t2 - t0)
    await board.close()
    return connect_s, timings


def report(name: str, connect_s: float, timings: dict[str, list[float]]) -> dict[str, float]:
    print(f"\n{name}: connect (firmware, capabilities, pin states) {connect_s * 1000:.0f} ms")
    print("| call         | median ms | p99 ms | max ms |")
    print("| ------------ | --------- | ------ | ------ |")
    medians = {}
    for row, samples in timings.items():
        ms = sorted(s * 1000 for s in samples)
        p99 = statistics.quantiles(ms, n=100)[98]
        medians[row] = statistics.median(ms)
        print(f"| {row:<12} | {medians[row]:9.2f} | {p99:6.2f} | {ms[-1]:6.2f} |")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=("emulator", "simavr", "both"), default="both")
    parser.add_argument("--link", choices=(*LINKS, "all"), default="all")
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    print(f"hardware tools, {args.calls} calls each, Python {platform.python_version()}")
    boards = {"emulator": ("emulated Uno (tests/fakes)", emulated),
              "simavr": ("StandardFirmata 2.5.9 on simavr (tests/simavr)", simulated)}  # fmt: skip
    links = LINKS if args.link == "all" else (args.link,)
    for key, (name, rig) in boards.items():
        if args.board not in (key, "both"):
            continue
        confirmed: dict[str, float] = {}
        for link in links:
            with rig() as (device, pin_changed), reached(device, link) as port:
                connect_s, timings = asyncio.run(measure(port, pin_changed, args.calls))
            medians = report(f"{name}, {link}", connect_s, timings)
            confirmed[link] = medians["gpio_write"]
        if "direct" in confirmed and len(confirmed) > 1:
            ratios = ", ".join(
                f"{link} {confirmed[link] / confirmed['direct']:.2f}x"
                for link in confirmed
                if link != "direct"
            )
            print(f"\nwrite + confirm (gpio_write) median against direct: {ratios}")


if __name__ == "__main__":
    main()
