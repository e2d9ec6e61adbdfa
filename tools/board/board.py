"""The Arduino behind the hardware tools: one StandardFirmata connection over USB serial.

`Board` decides when the Firmata link (tools/board/firmata_link.py) runs: it connects
lazily, gives up after `connect_timeout_s`, runs all serial I/O on one worker thread and
admits one operation at a time with an asyncio lock, so the event loop never waits on the
port. A port that
vanishes fails the current call, and the next call reconnects. A board that resets (it
announces itself again) is re-read and gets back what pinclaw had set
(tools/board/restore.py); the next tool result says so. Patterns (tools/board/patterns.py)
and pin watches (tools/board/reports.py) run on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tools.board.firmata_link import FirmataLink
from tools.board.firmata_types import (
    MODE_CODES,
    BoardError,
    BoardInfo,
    BoardReset,
    PinInfo,
    PinReading,
    PinToken,
)
from tools.board.patterns import PatternRun, Patterns
from tools.board.pins import Pins
from tools.board.reports import OnLost, OnValue, Subscription, Watches
from tools.board.restore import Record, Setting
from tools.config import HardwareSettings

__all__ = ["Board", "BoardError", "BoardInfo", "PinInfo", "PinReading", "Subscription"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Op = Callable[[Pins, int], T]
ATTEMPTS = 3  # an operation cut by a reset is retried after the recovery


class Board:
    """The one Firmata board of a runtime, connected lazily and reconnected after a loss.

    `connect()` raises BoardError when there is no usable board; `describe()` returns None
    instead and leaves the reason in `last_error`. `close()` lets finite patterns end
    (within `pattern_grace_s`, the tool timeout) and cuts the rest, leaving their pins low.
    """

    def __init__(self, settings: HardwareSettings, *, pattern_grace_s: float = 60.0) -> None:
        self._settings = settings
        self.pattern_grace_s = pattern_grace_s
        self._lock = asyncio.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._link: FirmataLink | None = None
        self._pins: Pins | None = None
        self._record = Record()
        self._patterns = Patterns(self._pattern_write)
        self._watches = Watches()
        self._notices: list[str] = []
        self._reviving: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.last_error: str | None = None
        self.last_reset = ""  # what the last reset did to pinclaw's settings

    async def connect(self) -> None:
        async with self._lock:
            await self._ensure()

    async def close(self, *, grace_s: float | None = None) -> None:
        """Let finite patterns end within `grace_s` (default `pattern_grace_s`), cut the
        rest low, stop the watches and let go of the port."""
        wait = self.pattern_grace_s if grace_s is None else min(grace_s, self.pattern_grace_s)
        for note in await self._patterns.finish(wait):
            log.warning("%s", note)
        if self._reviving is not None:
            self._reviving.cancel()
        for sub in list(self._watches.subs):
            sub.cancel()
        async with self._lock:
            link, self._link, self._pins = self._link, None, None
            if link is not None:
                link.listener = None
                with contextlib.suppress(BoardError):
                    await self._run(link.close)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

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

    def take_notice(self) -> str:
        """What happened to the board since the last tool result (a reset, a restore)."""
        notices, self._notices = self._notices, []
        return " ".join(notices)

    @property
    def patterns(self) -> dict[int, str]:
        """Pins with a pattern running, and the pattern's name."""
        return {pin: run.name for pin, run in self._patterns.running.items()}

    @property
    def finite_patterns(self) -> list[int]:
        """Pins whose pattern has an end, which `close()` waits for."""
        return [pin for pin, run in self._patterns.running.items() if run.repeat]

    # -- the tools' operations ---------------------------------------------------------------

    async def digital_write(self, token: PinToken, level: int) -> PinReading:
        reading = await self._op(token, "output", lambda pins, pin: pins.digital_write(pin, level))
        self._record[reading.pin] = Setting("output", reading.value)
        return reading

    async def pwm_write(self, token: PinToken, duty: float) -> PinReading:
        reading = await self._op(token, "pwm", lambda pins, pin: pins.pwm_write(pin, duty))
        self._record[reading.pin] = Setting("pwm", reading.value)
        return reading

    async def servo_write(self, token: PinToken, angle: int) -> PinReading:
        reading = await self._op(token, "servo", lambda pins, pin: pins.servo_write(pin, angle))
        self._record[reading.pin] = Setting("servo", reading.value)
        return reading

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

    async def _pattern_write(self, pin: int, level: int) -> float:
        async with self._lock:
            reading = await self._guarded(pin, None, lambda pins, p: pins.digital_write(p, level))
            return reading.value

    async def _guarded(self, token: PinToken | None, mode: str | None, fn: Op[T]) -> T:
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
            except BoardError:
                if link.broken is not None and self._link is link:
                    await self._drop(link)
                raise
        raise BoardError(f"The board on {self._settings.port} keeps resetting; check its power.")

    async def _ensure(self) -> Pins:
        """The live pins, recovering from a reset or opening a link as needed (lock held)."""
        link, pins = self._link, self._pins
        if link is not None and pins is not None and link.broken is None:
            if link.reset_pending:
                await self._recover(pins, "The board reset")
            return pins
        if link is not None:
            await self._drop(link)
        settings = self._settings
        opener = functools.partial(
            FirmataLink.open,
            settings.port,
            baud=settings.baud,
            timeout=settings.connect_timeout_s,
            sampling_ms=settings.sampling_interval_ms,
        )
        try:
            link = await self._run(opener)
            pins = Pins(link)
            await self._run(functools.partial(link.guard, pins.adopt))
        except BoardError as exc:
            self.last_error = str(exc)
            raise
        link.listener = functools.partial(_to_loop, asyncio.get_running_loop(), self._heard, link)
        self._link, self._pins, self.last_error = link, pins, None
        if self._record or self._watches:
            await self._put_back(pins, "After reconnecting, the board had lost pinclaw's settings")
        return pins

    async def _recover(self, pins: Pins, why: str) -> None:
        """The board reset: re-read its pins, put back pinclaw's settings, say so."""
        link = pins.link
        ms = self._settings.sampling_interval_ms
        log.warning("the board on %s reset; reading its pins again", link.port)

        def reread() -> None:
            link.recover(ms)
            pins.adopt()

        await self._run(functools.partial(link.guard, reread))
        if not await self._put_back(pins, why):
            self._say(f"{why} (nothing pinclaw had set was lost).")

    async def _put_back(self, pins: Pins, why: str) -> bool:
        put_back = self._settings.restore_after_reset
        restore = functools.partial(self._record.restore, pins, put_back=put_back, why=why)
        text = await self._run(functools.partial(pins.link.guard, restore))
        for sub in self._watches.subs:
            watch = functools.partial(pins.watch, sub.pin, sub.mode)
            await self._run(functools.partial(pins.link.guard, watch))
        self._watches.back()
        if text:
            self._say(text)
        return bool(text)

    def _say(self, text: str) -> None:
        log.warning("%s", text)
        self.last_reset = text
        self._notices.append(text)

    def _heard(self, link: FirmataLink, kind: str, key: int, payload: Any) -> None:
        """On the event loop: a report, a reset or the loss of `link`'s port."""
        if link is not self._link:
            return
        if kind == "reset":
            task = asyncio.create_task(self._recover_now())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif kind == "lost":
            self._watches.lost(str(payload))
            if self._watches and self._reviving is None:
                self._reviving = asyncio.create_task(self._revive())
        else:
            self._watches.report(kind, key, payload)

    async def _recover_now(self) -> None:
        with contextlib.suppress(BoardError):
            async with self._lock:
                await self._ensure()

    async def _revive(self) -> None:
        """Reconnect while pins are watched, so their reports resume without a tool call."""
        try:
            while self._watches:
                try:
                    async with self._lock:
                        await self._ensure()
                    return
                except BoardError:
                    await asyncio.sleep(1.0)
        finally:
            self._reviving = None

    async def _drop(self, link: FirmataLink) -> None:
        if self._link is link:
            self._link, self._pins = None, None
        link.listener = None
        with contextlib.suppress(BoardError):
            await self._run(link.close)

    async def _run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the worker thread; if the thread wedges, abandon it and the link."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="pinclaw-board")
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
            # cancellation that lands as the call completes, and a cancelled pattern then
            # ran on forever, holding close() (seen as a hang under load).
            async with asyncio.timeout(self._settings.connect_timeout_s + 1.0):
                return await future
        except TimeoutError:
            stuck, self._link, self._pins = self._link, None, None
            self._executor.shutdown(wait=False)
            self._executor = None
            if stuck is not None:
                threading.Thread(target=stuck.close, daemon=True).start()
            raise BoardError(
                f"The board on {self._settings.port} did not answer within "
                f"{self._settings.connect_timeout_s:g} s; the next hardware call reconnects."
            ) from None


def _to_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """From the reader thread to the event loop; nothing once the loop is gone."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)
