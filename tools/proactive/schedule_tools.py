"""The schedule tools: schedule_task, list_schedules and cancel_schedule.

Where schedules are kept and how they run is the runtime's business: it hands in a
`ScheduleBook` (agent/durable/schedules.py keeps them in state.db, and the daemon's scheduler
runs them as turns of the chat that set them). Here are the tools the model calls, `when`
read in the configured time zone (tools/proactive/schedule_times.py), and answers it can act on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from zoneinfo import ZoneInfo

from tools.base import FunctionTool, Tool, ToolCallContext, ToolResult
from tools.proactive.kept_tasks import BookRefused, ended_note, listing, task_refusal
from tools.proactive.schedule_times import When, WhenError, format_time, parse_when, zone_named
from tools.tool_groups import Action, ToolGroup


@dataclass(frozen=True)
class ScheduleEntry:
    """One schedule as the tools and `agent schedules` show it."""

    id: int
    kind: str  # "once", "cron" or "heartbeat"
    spec: str  # the time (ISO-8601), the cron expression, or the heartbeat's interval
    task: str
    status: str  # "active", "done", "cancelled" or "skipped"
    next_due: float | None  # UTC epoch; None once nothing more is due
    chat_key: str
    set_by: str
    where: str = ""  # where its turns run, in words ("this chat", "the owner's Telegram DM")
    note: str = ""  # why it was skipped, when it was


class ScheduleRefused(BookRefused):
    """The schedule book's refusal."""


class ScheduleBook(Protocol):
    async def add(self, call: ToolCallContext, when: When, task: str) -> ScheduleEntry:
        """Keep a new schedule for the chat of `call` (or raise ScheduleRefused)."""
        ...

    async def entries(self, call: ToolCallContext) -> list[ScheduleEntry]:
        """The schedules `call` may see, active ones first, then the newest ended ones."""
        ...

    async def cancel(self, call: ToolCallContext, schedule_id: int) -> ScheduleEntry:
        """Cancel an active schedule `call` may see (or raise ScheduleRefused)."""
        ...


def describe(entry: ScheduleEntry, zone: ZoneInfo) -> str:
    """`#3 every "0 8 * * 1-5", next Tue 2030-01-07 08:00 CET: water the plants`."""
    if entry.kind == "cron":
        what = f'every "{entry.spec}"'
    elif entry.kind == "heartbeat":
        what = f"heartbeat, {entry.spec}"
    else:
        what = "once"
    if entry.status == "active" and entry.next_due is not None:
        what += f", next {format_time(entry.next_due, zone)}"
    elif entry.status != "active":
        what += ended_note(entry.status, entry.note)
    return f"#{entry.id} {what}: {entry.task}"


class ScheduleTools:
    """schedule_task, list_schedules and cancel_schedule over a ScheduleBook (None: this
    process keeps no schedules, and every call says so)."""

    def __init__(
        self,
        book: ScheduleBook | None,
        timezone: str,
        *,
        scrub: Callable[[str], str] = lambda text: text,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self.zone = zone_named(timezone)
        self._scrub = scrub  # the task is stored: nothing secret goes with it
        self._clock = clock

    def tools(self) -> list[Tool]:
        """The three tools, offered to the model as one `schedule` tool."""
        task = FunctionTool(self.schedule_task, name="schedule_task", writes=True)
        when = task.parameters["properties"]["when"]
        members: list[Tool] = [
            task,
            FunctionTool(self.list_schedules, name="list_schedules"),
            # A second cancel changes nothing: the book says the schedule has ended.
            FunctionTool(
                self.cancel_schedule, name="cancel_schedule", writes=True, repeat_safe=True
            ),
        ]
        return [
            ToolGroup(
                "schedule",
                "Do a task later, once or repeatedly, or list or cancel this chat's "
                "schedules: a task comes to you as a message in this chat when due",
                {
                    "add": Action("schedule_task", needs=("when", "task")),
                    "list": Action("list_schedules"),
                    "cancel": Action("cancel_schedule", needs=("id",)),
                },
                {
                    "when": when,
                    "task": {"type": "string", "description": "add: what to do then"},
                    "id": {"type": "integer", "description": "cancel: the schedule's number"},
                },
                tools=members,
            ),
            *members,
        ]

    async def schedule_task(self, call: ToolCallContext, when: str, task: str) -> ToolResult:
        """Do a task later, once or repeatedly: when due, it comes to you as a message in
        this chat, and your reply is sent there.

        Args:
            when: A time ("2030-06-01T08:30"), a delay ("in 10 minutes") or a cron line
                to repeat ("0 8 * * 1-5"). The time is ISO 8601; cron has five fields.
            task: What to do then, as an instruction to yourself.
        """
        if self._book is None:
            return ToolResult.error("Schedules are not kept here; nothing was scheduled.")
        task = self._scrub(task.strip())
        if (refused := task_refusal(task, "when it is due")) is not None:
            return refused
        try:
            parsed = parse_when(when, self.zone, self._clock())
            entry = await self._book.add(call, parsed, task)
        except (WhenError, ScheduleRefused) as exc:
            return ToolResult.error(f"Not scheduled: {exc}")
        text = f"Scheduled {describe(entry, self.zone)}"
        if entry.where:
            text += f"\nIt runs in {entry.where}."
        return ToolResult.success(text)

    async def list_schedules(self, call: ToolCallContext) -> ToolResult:
        """This chat's schedules: active ones with ids and next times, then the latest
        ended."""
        if self._book is None:
            return ToolResult.success("No schedules are kept here.")
        found = await self._book.entries(call)
        return listing(found, lambda entry: describe(entry, self.zone), "schedules")

    async def cancel_schedule(self, call: ToolCallContext, id: int) -> ToolResult:
        """Cancel an active schedule of this chat.

        Args:
            id: Its number in the list of schedules: 3 for #3.
        """
        if self._book is None:
            return ToolResult.error("No schedules are kept here.")
        try:
            entry = await self._book.cancel(call, id)
        except ScheduleRefused as exc:
            return ToolResult.error(str(exc))
        return ToolResult.success(f"Cancelled {describe(entry, self.zone)}")
