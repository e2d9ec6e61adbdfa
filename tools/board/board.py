"""One board behind the hardware tools: one StandardFirmata link, on a serial port of this
machine or over the network (tools/board/link/serial_port.py), kept by
tools/board/link/connection.py.

What the tools ask of a board runs here: each write is read back before it is reported
(or said to be unconfirmed, when the link fails after it was sent), an operation cut by a
reset runs again after the recovery, and a serial error or silence drops the link for the
next call. Patterns (tools/board/patterns.py) and pin watches (tools/board/link/reports.py) run
on top.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from tools.board.link.connection import Connection
from tools.board.link.firmata_link import FirmataLink
from tools.board.link.firmata_types import (
    MODE_CODES,
    BoardError,
    BoardInfo,
    BoardReset,
    PinInfo,
    PinReading,
    PinToken,
)
from tools.board.link.reports import OnLost, OnValue, Subscription
from tools.board.patterns import PatternRun, Patterns
from tools.board.pins import Pins
from tools.board.restore import Setting
from tools.config import DEFAULT_BOARD, BoardSettings

__all__ = ["Board", "BoardError", "BoardInfo", "PinInfo", "PinReading", "Subscription"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Op = Callable[[Pins, int], T]
ATTEMPTS = 3  # an operation cut by a reset is retried after the recovery


class Board(Connection):
    """One Firmata board, connected lazily and reconnected after a loss.

    `connect()` raises BoardError when there is no usable board; `describe()` returns None
    instead and leaves the reason in `last_error`. `close()` lets finite patterns end
    (within `pattern_grace_s`, the tool timeout), cuts the rest, leaving their pins low, and
    puts the safe pins in their safe state.
    """

    def __init__(
        self, settings: BoardSettings, *, pattern_grace_s: float = 60.0, name: str = DEFAULT_BOARD
    ) -> None:
        super().__init__(settings, name=name)
        self.pattern_grace_s = pattern_grace_s
        self._patterns = Patterns(self._pattern_write)
        self._pattern_links: dict[int, FirmataLink] = {}

    async def close(self, *, grace_s: float | None = None) -> None:
        """Let finite patterns end within `grace_s` (default `pattern_grace_s`), cut the
        rest low, stop the watches, set the safe states and let go of the port."""
        wait = self.pattern_grace_s if grace_s is None else min(grace_s, self.pattern_grace_s)
        for note in await self._patterns.finish(wait):
            log.warning("%s", note)
        await self._let_go()

    async def describe(self) -> BoardInfo | None:
        try:
            return await self.info()
        except BoardError as exc:
            self.last_error = str(exc)
            return None

    async def info(self) -> BoardInfo:
        async with self._lock:
            info = await self._guarded(None, None, lambda pins, _: pins.info())
            return dataclasses.replace(info, resets=self.last_reset)

    @property
    def patterns(self) -> dict[int, str]:
        """Pins with a pattern running, and the pattern's name."""
        return {pin: run.name for pin, run in self._patterns.running.items()}

    @property
    def finite_patterns(self) -> list[int]:
        """Pins whose pattern has an end, which `close()` waits for."""
        return [pin for pin, run in self._patterns.running.items() if run.repeat]

    # -- the tools' operations ---------------------------------------------------------------

    async def digital_write(
        self, token: PinToken, level: int, *, check: Callable[[Pins], None] | None = None
    ) -> PinReading:
        """Set an output; `check(pins)` runs first under the same lock (an interlock)."""
        what = "high" if level else "low"
        write: Op[PinReading] = lambda pins, pin: pins.digital_write(pin, level)  # noqa: E731
        return await self._write(token, "output", what, check, write)

    async def pwm_write(
        self, token: PinToken, duty: float, *, check: Callable[[Pins], None] | None = None
    ) -> PinReading:
        write: Op[PinReading] = lambda pins, pin: pins.pwm_write(pin, duty)  # noqa: E731
        return await self._write(token, "pwm", f"PWM {duty:.0%}", check, write)

    async def servo_write(
        self, token: PinToken, angle: int, *, check: Callable[[Pins], None] | None = None
    ) -> PinReading:
        write: Op[PinReading] = lambda pins, pin: pins.servo_write(pin, angle)  # noqa: E731
        return await self._write(token, "servo", f"servo {angle}°", check, write)

    async def analog_read(self, token: PinToken) -> PinReading:
        reading = await self._op(token, "analog", lambda pins, pin: pins.analog_read(pin))
        self._record.setdefault(reading.pin, Setting("analog"))
        return reading

    async def digital_read(
        self, token: PinToken, *, pullup: bool = False, as_output: bool = False
    ) -> PinReading:
        """Read a pin as an input, or, for a pin pinclaw drives (or one wired as an output),
        report its state without switching it to input, which would cut off what it drives.
        """
        mode = "input_pullup" if pullup else "input"

        def read(pins: Pins, pin: int) -> PinReading:
            if as_output or pin in pins.driven:
                return pins.pin_state(pin)
            pins.check(pin, mode)
            return pins.digital_read(pin, MODE_CODES[mode])

        async with self._lock:
            reading = await self._guarded(token, None, read)
            if reading.mode == mode:
                self._patterns.stop(reading.pin, "the pin became an input", rest=False)
                self._record[reading.pin] = Setting(mode)
            return reading

    async def start_pattern(
        self, token: PinToken, name: str, steps: Sequence[tuple[int, float]], repeat: int
    ) -> PatternRun:
        """Run (level, seconds) steps on the host, `repeat` times, or until stopped if 0."""
        async with self._lock:
            pins = await self._ensure()
            pin = pins.pin_of(token)
            pins.check(pin, "output")
            self._patterns.stop(pin, "a new pattern replaced it", rest=False)
            self._record[pin] = Setting("output", 0)  # a reset restores the rest level
            self._pattern_links[pin] = pins.link  # a pattern ends with its link
            return self._patterns.start(pin, name, steps, repeat)

    async def wait_pattern(self, run: PatternRun, within_s: float) -> PatternRun:
        return await self._patterns.wait(run, within_s)

    async def subscribe(
        self, token: PinToken, mode: str, on_value: OnValue, on_lost: OnLost | None = None
    ) -> Subscription:
        """Have `on_value(token, value)` called on the event loop for each report of the pin:
        an analog reading every sampling interval, a digital level when it changes. The
        board reports by itself (no polling); after a reconnect or a reset the Board
        subscribes again, and `on_lost(reason)` hears when the board is gone."""
        if mode not in ("analog", "input", "input_pullup"):
            raise ValueError(f"cannot watch a pin in mode {mode!r}")
        async with self._lock:
            pins = await self._ensure()
            pin = pins.pin_of(token)
            pins.check(pin, mode)
            channel = pins.channels.get(pin) if mode == "analog" else None
            sub = self._watches.add(Subscription(token, pin, mode, channel, on_value, on_lost))
            try:
                await self._guarded(token, mode, lambda p, n: p.watch(n, mode))
            except BoardError:
                sub.cancel()
                raise
            self._patterns.stop(pin, "the pin is watched as an input", rest=False)
            self._record[pin] = Setting(mode)
            return sub

    # -- plumbing ----------------------------------------------------------------------------

    async def _op(self, token: PinToken, mode: str, fn: Op[T]) -> T:
        async with self._lock:
            return await self._guarded(token, mode, fn)

    async def _write(
        self,
        token: PinToken,
        mode: str,
        what: str,
        check: Callable[[Pins], None] | None,
        fn: Op[PinReading],
    ) -> PinReading:
        """A write confirmed by the board's own report, or a BoardError saying it could not
        be confirmed (the link failed after it was sent). It is recorded for a reset to put
        back on the board's thread, as it lands: a call cut off while the write is confirmed
        (a stopped turn) must not leave the setting before it to be restored."""

        def checked(pins: Pins, pin: int) -> PinReading:
            if check is not None:
                check(pins)
            reading = fn(pins, pin)
            self._record[reading.pin] = Setting(mode, reading.value)
            return reading

        async with self._lock:
            return await self._guarded(token, mode, checked, what=what)

    async def _pattern_write(self, pin: int, level: int) -> float:
        """A pattern's step, on the link it started on: one lost since stops the pattern
        (its timing is gone) instead of carrying on over a new link."""
        async with self._lock:
            link = self._pattern_links.get(pin)
            if link is None or link is not self._link or link.broken is not None:
                why = link.broken if link is not None and link.broken else "it was lost"
                raise BoardError(f"The link to the board on {self._settings.port} broke ({why}).")
            reading = await self._guarded(pin, None, lambda pins, p: pins.digital_write(p, level))
            return reading.value

    async def _guarded(
        self, token: PinToken | None, mode: str | None, fn: Op[T], *, what: str = ""
    ) -> T:
        """Check and run one operation (lock held); one cut by a reset runs again after the
        recovery, and a serial error or silence drops the link for the next call."""
        for _ in range(ATTEMPTS):
            pins = await self._ensure()
            pin = -1 if token is None else pins.pin_of(token)
            if mode is not None:
                pins.check(pin, mode)  # refused before anything is written
                if mode != "analog":
                    self._patterns.stop(pin, "a write on the pin took over", rest=False)
            link = pins.link
            try:
                call = functools.partial(fn, pins, pin)
                return await self._run(functools.partial(link.guard, call))
            except BoardReset:
                continue  # the next _ensure recovers, then the operation runs again
            except BoardError as exc:
                lost = link.broken is not None
                if lost and self._link is link:
                    await self._drop(link)
                if lost and what:
                    label = self._safe.label(pins, pin)
                    raise BoardError(f"Not confirmed: {label} {what} was sent, but {exc}") from None
                raise
        raise BoardError(f"The board on {self._settings.port} keeps resetting; check its power.")
