"""The pin-watch tools' book: watches kept as rows of kind "pin" in the schedules table, with
the chat they were set in and the person who asked, like schedules (a watch set in the
terminal fires in the owner's private chat). The tools (tools/proactive/watch_tools.py) know none of
this; the daemon's watcher (agent/proactive/pin_watcher.py) listens to the board for them.

Only the daemon listens to the board over time, so a watch is refused where no watcher runs
(a one-shot in its own process) instead of being kept to fire nobody knows when.
"""

from __future__ import annotations

from typing import Protocol

from agent.config import Settings
from agent.durable.schedules import NewSchedule, Schedule, Schedules
from agent.proactive.schedule_book import placement
from tools.base import ToolCallContext
from tools.proactive.schedule_tools import ScheduleRefused
from tools.proactive.watch_tools import WatchEntry, WatchRefused, WatchSpec

NOT_LIVE = (
    "pin watches run in the daemon, which holds the board: start `agent run` (a one-shot "
    "`agent run -m` then goes through it); this one-shot runs in its own process, which "
    "cannot listen to the board once it ends"
)


class LiveWatches(Protocol):
    """The daemon's pin watcher, as the book uses it."""

    async def track(self, watch: Schedule) -> str:
        """Start listening for a new watch: "" or why it is paused (the board is not there);
        WatchRefused when the board cannot report the pin that way."""
        ...

    def untrack(self, watch_id: int) -> None: ...

    def paused(self, watch_id: int) -> str:
        """Why an active watch hears nothing now, or ""."""
        ...


def watch_entry(row: Schedule, where: str = "", paused: str = "") -> WatchEntry:
    return WatchEntry(
        row.id,
        WatchSpec.from_json(row.spec),
        row.task,
        row.status,
        row.chat.key,
        row.set_by,
        row.runs,
        row.last_run,
        where,
        row.note,
        paused,
    )


class ChatWatches:
    """The WatchBook the tools use: the pin rows of the schedules table, seen from the calling
    chat (the terminal is the owner and sees every chat's)."""

    def __init__(self, schedules: Schedules, settings: Settings) -> None:
        self._schedules = schedules
        self._settings = settings
        self.live: LiveWatches | None = None  # the daemon's watcher, once it runs

    async def add(self, call: ToolCallContext, spec: WatchSpec, task: str) -> WatchEntry:
        if self.live is None:
            raise WatchRefused(NOT_LIVE)
        try:
            at = await placement(self._settings, self._schedules.db, call, "pin watches")
        except ScheduleRefused as exc:
            raise WatchRefused(str(exc)) from None
        limit = self._settings.watches.max_per_chat
        if await self._schedules.count_active(at.chat.key, watches=True) >= limit:
            raise WatchRefused(
                f"this chat already has {limit} active pin watches, the most allowed; cancel "
                "one first (list_watches shows them)"
            )
        row = await self._schedules.add(
            NewSchedule(
                "pin",
                spec.to_json(),
                task,
                at.chat,
                at.sender_id,
                None,
                sender_name=at.sender_name,
                sender_username=at.sender_username,
                in_group=at.in_group,
            )
        )
        try:
            paused = await self.live.track(row)
        except WatchRefused as exc:
            await self._schedules.cancel(row.id, note=f"the board refused it: {exc}")
            raise
        return watch_entry(row, at.where, paused)

    async def entries(self, call: ToolCallContext) -> list[WatchEntry]:
        chat_key = None if _terminal(call) else call.chat_key
        rows = await self._schedules.listing(chat_key, watches=True)
        return [watch_entry(row, paused=self._paused(row)) for row in rows]

    async def cancel(self, call: ToolCallContext, watch_id: int) -> WatchEntry:
        row = await self._schedules.get(watch_id)
        if (
            row is None
            or row.kind != "pin"
            or not (_terminal(call) or row.chat.key == call.chat_key)
        ):
            raise WatchRefused(f"no pin watch #{watch_id} in this chat; list_watches shows them")
        if not await self._schedules.cancel(watch_id, note="cancelled in a chat"):
            raise WatchRefused(f"pin watch #{watch_id} has already ended ({row.status})")
        if self.live is not None:
            self.live.untrack(watch_id)
        return watch_entry(row)

    def _paused(self, row: Schedule) -> str:
        if self.live is None or row.status != "active":
            return ""
        return self.live.paused(row.id)


def _terminal(call: ToolCallContext) -> bool:
    return call.chat_key.startswith("cli:")
