"""The pin watcher: the board's own reports of watched pins become turns of the chats that
set the watches. One per daemon, beside the scheduler.

Each active watch (a schedules row of kind "pin") is a `Board.subscribe`: StandardFirmata
reports an analog input every sampling interval and a digital input when it changes, so
nothing polls the serial port. A `Crossing` decides when a reading fires the watch; a firing
is stored as a message in the chat's inbox with a `Trigger` of kind "pin" carrying the
reading, in the same transaction that counts the run on the row (a row cancelled meanwhile
rolls the message back), and the chat's worker is woken: from there it is a turn like a
schedule's (allow-list, scopes, approvals, outbox).

The rows are read again every SYNC_S (the tools start and stop their watches at once), so
a cancel from `agent schedules cancel` (another process) is seen without a signal, and a
firing is stored only while its row is active. A board that cannot be reached pauses its
watches and each chat is told once; Board reconnects by itself while pins are watched (a
watch whose board was missing at start is retried at each read of the rows), and the chat
hears in one line that its watches listen again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from agent.config import Settings
from agent.durable.file.state_db import Transaction
from agent.durable.schedules import Schedule, Schedules
from agent.durable.triggers import Trigger
from agent.runtime.enqueue import Enqueue
from channels.base import ChatRef, Reply
from tools.background import stop_tasks
from tools.board.board import BoardError, Subscription
from tools.board.fleet import Boards
from tools.board.pin_policy import PinError, describe_value
from tools.config import DEFAULT_BOARD
from tools.proactive.watch_tools import FULL_SCALE, WatchRefused, WatchSpec

log = logging.getLogger(__name__)

SYNC_S = 10.0


@dataclass
class Crossing:
    """When one watch fires, reading by reading.

    "above X" fires on a reading over X while armed, then disarms; it re-arms only once a
    reading falls below X - hysteresis, so a value wavering around X fires once. "below X"
    is the mirror image. "changes" fires on each new level of a digital input; the first
    level heard is where it starts, not a change. A watch starts armed, so a reading that
    already satisfies it when listening begins (the daemon started, the watch was just set)
    fires: nobody was listening before. No firing comes sooner than `min_interval_s` after
    the last: a crossing within it stays armed and fires at the first reading after it, if
    the condition still holds; a change within it is dropped.
    """

    spec: WatchSpec
    armed: bool = True
    level: float | None = None
    last_fired: float | None = None

    def update(self, value: float, now: float) -> bool:
        """True when this reading, at monotonic time `now`, fires the watch."""
        spec = self.spec
        if spec.changes:
            previous, self.level = self.level, value
            return previous is not None and previous != value and self._fire(now)
        if spec.above is not None:
            met, rearm = value > spec.above, value < spec.above - spec.hysteresis
        else:
            assert spec.below is not None
            met, rearm = value < spec.below, value > spec.below + spec.hysteresis
        if rearm:
            self.armed = True
        if met and self.armed and self._fire(now):
            self.armed = False
            return True
        return False

    def _fire(self, now: float) -> bool:
        if self.last_fired is not None and now - self.last_fired < self.spec.min_interval_s:
            return False
        self.last_fired = now
        return True


def reading_text(spec: WatchSpec, value: float) -> str:
    """What the model is told: `light (A0) read 800/1023 (3.91 V), above 700`."""
    if spec.changes:
        return f"{spec.label} went {describe_value('input', value)}"
    return f"{spec.label} read {describe_value('analog', value, FULL_SCALE)}, {spec.condition}"


def notice(watches: list[_Live], paused: str, board: str = "the board") -> str:
    """One message about a chat's watches on `board`: paused (why), or back when `paused`
    is ""."""
    named = [f"#{w.row.id} ({w.spec.label} {w.spec.condition})" for w in watches]
    many = len(named) > 1
    which = f"pin watch{'es' if many else ''} " + (
        f"{', '.join(named[:-1])} and {named[-1]}" if many else named[0]
    )
    if not paused:
        back = f"{board[0].upper()}{board[1:]} is back"
        return f"{back}: {which} {'are' if many else 'is'} listening again."
    return (
        f"I cannot reach {board} ({paused}), so {which} {'are' if many else 'is'} paused; "
        f"{'they resume' if many else 'it resumes'} by itself when {board} is back."
    )


@dataclass(eq=False)
class _Live:
    """A watch being listened to."""

    row: Schedule
    spec: WatchSpec
    crossing: Crossing
    sub: Subscription | None = None
    paused: str = ""  # why the board is not reporting, while it is not
    told: bool = False  # the chat heard it is paused
    board: str = ""  # the board's name, once resolved


class _Gone(Exception):
    """The watch was cancelled while a firing was being stored."""


class PinWatcher:
    def __init__(
        self,
        schedules: Schedules,
        runtimes: Mapping[str, Enqueue],
        boards: Boards,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._schedules = schedules
        self._runtimes = dict(runtimes)
        self._boards = boards
        self._settings = settings
        self._clock = clock
        self._live: dict[int, _Live] = {}
        self._lock = asyncio.Lock()  # one sync or track at a time
        self._task: asyncio.Task[None] | None = None
        self._to_tell: dict[tuple[str, str, str], list[_Live]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # firings and notices under way
        self._stopped = False

    async def start(self) -> None:
        """Listen in the background (a board slow to answer does not hold up the start)."""
        self._task = asyncio.create_task(self._run(), name="pin-watcher")

    async def stop(self) -> None:
        """Stop listening (before the board closes, so its closing is no loss to report)."""
        self._stopped = True
        await stop_tasks(self._task)
        self._task = None
        tasks = list(self._tasks)
        for watch_id in list(self._live):
            self.untrack(watch_id)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except Exception:  # the store failed: try again later, keep the daemon up
                log.exception("pin watcher: reading the watches failed")
            await asyncio.sleep(SYNC_S)

    # -- the rows ------------------------------------------------------------------------------

    async def sync(self) -> None:
        """Listen for every active watch of a running channel, and no other; retry the ones
        the board was not there for."""
        rows = {row.id: row for row in await self._schedules.watches(self._runtimes.keys())}
        async with self._lock:
            for watch_id in set(self._live) - set(rows):
                self.untrack(watch_id)
            for watch_id, row in rows.items():
                live = self._live.get(watch_id)
                if live is not None and live.sub is not None:
                    continue
                try:
                    await self._listen(live or self._adopt(row))
                except WatchRefused as exc:  # the config no longer allows the pin
                    log.warning("pin watch #%d cancelled: %s", watch_id, exc)
                    self.untrack(watch_id)
                    await self._schedules.cancel(watch_id, note=str(exc))

    async def track(self, watch: Schedule) -> str:
        """A watch just set: listen now. "" or why it is paused; WatchRefused when the board
        cannot report its pin that way (the caller cancels the row)."""
        if watch.chat.channel not in self._runtimes:
            raise WatchRefused(f"the {watch.chat.channel} channel is not running in the daemon")
        async with self._lock:
            live = self._live.get(watch.id) or self._adopt(watch)
            live.told = True  # the tool's result says it is paused; the chat needs no notice
            try:
                await self._listen(live, refuse=True)
            except WatchRefused:
                self.untrack(watch.id)
                raise
            return live.paused

    def untrack(self, watch_id: int) -> None:
        live = self._live.pop(watch_id, None)
        if live is not None and live.sub is not None:
            live.sub.cancel()
            log.info("pin watch #%d: no longer listening", watch_id)

    def paused(self, watch_id: int) -> str:
        live = self._live.get(watch_id)
        return live.paused if live is not None else ""

    def _adopt(self, row: Schedule) -> _Live:
        spec = WatchSpec.from_json(row.spec)
        live = _Live(row, spec, Crossing(spec))
        self._live[row.id] = live
        return live

    async def _listen(self, live: _Live, *, refuse: bool = False) -> None:
        """Subscribe the watch's pin (lock held). A pin the config no longer allows is a
        WatchRefused; a board that cannot be reached pauses the watch, and so does one that
        cannot report the pin that way, unless `refuse` (a new watch): then WatchRefused."""
        spec = live.spec
        names = self._boards.names
        only = next(iter(names.policies)) if not names.several else DEFAULT_BOARD
        try:
            use = "analog" if spec.mode == "analog" else "read"
            target = names.resolve(spec.pin, use, spec.board or only)
        except PinError as exc:
            where = "the boards" if names.several else "[hardware]"
            raise WatchRefused(f"{exc} ({where} in config.toml)") from None
        live.board = target.board
        board = self._boards[target.board]
        try:
            await board.connect()
        except BoardError as exc:
            return self._pause(live, str(exc))
        try:
            live.sub = await board.subscribe(
                spec.pin,
                spec.mode,
                lambda _pin, value: self._heard(live, value),
                lambda reason: self._pause(live, reason),
            )
        except BoardError as exc:
            if refuse:
                raise WatchRefused(str(exc)) from None
            return self._pause(live, str(exc))
        if live.paused:
            self._resume(live)
        live.told = False
        log.info("pin watch #%d: listening to %s (%s)", live.row.id, spec.label, spec.condition)

    # -- the board's reports (on the event loop) ------------------------------------------------

    def _heard(self, live: _Live, value: float) -> None:
        if self._live.get(live.row.id) is not live:
            return
        if live.paused:  # the board reconnected, and Board subscribed again by itself
            self._resume(live)
        if live.crossing.update(value, self._clock()):
            self._spawn(self._fire(live, value))

    def _pause(self, live: _Live, reason: str) -> None:
        """The board is gone (or refuses the pin): the watch hears nothing; its chat is told
        once, together with its other watches paused by the same loss."""
        if self._stopped or self._live.get(live.row.id) is not live:
            return
        live.paused = reason
        if not live.told:
            live.told = True
            log.warning("pin watch #%d paused: %s", live.row.id, reason)
            self._notify(live, reason)

    def _resume(self, live: _Live) -> None:
        """Listening again: a chat that was told of the pause is told of the end of it."""
        told, live.paused, live.told = live.told, "", False
        log.info("pin watch #%d: listening again", live.row.id)
        if told:
            self._notify(live, "")

    def _notify(self, live: _Live, paused: str) -> None:
        """Queue a notice (paused, or back when `paused` is ""); those of one moment go to
        each chat as one message."""
        if not self._to_tell:
            asyncio.get_running_loop().call_soon(self._flush)
        self._to_tell.setdefault((live.row.chat.key, live.board, paused), []).append(live)

    def _flush(self) -> None:
        batches, self._to_tell = self._to_tell, {}
        several = self._boards.names.several
        for (_, board, paused), watches in batches.items():
            text = notice(watches, paused, board if several else "the board")
            self._spawn(self._tell(watches[0].row.chat, text))

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tell(self, chat: ChatRef, text: str) -> None:
        await self._runtimes[chat.channel].queue_reply(chat, Reply(text))

    async def _fire(self, live: _Live, value: float) -> None:
        """Store the firing as a message of the chat, with its trigger, and wake the chat."""
        row, now = live.row, time.time()
        runtime = self._runtimes[row.chat.channel]
        if not runtime.is_allowed_sender(row.sender_id, row.sender_username):
            log.warning(
                "pin watch #%d not fired: %s is no longer on the %s allow-list",
                row.id,
                row.set_by,
                row.chat.channel,
            )
            return
        reading = reading_text(live.spec, value)
        msg = row.message(f"pin:{row.id}:{int(now * 1000)}")
        trigger = Trigger("pin", row.id, row.set_by, row.created_at, "", now, reading)

        def advance(conn: Transaction) -> None:
            if not self._schedules.advance(conn, row, next_due=None, ran_at=now, status="active"):
                raise _Gone

        try:
            await runtime.enqueue_triggered(msg, trigger, alongside=advance)
        except _Gone:
            log.info("pin watch #%d was cancelled; not fired", row.id)
            self.untrack(row.id)
            return
        log.info("pin watch #%d fired (%s): a turn in %s", row.id, reading, row.chat.key)
