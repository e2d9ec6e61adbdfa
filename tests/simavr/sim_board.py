"""A simulated Arduino Uno running the real StandardFirmata, on a pty: the realboard tests' board.

`build.sh` compiles the Firmata project's own StandardFirmata 2.5.9 sketch for an ATmega328P
at 16 MHz and a small simavr bridge (simfirmata.c). `SimBoard` runs the bridge: the MCU runs
cycle-accurately, paced to real time, with UART0 on a pty that a serial client (pyfirmata2,
pinclaw) opens exactly as it would /dev/ttyACM0. Opening the port resets the MCU, as an Uno's
DTR line does; the firmware then blinks pin 13 (about 2.1 s) and announces itself.

    with SimBoard(max_lifetime=120) as sim:
        board = pyfirmata2.Arduino(sim.port)
        board.digital[13].write(1)
        sim.wait_for(lambda: sim.output(13) == 1, 3)
        sim.set_analog(0, 512)            # A0 now reads 512 (2.502 V at AVCC = 5 V)
        sim.pin(9).pwm                     # OCR of the timer driving pin 9, or None
        sim.pin(10).high_us                # last high pulse on pin 10 (a servo's 544..2400 us)

Pin numbers are the Uno's: 0-13, and A0-A5 as 14-19 (or "A0".."A5"). The state comes from
the MCU's own registers (DDRx, PORTx, PINx, timer compare registers) and from the pin edges
simavr reports, never from the Firmata traffic.

Run alone: `python sim_board.py [--max-lifetime S] [--link /dev/ttyACM97]` prints the
bridge's lines (`{"port": ...}`, then events) until it exits.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

HERE = Path(__file__).resolve().parent
BUILD = Path(
    os.environ.get("SIMFIRMATA_BUILD")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "simfirmata"
)
HEX = BUILD / "StandardFirmata.hex"
BRIDGE = BUILD / "simfirmata"

__all__ = ["PinState", "SimBoard", "ensure_built", "pin_number"]


def ensure_built(force: bool = False) -> None:
    """Run build.sh when the firmware or the bridge is missing (or older than its sources)."""
    sources = [HERE / "simfirmata.c", HERE / "build.sh"]
    newest = max(p.stat().st_mtime for p in sources)
    if not force and HEX.exists() and BRIDGE.exists() and BRIDGE.stat().st_mtime >= newest:
        return
    done = subprocess.run(
        ["bash", str(HERE / "build.sh")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise RuntimeError(f"build.sh failed: {lines[-1]}")


def pin_number(pin: int | str) -> int:
    if isinstance(pin, str):
        return 14 + int(pin.upper().removeprefix("A"))
    return pin


@dataclass(frozen=True)
class PinState:
    """One pin as the MCU has it now."""

    pin: int
    dir: str  # "out" (DDR bit set) or "in"
    port: int  # PORTx bit: the output level, or for an input the pull-up
    read: int  # what the firmware reads from PINx (an output reads its own level)
    level: int  # the pin's last electrical level seen by simavr (PWM and servo toggle it)
    pwm: int | None  # compare value (0..255) when a timer's PWM output drives the pin
    high_us: float  # last high pulse, in MCU microseconds
    period_us: float  # last rising-to-rising interval
    edges: int  # level changes since start
    since_edge_us: float

    @property
    def output(self) -> int | None:
        """The level the firmware drives (None for an input)."""
        return self.port if self.dir == "out" else None

    @property
    def duty(self) -> float | None:
        """Measured duty cycle from the last full period (PWM, servo)."""
        return self.high_us / self.period_us if self.period_us else None


class SimBoard:
    """The bridge process: start() it, use `port`, read pins, set inputs, stop() it.

    speed: 1.0 = real time (the MCU's 16 MHz against the wall clock); 0 = as fast as possible.
    max_lifetime: the bridge exits by itself after this many seconds.
    reset_on_open: reset the MCU when a client opens the port (an Uno's DTR auto-reset).
    boot_ms: hold the MCU in reset this long after each reset (a bootloader's wait).
    link_path: also symlink the pty here (e.g. /dev/ttyACM97, for port autodetection).
    """

    def __init__(
        self,
        *,
        speed: float = 1.0,
        max_lifetime: float = 600,
        reset_on_open: bool = True,
        boot_ms: float = 0,
        link_path: str | os.PathLike[str] | None = None,
        events: bool = True,
        build: bool = True,
    ) -> None:
        self.speed, self.max_lifetime = speed, max_lifetime
        self.reset_on_open, self.boot_ms, self.events_on = reset_on_open, boot_ms, events
        self.link_path = str(link_path) if link_path else None
        self.build = build
        self.port = ""
        self.hello: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []  # "E" lines, parsed, in order
        self.stderr_lines: list[str] = []
        self.final_stats: dict[str, Any] | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._cmd_lock = threading.Lock()
        self._ev_lock = threading.Lock()
        self._cond = threading.Condition(self._ev_lock)
        self._readers: list[threading.Thread] = []

    # -- lifetime ----------------------------------------------------------------------------

    def start(self) -> SimBoard:
        if self.build:
            ensure_built()
        args = [str(BRIDGE), "-f", str(HEX), "-c", "-t", str(self.max_lifetime),
                "-s", str(self.speed), "-b", str(self.boot_ms)]  # fmt: skip
        if not self.reset_on_open:
            args.append("-R")
        if not self.events_on:
            args.append("-q")
        if self.link_path:
            args += ["-l", self.link_path]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            err = self._proc.stderr.read() if self._proc.stderr else ""
            raise RuntimeError(f"simfirmata did not start: {err.strip()}")
        self.hello = json.loads(line)
        self.port = self.hello["port"]
        for target in (self._read_stdout, self._read_stderr):
            t = threading.Thread(target=target, daemon=True, name=f"simboard-{target.__name__}")
            t.start()
            self._readers.append(t)
        return self

    def stop(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """Ask the bridge to quit (closing its stdin), wait, kill it if it must; returns its
        final stats line."""
        proc, self._proc = self._proc, None
        if proc is None:
            return self.final_stats
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
        for t in self._readers:
            t.join(timeout=2)
        return self.final_stats

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> SimBoard:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- the MCU, read -----------------------------------------------------------------------

    def state(self) -> dict[int, PinState]:
        reply = self._command("state")
        return {p["pin"]: PinState(**p) for p in reply["pins"]}

    def pin(self, pin: int | str) -> PinState:
        return self.state()[pin_number(pin)]

    def output(self, pin: int | str) -> int | None:
        """The level the firmware drives on `pin`, or None when it is an input."""
        return self.pin(pin).output

    def pwm(self, pin: int | str) -> int | None:
        return self.pin(pin).pwm

    def stats(self) -> dict[str, Any]:
        """Simulated and wall seconds, their ratio, bytes each way, resets, port opens."""
        return self._command("stats")

    def events_of(self, kind: str, pin: int | str | None = None) -> list[dict[str, Any]]:
        with self._ev_lock:
            return [e for e in self.events if e.get("event") == kind
                    and (pin is None or e.get("pin") == pin_number(pin))]  # fmt: skip

    def wait_for(self, pred: Callable[[], Any], timeout: float, poll: float = 0.02) -> Any:
        """Poll `pred` until it returns something truthy; returns it, or the last falsy value
        after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = pred()
            if value or time.monotonic() >= deadline:
                return value
            time.sleep(poll)

    def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float,
                   since: int = 0) -> dict[str, Any] | None:  # fmt: skip
        """The first event at index >= since that satisfies pred, waiting up to timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[since:]:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return None
                self._cond.wait(min(left, 0.1))

    # -- the world, driven -------------------------------------------------------------------

    def set_analog(self, channel: int | str, raw: int) -> None:
        """Put a voltage on A<channel> that the 10-bit ADC reads as `raw` (0..1023, AVCC 5 V)."""
        ch = pin_number(channel) - 14 if isinstance(channel, str) else channel
        if not 0 <= raw <= 1023:
            raise ValueError("raw must be 0..1023")
        self._command(f"adc {ch} {raw}")

    def set_millivolts(self, channel: int, mv: int) -> None:
        self._command(f"mv {channel} {mv}")

    def set_digital_input(self, pin: int | str, level: int | None) -> None:
        """Drive an input pin from outside (0 or 1); None releases it (pull-up or floating)."""
        self._command(f"din {pin_number(pin)} {'z' if level is None else int(bool(level))}")

    def reset(self) -> None:
        self._command("reset")

    # -- plumbing ----------------------------------------------------------------------------

    def _command(self, line: str, timeout: float = 5.0) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise RuntimeError("the simulated board is not running")
        with self._cmd_lock:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            try:
                reply = self._replies.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"simfirmata did not answer {line!r}") from None
        if "error" in reply:
            raise ValueError(f"simfirmata refused {line!r}: {reply['error']}")
        return reply

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        last_r: dict[str, Any] | None = None
        for line in proc.stdout:
            kind, _, body = line.partition(" ")
            try:
                data = json.loads(body)
            except ValueError:
                continue
            if kind == "E":
                with self._cond:
                    self.events.append(data)
                    self._cond.notify_all()
            elif kind == "R":
                last_r = data
                self._replies.put(data)
        if last_r is not None and "ratio" in last_r:
            self.final_stats = last_r
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        for line in proc.stderr:
            self.stderr_lines.append(line.rstrip("\n"))


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-lifetime", type=float, default=600)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--link", default=None)
    ap.add_argument("--no-reset", action="store_true")
    ap.add_argument("--boot-ms", type=float, default=0)
    args = ap.parse_args(argv)
    ensure_built()
    cmd = [str(BRIDGE), "-f", str(HEX), "-t", str(args.max_lifetime), "-s", str(args.speed),
           "-b", str(args.boot_ms)] + (["-l", args.link] if args.link else []) + (
           ["-R"] if args.no_reset else [])  # fmt: skip
    os.execv(cmd[0], cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
