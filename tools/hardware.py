"""The Arduino behind the hardware tools: one StandardFirmata connection over USB serial.

`Board` decides when the Firmata link (tools/firmata.py) runs: it connects lazily, gives up
after `connect_timeout_s`, runs all serial I/O on one worker thread and admits one operation
at a time with an asyncio lock, so the event loop never waits on the port. A port that
vanishes fails the current call, and the next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tools.board_types import MODE_CODES, BoardError, BoardInfo, PinInfo, PinReading, PinToken
from tools.config import HardwareSettings
from tools.firmata import FirmataLink

__all__ = ["Board", "BoardError", "BoardInfo", "PinInfo", "PinReading"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Board:
    """The one Firmata board of a runtime, connected lazily and reconnected after a loss.

    `connect()` raises BoardError when there is no usable board; `describe()` returns None
    instead and leaves the reason in `last_error`. `close()` stops running patterns too.
    """

    def __init__(self, settings: HardwareSettings) -> None:
        self._settings = settings
        self._lock = asyncio.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._link: FirmataLink | None = None
        self._patterns: dict[int, asyncio.Task[None]] = {}
        self.last_error: str | None = None

    async def connect(self) -> None:
        async with self._lock:
            await self._ensure_link()

    async def close(self) -> None:
        tasks = list(self._patterns.values())
        self._patterns.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with self._lock:
            link, self._link = self._link, None
            if link is not None:
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
            link = await self._ensure_link()
            return await self._run(link.info)

    @property
    def patterns(self) -> dict[int, str]:
        """Pins with a pattern running, and the pattern's name."""
        return {pin: task.get_name() for pin, task in self._patterns.items() if not task.done()}

    async def digital_write(self, token: PinToken, level: int) -> int:
        return await self._op(token, "output", lambda link, pin: link.digital_write(pin, level))

    async def pwm_write(self, token: PinToken, duty: float) -> int:
        return await self._op(token, "pwm", lambda link, pin: link.pwm_write(pin, duty))

    async def servo_write(self, token: PinToken, angle: int) -> int:
        return await self._op(token, "servo", lambda link, pin: link.servo_write(pin, angle))

    async def analog_read(self, token: PinToken) -> PinReading:
        return await self._op(token, "analog", lambda link, pin: link.analog_read(pin))

    async def digital_read(
        self, token: PinToken, *, pullup: bool = False, as_output: bool = False
    ) -> PinReading:
        """Read a pin as an input, or, for a pin pinclaw drives (or one wired as an output),
        report its state without switching it to input, which would cut off what it drives.
        """
        mode = "input_pullup" if pullup else "input"
        async with self._lock:
            link = await self._ensure_link()
            pin = link.pin_of(token)
            if as_output or pin in link.driven:
                return await self._guarded(link, lambda lk, p: lk.pin_state(p), pin)
            link.check(pin, mode)
            self._stop_pattern(pin)
            return await self._guarded(
                link, lambda lk, p: lk.digital_read(p, MODE_CODES[mode]), pin
            )

    async def start_pattern(
        self, token: PinToken, name: str, steps: Sequence[tuple[int, float]], repeat: int
    ) -> int:
        """Run (level, seconds) steps on the host, `repeat` times, or until stopped if 0."""
        async with self._lock:
            link = await self._ensure_link()
            pin = link.pin_of(token)
            link.check(pin, "output")
            self._stop_pattern(pin)
            task = asyncio.create_task(self._pattern(pin, tuple(steps), repeat), name=name)
            self._patterns[pin] = task
            return pin

    async def _op(self, token: PinToken, mode: str, fn: Callable[[FirmataLink, int], T]) -> T:
        async with self._lock:
            link = await self._ensure_link()
            pin = link.pin_of(token)
            link.check(pin, mode)  # refused before anything is written
            self._stop_pattern(pin)
            return await self._guarded(link, fn, pin)

    def _stop_pattern(self, pin: int) -> None:
        # Called with the lock held: a cancelled pattern cannot write again, as every write
        # needs the lock and the task wakes to its CancelledError first.
        task = self._patterns.pop(pin, None)
        if task is not None:
            task.cancel()

    async def _pattern(self, pin: int, steps: tuple[tuple[int, float], ...], repeat: int) -> None:
        loop = asyncio.get_running_loop()
        due, done = loop.time(), 0
        try:
            while repeat == 0 or done < repeat:
                for level, seconds in steps:
                    async with self._lock:
                        link = await self._ensure_link()
                        write = functools.partial(FirmataLink.digital_write, level=level)
                        await self._guarded(link, write, pin)
                    due += seconds
                    await asyncio.sleep(max(0.0, due - loop.time()))
                done += 1
        except BoardError as exc:
            self.last_error = str(exc)
            log.warning("pattern on pin %d stopped: %s", pin, exc)
        finally:
            if self._patterns.get(pin) is asyncio.current_task():
                del self._patterns[pin]

    async def _ensure_link(self) -> FirmataLink:
        """The live link, opening one if there is none or the last one broke (lock held)."""
        link = self._link
        if link is not None and link.broken is None:
            return link
        self._link = None
        if link is not None:
            with contextlib.suppress(BoardError):
                await self._run(link.close)
        settings = self._settings
        opener = functools.partial(
            FirmataLink.open,
            settings.port,
            baud=settings.baud,
            timeout=settings.connect_timeout_s,
            sampling_ms=settings.sampling_interval_ms,
        )
        try:
            self._link = await self._run(opener)
        except BoardError as exc:
            self.last_error = str(exc)
            raise
        self.last_error = None
        return self._link

    async def _guarded(self, link: FirmataLink, fn: Callable[[FirmataLink, int], T], pin: int) -> T:
        """Run one operation; a serial error or silence drops the link for the next call."""
        try:
            return await self._run(functools.partial(link.guard, fn, pin))
        except BoardError:
            if link.broken is not None and self._link is link:
                self._link = None
                with contextlib.suppress(BoardError):
                    await self._run(link.close)
            raise

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
            stuck, self._link = self._link, None
            self._executor.shutdown(wait=False)
            self._executor = None
            if stuck is not None:
                threading.Thread(target=stuck.close, daemon=True).start()
            raise BoardError(
                f"The board on {self._settings.port} did not answer within "
                f"{self._settings.connect_timeout_s:g} s; the next hardware call reconnects."
            ) from None
