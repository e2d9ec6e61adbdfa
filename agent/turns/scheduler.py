"""The scheduler: runs what the schedules table says is due, and the heartbeat, as turns of
the chats that set them. One asyncio task in the daemon.

It sleeps until the soonest schedule is due (at most MAX_SLEEP_S, so a schedule made by
another process is seen), and reads the table again each time it wakes: a cancel from
`agent schedules cancel` needs no signal. A run is stored as a message in the chat's inbox
with its trigger, in the same transaction that advances the schedule, so a crash either
loses neither or repeats neither; the chat's runtime answers it like any message (its
allow-list, memories, approvals and outbox), and a reply that is only the silent token
sends nothing.

Late runs: a run found due more than `schedules.catch_up_s` after its time (the daemon was
down, the machine asleep) is skipped — a one-off is marked "skipped", a repeating one moves
to its next time — and the chat is told once; a run less late than that runs once, however
many times a repeating schedule was missed. Pin watches are rows of the same table with no
due time, which the scheduler never reads: agent/turns/pin_watcher.py fires them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sqlite3
import time
from collections.abc import Callable, Mapping
from zoneinfo import ZoneInfo

from agent.config import Settings
from agent.turns.runtime import ChannelRuntime
from agent.turns.schedule_book import owner_chat
from agent.turns.schedules import NewSchedule, Schedule, ScheduleKind, Schedules
from agent.turns.triggers import Trigger, TriggerKind
from channels.base import IncomingMessage, Reply
from tools.schedule_times import WhenError, format_time, latest_cron, next_cron

log = logging.getLogger(__name__)

MAX_SLEEP_S = 30.0
HEARTBEAT_TASK = "Go through HEARTBEAT.md's checklist."


class _Changed(Exception):
    """The schedule was cancelled or advanced while this run was being stored."""


class Scheduler:
    def __init__(
        self,
        schedules: Schedules,
        runtimes: Mapping[str, ChannelRuntime],
        settings: Settings,
        zone: ZoneInfo,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._schedules = schedules
        self._runtimes = dict(runtimes)
        self._settings = settings
        self._zone = zone
        self._clock = clock
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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            self._woken.clear()
            try:
                await self.run_due()
                wait = await self._sleep_s()
            except Exception:  # the store failed: try again later, keep the daemon up
                log.exception("scheduler: reading the schedules failed")
                wait = MAX_SLEEP_S
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._woken.wait()

    async def _due_soonest(self) -> list[Schedule]:
        found = await self._schedules.active(self._runtimes.keys())
        return [s for s in found if s.kind in self._kinds]

    async def _sleep_s(self) -> float:
        soonest = await self._due_soonest()
        if not soonest or soonest[0].next_due is None:
            return MAX_SLEEP_S
        return min(max(soonest[0].next_due - self._clock(), 0.0), MAX_SLEEP_S)

    async def run_due(self) -> None:
        """Run (or skip) every schedule due now, soonest first."""
        now = self._clock()
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
                schedule.id, schedule.set_by, schedule.chat.channel,
            )  # fmt: skip
            note = "the person who set it is no longer allowed"
            await self._skip(schedule, runtime, following, note, tell=None)
            return
        late = now - occurrence
        if late > self._settings.schedules.catch_up_s:
            note = f"due {format_time(occurrence, self._zone)}, missed by {late / 60:.0f} min"
            log.warning("schedule #%d skipped: %s", schedule.id, note)
            tell = None if schedule.kind == "heartbeat" else self._missed_text(schedule, following)
            await self._skip(schedule, runtime, following, note, tell=tell)
            return
        await self._fire(schedule, runtime, occurrence, following, now)

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
        runtime: ChannelRuntime,
        occurrence: float,
        following: float | None,
        now: float,
    ) -> None:
        """Store the run as a message of the chat, with its trigger, and wake the chat."""
        msg = IncomingMessage(
            chat=schedule.chat,
            sender_id=schedule.sender_id,
            sender_name=schedule.sender_name,
            sender_username=schedule.sender_username,
            text=schedule.task,
            is_group=schedule.in_group,
            mentions_bot=True,
            message_id=f"schedule:{schedule.id}:{int(occurrence * 1000)}",  # one per run
        )
        repeats = "" if schedule.kind == "once" else schedule.spec
        kind: TriggerKind = "heartbeat" if schedule.kind == "heartbeat" else "scheduled"
        trigger = Trigger(
            kind, schedule.id, schedule.set_by, schedule.created_at, repeats, occurrence
        )

        def store(conn: sqlite3.Connection) -> None:
            if not self._schedules.advance(conn, schedule, next_due=following, ran_at=now):
                raise _Changed
            runtime.store.inbox.insert(conn, msg, trigger=trigger)

        await self._schedules.db.write(store)
        log.info("schedule #%d due: a turn in %s", schedule.id, schedule.chat.key)
        runtime.wake(schedule.chat.key)

    async def _skip(
        self,
        schedule: Schedule,
        runtime: ChannelRuntime,
        following: float | None,
        note: str,
        *,
        tell: str | None,
    ) -> None:
        """Record the skip (and queue `tell` to the chat, in the same transaction)."""
        parts = None if tell is None else runtime.channel.parts(Reply(tell))
        within = self._settings.channels.delivery_deadline_s

        def store(conn: sqlite3.Connection) -> None:
            if not self._schedules.advance(
                conn, schedule, next_due=following, ran_at=None, note=note
            ):
                raise _Changed
            if parts is not None:
                runtime.store.outbox.insert(
                    conn, schedule.chat, parts, inbox_id=None, deliver_within_s=within
                )

        await self._schedules.db.write(store)
        if tell is not None:
            runtime.courier.wake(schedule.chat.key)

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
        enabled`; none otherwise. Its next time survives restarts."""
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
                NewSchedule("heartbeat", spec, HEARTBEAT_TASK, owner.chat, owner.sender_id,
                            first, sender_name=owner.name)
            )  # fmt: skip
            log.info("heartbeat: every %s in %s", spec.removeprefix("every "), owner.chat.key)
        elif kept[0].spec != spec:
            await self._schedules.update_heartbeat(kept[0].id, spec, first)
