"""Latency of a hardware tool call, LLM aside: gpio_write then gpio_read on one pin, through
the tool layer (argument validation, pin policy, Board lock, worker thread, pyfirmata2, serial)
against the emulated StandardFirmata board on a pseudo-terminal.

Each write waits for the board to confirm it and each read asks the board, so every call is a
real round trip. A USB board adds its own serial latency (about 1-4 ms per round trip at
57600 baud) on top of these figures.

    .venv/bin/python bench/hardware.py [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes.firmata_board import FirmataBoard  # noqa: E402

from tools.base import ToolCallContext  # noqa: E402
from tools.config import HardwareSettings  # noqa: E402
from tools.gpio import hardware_tools  # noqa: E402
from tools.hardware import Board  # noqa: E402


async def measure(calls: int) -> tuple[float, dict[str, list[float]]]:
    timings: dict[str, list[float]] = {"gpio_write": [], "gpio_read": [], "write + read": []}
    with tempfile.TemporaryDirectory() as tmp, FirmataBoard(Path(tmp) / "ttyACM0") as emulator:
        settings = HardwareSettings(enabled=True, port=str(emulator.path), allowed_pins=[13])
        board = Board(settings)
        tools = {tool.name: tool for tool in hardware_tools(settings, board)}
        context = ToolCallContext(workspace=Path(tmp))
        started = time.perf_counter()
        await board.connect()
        connect_s = time.perf_counter() - started
        for i in range(calls + 20):  # the first 20 warm up and are not counted
            level = i % 2
            t0 = time.perf_counter()
            wrote = await tools["gpio_write"].run({"pin": 13, "value": level}, context)
            t1 = time.perf_counter()
            read = await tools["gpio_read"].run({"pin": 13}, context)
            t2 = time.perf_counter()
            expected = f"pin 13: {'high' if level else 'low'}, mode output."
            if not (wrote.ok and read.output == expected and emulator.level(13) == level):
                raise SystemExit(f"call {i} went wrong: {wrote.output!r}, {read.output!r}")
            if i >= 20:
                timings["gpio_write"].append(t1 - t0)
                timings["gpio_read"].append(t2 - t1)
                timings["write + read"].append(t2 - t0)
        await board.close()
    return connect_s, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    calls = parser.parse_args().calls
    connect_s, timings = asyncio.run(measure(calls))
    print(f"hardware tools vs emulated Uno, {calls} calls, Python {platform.python_version()}")
    print(f"connect (firmware, capabilities, pin states): {connect_s * 1000:.1f} ms\n")
    print("| call         | median ms | p99 ms | max ms |")
    print("| ------------ | --------- | ------ | ------ |")
    for name, samples in timings.items():
        ms = sorted(s * 1000 for s in samples)
        p99 = statistics.quantiles(ms, n=100)[98]
        print(f"| {name:<12} | {statistics.median(ms):9.2f} | {p99:6.2f} | {ms[-1]:6.2f} |")


if __name__ == "__main__":
    main()
