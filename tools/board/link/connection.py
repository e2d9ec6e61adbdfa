"""Keeping a board's link: opening it, recovering from resets, getting it back after a loss.

`Connection` is the lower half of a Board (tools/board/board.py): the link
(tools/board/link/firmata_link.py) and its pins, the one worker thread (tools/board/link/worker.py)
and the lock that admits one operation at a time. It connects lazily, gives up after
`connect_timeout_s`, and while something depends on the link (watched pins, safe states, a
daemon holding it) reconnects in the background with backoff. A network link that falls
silent is probed, so a half-open connection is noticed within `heartbeat_s` plus
`connect_timeout_s`. Each new link and each reset first puts the safe pins in their safe
state (tools/board/safe_states.py), then gives back what pinclaw had set
(tools/board/restore.py); the next tool result says so.

When several pinclaw processes share a store, `claim` is this board's claim among them: a link
is opened only by the process that holds it (what pinclaw set is each process's own, so two
processes must not drive one board), and it is never let go while the process runs. The
others' calls are refused with a line saying so, and their background reconnects take the
board over once its holder has died.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tools.board.link.firmata_link import FirmataLink
from tools.board.link.firmata_types import BoardError, PinToken
from tools.board.link.reports import Watches
from tools.board.link.worker import Worker, to_loop
from tools.board.pins import Pins
from tools.board.restore import Record
from tools.board.safe_states import Applied, SafeStates
from tools.config import DEFAULT_BOARD, BoardSettings, network_port

log = logging.getLogger(__name__)
T = TypeVar("T")
REVIVE_FIRST_S, REVIVE_MAX_S = 0.5, 30.0  # background reconnects: doubling between these
OnApplied = Callable[[str, list[Applied]], None]  # (why, what pinclaw set by itself)
Claim = Callable[[], Awaitable[bool]]  # this board's claim among processes: held now?


class Connection:
    """One board's link, kept: `_ensure()` (lock held) gives the live pins or a BoardError.
    `on_applied` hears what pinclaw set by itself, `on_reading` every reading of a watched
    pin."""

    def __init__(self, settings: BoardSettings, *, name: str = DEFAULT_BOARD) -> None:
        self._settings = settings
        self.name = name
        self._lock = asyncio.Lock()
        limit_s = settings.connect_timeout_s + 1.0
        self._worker = Worker(limit_s, self._abandon, self._wedged, "pinclaw-board")
        self._link: FirmataLink | None = None
        self._pins: Pins | None = None
        self._record = Record()
        self._safe = SafeStates(settings)
        self._watches = Watches()
        self._notices: list[str] = []
        self._reviving: asyncio.Task[None] | None = None
        self._probing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._links = 0  # links made so far: the first is the start
        self._closing = False  # closed: nothing reconnects in the background any more
        self.on_applied: OnApplied | None = None
        self.on_reading: Callable[[PinToken, float], None] | None = None
        self.stay_connected = False  # a daemon holds the board: reconnect in the background
        self.claim: Claim | None = None  # processes share the store: only its holder connects
        self.last_error: str | None = None
        self.last_reset = ""  # what the last reset did to pinclaw's settings

    @property
    def settings(self) -> BoardSettings:
        return self._settings

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.broken is None

    async def connect(self) -> None:
        async with self._lock:
            await self._ensure()

    @property
    def has_safe_states(self) -> bool:
        return bool(self._safe)

    def keep_up(self) -> None:
        """Connect in the background now and whenever the link is lost (backoff between
        tries), for as long as something needs it."""
        self.stay_connected = True
        if not self.connected and self._reviving is None:
            self._reviving = asyncio.create_task(self._revive(), name=f"{self.name} connect")

    def take_notice(self) -> str:
        """What happened to the board since the last tool result (a reset, a restore)."""
        notices, self._notices = self._notices, []
        return " ".join(notices)

    async def _let_go(self) -> None:
        """Stop reconnecting and probing, set the safe states, close the link (at stop)."""
        self._closing = True
        for task in (self._reviving, self._probing):
            if task is not None:
                task.cancel()
        for sub in list(self._watches.subs):
            sub.cancel()
        async with self._lock:
            link, pins = self._link, self._pins
            if link is not None and pins is not None and link.broken is None and self._safe:
                with contextlib.suppress(BoardError):
                    await self._set_safe(pins, "safe state at stop")
            self._link, self._pins = None, None
            if link is not None:
                link.listener = None
                with contextlib.suppress(BoardError):
                    await self._worker.run(link.close)
            self._worker.shutdown()

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
        if self.claim is not None and not await self.claim():
            self.last_error = (
                f"board {self.name} is driven by another pinclaw process sharing this store "
                "(`agent doctor` names it); its calls run there, and this process takes the "
                "board over if that one stops"
            )
            raise BoardError(self.last_error)
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
        loop = asyncio.get_running_loop()
        link.listener = functools.partial(to_loop, loop, self._heard, link)
        self._link, self._pins, self.last_error = link, pins, None
        first, self._links = not self._links, self._links + 1
        if network_port(settings.port) and settings.heartbeat_s:
            self._probing = asyncio.create_task(self._heartbeat(link), name=f"{self.name} alive")
        why = "After reconnecting, the board had lost pinclaw's settings"
        source = "safe state at start" if first else "safe state after a loss"
        await self._set_safe(pins, source, "" if first else "After reconnecting")
        if self._record or self._watches:
            await self._put_back(pins, why)
        return pins

    async def _recover(self, pins: Pins, why: str) -> None:
        """The board reset: re-read its pins, set the safe ones, put back pinclaw's other
        settings, say so."""
        link = pins.link
        ms = self._settings.sampling_interval_ms
        log.warning("the board on %s reset; reading its pins again", link.port)

        def reread() -> None:
            link.recover(ms)
            pins.adopt()

        await self._run(functools.partial(link.guard, reread))
        safe = await self._set_safe(pins, "safe state after a reset", why)
        if not await self._put_back(pins, why) and not safe:
            self._say(f"{why} (nothing pinclaw had set was lost).")

    async def _set_safe(self, pins: Pins, source: str, why: str = "") -> bool:
        """Put the safe pins in their safe state (lock held); `why`: say so in the next
        tool result. True when there were any."""
        if not self._safe:
            return False
        apply = functools.partial(self._safe.apply, pins)
        applied = await self._run(functools.partial(pins.link.guard, apply))
        for item in applied:
            if not item.failed:
                self._record[item.pin] = item.setting  # not put back: it stays safe
        log.info("%s: %s", source, "; ".join(item.text for item in applied))
        if why:
            states = "states" if len(applied) > 1 else "state"
            self._say(
                f"{why}, pinclaw set the safe {states}: {', '.join(i.text for i in applied)}."
            )
        self._tell(source, applied)
        return True

    async def _put_back(self, pins: Pins, why: str) -> bool:
        put_back = self._settings.restore_after_reset
        restore = functools.partial(self._record.restore, pins, put_back=put_back, why=why)
        text, done = await self._run(functools.partial(pins.link.guard, restore))
        for sub in self._watches.subs:
            watch = functools.partial(pins.watch, sub.pin, sub.mode)
            await self._run(functools.partial(pins.link.guard, watch))
        self._watches.back()
        if text:
            self._say(text)
        outputs = [(pin, s) for pin, s in done if s.mode in ("output", "pwm", "servo")]
        self._tell("restored", [Applied(p, s, self._safe.label(pins, p)) for p, s in outputs])
        return bool(text)

    def _tell(self, source: str, applied: list[Applied]) -> None:
        if applied and self.on_applied is not None:
            self.on_applied(source, applied)

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
            if self._needs_link and self._reviving is None:
                self._reviving = asyncio.create_task(self._revive())
        else:
            for token, value in self._watches.report(kind, key, payload):
                if self.on_reading is not None:
                    self.on_reading(token, value)

    @property
    def _needs_link(self) -> bool:
        wanted = bool(self._watches) or bool(self._safe) or self.stay_connected
        return wanted and not self._closing

    async def _recover_now(self) -> None:
        with contextlib.suppress(BoardError):
            async with self._lock:
                await self._ensure()

    async def _revive(self) -> None:
        """Reconnect while something needs the link, waiting longer after each failure, so
        watches resume and safe states are set without a tool call."""
        wait = REVIVE_FIRST_S
        try:
            while self._needs_link:
                try:
                    async with self._lock:
                        await self._ensure()
                    return
                except BoardError as exc:
                    log.info(
                        "board %s not reachable yet (next try in %g s): %s", self.name, wait, exc
                    )
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, REVIVE_MAX_S)
        finally:
            self._reviving = None

    async def _heartbeat(self, link: FirmataLink) -> None:
        """While `link` is the board's: when it has been silent for `heartbeat_s`, ask for a
        sign of life; no answer within `connect_timeout_s` marks it lost."""
        every = self._settings.heartbeat_s
        while self._link is link and link.broken is None:
            await asyncio.sleep(max(0.05, every - (time.monotonic() - link.last_heard)))
            if time.monotonic() - link.last_heard < every or self._lock.locked():
                continue
            async with self._lock:
                if self._link is not link:
                    return
                try:
                    sync = functools.partial(link.ask, None)
                    await self._run(functools.partial(link.guard, sync))
                except BoardError as exc:
                    log.warning("board %s stopped answering: %s", self.name, exc)
                    await self._drop(link)

    async def _drop(self, link: FirmataLink) -> None:
        if self._link is link:
            self._link, self._pins = None, None
        link.listener = None
        with contextlib.suppress(BoardError):
            await self._run(link.close)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await self._worker.run(fn)

    def _abandon(self) -> None:
        """The worker thread wedged: let go of its link too."""
        stuck, self._link, self._pins = self._link, None, None
        if stuck is not None:
            threading.Thread(target=stuck.close, daemon=True).start()

    def _wedged(self) -> BoardError:
        return BoardError(
            f"The board on {self._settings.port} did not answer within "
            f"{self._settings.connect_timeout_s:g} s; the next hardware call reconnects."
        )
