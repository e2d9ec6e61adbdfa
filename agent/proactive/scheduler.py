"""The scheduler: runs what the schedules table says is due, and the heartbeat, as turns of
the chats that set them. One asyncio task in the daemon.

It sleeps until the soonest schedule is due (at most MAX_SLEEP_S, so a schedule made by
another process is seen), and reads the table again each time it wakes: a cancel from
`agent schedules cancel` needs no signal. A run is stored as a message in the chat's inbox
with its trigger, in the same transaction that advances the schedule, so a crash either
loses neither or repeats neither; the chat's runtime answers it like any message (its
allow-list, memories, approvals and outbox), and a reply that is only the silent token
sends nothing.

Late runs: a run that came due more than `schedules.catch_up_s` before the scheduler was
running (the daemon was down, the machine asleep) is skipped — a one-off is marked
"skipped", a repeating one moves to its next time — and the chat is told once; a run less
late than that runs once, however many times a repeating schedule was missed. Pin watches
are rows of the same table with no due time, which the scheduler never reads:
agent/proactive/pin_watcher.py fires them.

Clock steps: each time it wakes, the scheduler compares how far the wall clock moved with
how far a steady clock did (CLOCK_BOOTTIME, which counts a machine's sleep and is never
stepped). A wall clock stepped forward while it ran is not downtime: what came due in the
jump runs late, without "I was not running". A steady gap longer than the longest sleep is
downtime (asleep, stopped). A step back moves every cron and heartbeat row that is now due
later than its rule allows to its next time from now — also at start, for a step while down —
so an every-minute schedule does not wait for the lost hour to pass again. Whatever the
clock did, a repeating schedule this process ran does not run again before its period (less
STEP_S) has passed on the steady clock: a step of half a minute, either way, would otherwise
run an every-minute schedule twice within seconds; its next time moves on quietly instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from zoneinfo import ZoneInfo

from agent.config import Settings
from agent.durable.file.state_db import Transaction
from agent.durable.schedules import NewSchedule, Schedule, ScheduleKind, Schedules
from agent.durable.store import Claims, OneProcess
from agent.durable.triggers import Trigger, TriggerKind
from agent.proactive.schedule_book import owner_chat
from agent.runtime.enqueue import Enqueue
from channels.base import Reply
from tools.background import stop_tasks
from tools.proactive.schedule_times import WhenError, format_time, latest_cron, next_cron

log = logging.getLogger(__name__)

MAX_SLEEP_S = 30.0
STEP_S = 5.0  # the wall clock moving this much more (or less) than the steady one: a step
DOWN_AFTER_S = MAX_SLEEP_S + 60.0  # steady time between two looks past this: not running
HEARTBEAT_TASK = "Go through HEARTBEAT.md's checklist."


def steady_clock() -> float:
    """Seconds that also pass while the machine sleeps, never stepped (CLOCK_BOOTTIME on
    Linux; elsewhere the monotonic clock, which may stop while asleep)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class _Changed(Exception):
    """The schedule was cancelled or advanced while this run was being stored."""


class Scheduler:
    def __init__(
        self,
        schedules: Schedules,
        runtimes: Mapping[str, Enqueue],
        settings: Settings,
        zone: ZoneInfo,
        *,
        clock: Callable[[], float] = time.time,
        steady: Callable[[], float] = steady_clock,
        claims: Claims | None = None,
    ) -> None:
        self._schedules = schedules
        self._claims = claims or OneProcess()  # processes sharing the store: one places it
        self._runtimes = dict(runtimes)
        self._settings = settings
        self._zone = zone
        self._clock = clock
        self._steady = steady
        self._last_look: tuple[float, float] | None = None  # (wall, steady) when last awake
        self._running_since = 0.0  # wall time since which it has run without a gap
        self._fired: dict[int, tuple[float, float]] = {}  # repeating row: (steady, period)
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        kinds: set[ScheduleKind] = {"heartbeat"} if settings.heartbeat.enabled else set()
        self._kinds = kinds | ({"once", "cron"} if settings.schedules.enabled else set())

    def wake(self) -> None:
        """Something changed (a schedule was made): look at the table again now."""
        self._woken.set()

    async def start(self) -> None:
        await self.place_heartbeat()
        self._task = asyncio.create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        await stop_tasks(self._task)
        self._task = None

    async def _run(self) -> None:
        health = self._schedules.db.health
        while True:
            self._woken.clear()
            try:
                await self.run_due()
                wait = MAX_SLEEP_S if health.full else await self._sleep_s()
            except Exception as exc:  # the store failed: try again later, keep the daemon up
                if not health.failed(exc):  # a full disk is said there, once a minute
                    log.exception("scheduler: reading the schedules failed")
                wait = MAX_SLEEP_S
            with contextlib.suppress(TimeoutError):  # a full disk: until there is room
                async with asyncio.timeout(wait):
                    await (health.writable() if health.full else self._woken.wait())

    async def _due_soonest(self) -> list[Schedule]:
        found = await self._schedules.active(self._runtimes.keys())
        return [s for s in found if s.kind in self._kinds]

    async def _sleep_s(self) -> float:
        soonest = await self._due_soonest()
        if not soonest or soonest[0].next_due is None:
            return MAX_SLEEP_S
        return min(max(soonest[0].next_due - self._clock(), 0.0), MAX_SLEEP_S)

    async def run_due(self) -> None:
        """Run (or skip) every schedule due now, soonest first (none while the disk is full:
        they run when there is room, late, not skipped)."""
        now, stepped_back = self._look()
        if self._schedules.db.health.full:
            return
        if stepped_back:
            await self._recompute(now)
        for schedule in await self._due_soonest():
            if schedule.next_due is None or schedule.next_due > now:
                break
            try:
                await self._run_one(schedule, now)
            except _Changed:
                log.info("schedule #%d changed while it came due; left as it is", schedule.id)
            except WhenError as exc:  # a row edited by hand: it would block the others
                log.error("schedule #%d cancelled: %s", schedule.id, exc)
                await self._schedules.cancel(schedule.id, note=f"cannot run: {exc}")

    async def _run_one(self, schedule: Schedule, now: float) -> None:
        runtime = self._runtimes[schedule.chat.channel]
        occurrence = self._latest(schedule, now)
        following = self._following(schedule, now, occurrence)
        if not runtime.is_allowed_sender(schedule.sender_id, schedule.sender_username):
            log.warning(
                "schedule #%d skipped: %s is no longer on the %s allow-list",
                schedule.id,
                schedule.set_by,
                schedule.chat.channel,
            )
            note = "the person who set it is no longer allowed"
            await self._skip(schedule, runtime, following, note, tell=None)
            return
        late = min(now, self._running_since) - occurrence  # due before we ran: missed
        if late > self._settings.schedules.catch_up_s:
            note = f"due {format_time(occurrence, self._zone)}, missed by {late / 60:.0f} min"
            log.warning("schedule #%d skipped: %s", schedule.id, note)
            tell = None if schedule.kind == "heartbeat" else self._missed_text(schedule, following)
            await self._skip(schedule, runtime, following, note, tell=tell)
            return
        spaced = self._spaced(schedule, now)
        if spaced is not None:
            log.warning(
                "schedule #%d: too soon after its last run (the clock stepped); next at %s",
                schedule.id,
                format_time(spaced, self._zone),
            )
            note = "too soon after its last run (the clock stepped)"
            await self._skip(schedule, runtime, spaced, note, tell=None)
            return
        await self._fire(schedule, runtime, occurrence, following, now)
        if schedule.kind in ("cron", "heartbeat"):
            self._fired[schedule.id] = (self._steady(), self._period(schedule, occurrence))

    def _period(self, schedule: Schedule, occurrence: float) -> float:
        """How far apart a repeating schedule's runs are, at `occurrence`."""
        if schedule.kind == "heartbeat":
            return self._heartbeat_interval_s
        return next_cron(schedule.spec, self._zone, occurrence) - occurrence

    def _spaced(self, schedule: Schedule, now: float) -> float | None:
        """For a repeating row this process ran less than its period ago (steady time; the
        wall clock stepped meanwhile): the first time of its rule far enough from that run.
        None when it may run now."""
        fired = self._fired.get(schedule.id)
        if fired is None:
            return None
        since, period = self._steady() - fired[0], fired[1]
        if since >= period - STEP_S:
            return None
        at: float | None = now
        while at is not None and at - now + since < period - STEP_S:
            at = self._following(schedule, at, at)
        return at

    def _look(self) -> tuple[float, bool]:
        """The wall time now, and whether it stepped back since the last look (the first
        look counts as one: a step back while down is found the same way)."""
        wall, steady = self._clock(), self._steady()
        last, self._last_look = self._last_look, (wall, steady)
        if last is None:
            self._running_since = wall
            return wall, True
        passed = steady - last[1]
        step = wall - last[0] - passed
        if passed > DOWN_AFTER_S:  # asleep or stopped: what came due meanwhile was missed
            self._running_since = wall
        elif step > STEP_S:
            log.warning(
                "scheduler: the clock stepped forward %.0f s; what came due runs late", step
            )
        if step < -STEP_S:
            log.warning(
                "scheduler: the clock stepped back %.0f s; repeating times recomputed", -step
            )
            self._running_since = min(self._running_since, wall)
            return wall, True
        return wall, False

    async def _recompute(self, now: float) -> None:
        """Cron and heartbeat rows due later than their rule allows from `now` (the clock
        stepped back) move to their next time from now."""
        for schedule in await self._due_soonest():
            if schedule.next_due is None or schedule.kind not in ("cron", "heartbeat"):
                continue
            try:
                soonest = self._following(schedule, now, now)
            except WhenError:
                continue  # _run_one cancels it with the reason when it comes due
            if soonest is not None and schedule.next_due > soonest + 1:
                await self._schedules.move(schedule, soonest)
                log.info("schedule #%d: next at %s", schedule.id, format_time(soonest, self._zone))

    def _latest(self, schedule: Schedule, now: float) -> float:
        """The last time at or before `now` this schedule was due."""
        due = schedule.next_due
        assert due is not None
        if schedule.kind == "cron":
            return max(due, latest_cron(schedule.spec, self._zone, now))
        if schedule.kind == "heartbeat":
            interval = self._heartbeat_interval_s
            return due + math.floor((now - due) / interval) * interval
        return due

    def _following(self, schedule: Schedule, now: float, occurrence: float) -> float | None:
        if schedule.kind == "cron":
            return next_cron(schedule.spec, self._zone, now)
        if schedule.kind == "heartbeat":
            return occurrence + self._heartbeat_interval_s
        return None

    @property
    def _heartbeat_interval_s(self) -> float:
        return self._settings.heartbeat.interval_minutes * 60

    async def _fire(
        self,
        schedule: Schedule,
        runtime: Enqueue,
        occurrence: float,
        following: float | None,
        now: float,
    ) -> None:
        """Store the run as a message of the chat, with its trigger, and wake the chat."""
        msg = schedule.message(f"schedule:{schedule.id}:{int(occurrence * 1000)}")  # one a run
        repeats = "" if schedule.kind == "once" else schedule.spec
        kind: TriggerKind = "heartbeat" if schedule.kind == "heartbeat" else "scheduled"
        trigger = Trigger(
            kind, schedule.id, schedule.set_by, schedule.created_at, repeats, occurrence
        )

        def advance(conn: Transaction) -> None:
            if not self._schedules.advance(conn, schedule, next_due=following, ran_at=now):
                raise _Changed

        await runtime.enqueue_triggered(msg, trigger, alongside=advance)
        log.info("schedule #%d due: a turn in %s", schedule.id, schedule.chat.key)

    async def _skip(
        self,
        schedule: Schedule,
        runtime: Enqueue,
        following: float | None,
        note: str,
        *,
        tell: str | None,
    ) -> None:
        """Record the skip (and queue `tell` to the chat, in the same transaction)."""

        def advance(conn: Transaction) -> None:
            if not self._schedules.advance(
                conn, schedule, next_due=following, ran_at=None, note=note
            ):
                raise _Changed

        if tell is None:
            await self._schedules.db.write(advance)
        else:
            await runtime.queue_reply(schedule.chat, Reply(tell), alongside=advance)

    def _missed_text(self, schedule: Schedule, following: float | None) -> str:
        due = schedule.next_due or 0.0
        hours = self._settings.schedules.catch_up_s / 3600
        text = (
            f'Skipped scheduled task #{schedule.id} ("{schedule.task}"): it was due '
            f"{format_time(due, self._zone)}, and I was not running then nor in the "
            f"{hours:g} h after."
        )
        if following is not None:
            text += f" It runs again {format_time(following, self._zone)}."
        return text

    async def place_heartbeat(self) -> None:
        """One active heartbeat row, in the owner's private chat, when `[heartbeat]
        enabled`; none otherwise. Its next time survives restarts. Among processes sharing
        the store, the one holding the role places it (two starting together would each
        find none and add one); every process runs the row when it is due, once."""
        if self._settings.heartbeat.enabled and not await self._claims.take("role", "heartbeat"):
            return
        now = self._clock()
        rows = await self._schedules.active(kind="heartbeat")
        owner = None
        if self._settings.heartbeat.enabled:
            owner = await owner_chat(self._settings, self._schedules.db, self._runtimes.keys())
            if owner is None:
                log.warning(
                    "heartbeat: enabled, but no private chat of the owner is known: add "
                    '[people.NAME] owner = true with telegram = "<id>" (or write to the bot '
                    "once on Discord)"
                )
        kept = [r for r in rows if owner and (r.chat, r.sender_id) == (owner.chat, owner.sender_id)]
        for row in rows:
            if row not in kept[:1]:
                await self._schedules.cancel(row.id, note="heartbeat disabled or moved")
        if owner is None:
            return
        spec = f"every {self._settings.heartbeat.interval_minutes:g} minutes"
        first = now + self._heartbeat_interval_s
        if not kept:
            await self._schedules.add(
                NewSchedule(
                    "heartbeat",
                    spec,
                    HEARTBEAT_TASK,
                    owner.chat,
                    owner.sender_id,
                    first,
                    sender_name=owner.name,
                )
            )
            log.info("heartbeat: every %s in %s", spec.removeprefix("every "), owner.chat.key)
        elif kept[0].spec != spec:
            await self._schedules.update_heartbeat(kept[0].id, spec, first)
