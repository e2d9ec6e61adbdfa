"""The schedule tools' book: where a schedule made in a call runs, who set it, how many a
chat may have. The tools (tools/proactive/schedule_tools.py) know none of this; the scheduler runs
what is kept here.

A schedule runs in the chat that made it, as the person who asked. The terminal has no
chat to come back to: a schedule made there runs in the owner's private chat on a chat
channel (`[people.NAME] owner = true` with that channel's id), delivered by the daemon;
with no such chat it is refused, saying what would make it work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from agent.config import Settings
from agent.conversation import private_chats
from agent.conversation.private_chats import OwnerChat
from agent.durable.file.state_db import StateDB
from agent.durable.inbox import Inbox
from agent.durable.schedules import NewSchedule, Schedules
from channels.base import ChatRef
from channels.registry import channel_kinds, kind_named
from tools.base import ToolCallContext
from tools.proactive.schedule_times import When
from tools.proactive.schedule_tools import ScheduleEntry, ScheduleRefused

NO_CHAT = (
    "{what} run in a {channels} chat, delivered by the daemon (`agent run`); from the "
    "terminal they go to the owner's private chat, and none is configured: enable a chat "
    "channel and add the owner to config.toml, e.g. [people.me] owner = true, "
    '{first} = "<your user id>"'
)


@dataclass(frozen=True)
class Placement:
    """Where the turns of a schedule or pin watch made in a call run, and as whom."""

    chat: ChatRef
    sender_id: str
    sender_name: str
    sender_username: str = ""
    in_group: bool = False
    where: str = ""  # in words, when it is not the calling chat


async def placement(settings: Settings, db: StateDB, call: ToolCallContext, what: str) -> Placement:
    """The calling chat and speaker; for the terminal, the owner's private chat (or a
    ScheduleRefused saying how to configure one). `what`: "schedules", "pin watches"."""
    if _terminal(call):
        owner = await owner_chat(settings, db, settings.channels.enabled())
        if owner is None:
            raise ScheduleRefused(no_chat(what))
        where = f"{owner.where}, when the daemon (`agent run`) is running"
        return Placement(owner.chat, owner.sender_id, owner.name, where=where)
    speaker, chat = call.speaker, ChatRef.parse(call.chat_key)
    if not speaker.id:
        raise ScheduleRefused(f"this call does not say who asked, so no {what} can be kept")
    if kind_named(chat.channel) is None:  # a webhook's or an API client's conversation
        raise ScheduleRefused(f"no {what} here: this conversation is not a chat they could run in")
    return Placement(chat, speaker.id, speaker.name, speaker.username, speaker.in_group)


async def owner_chat(
    settings: Settings, db: StateDB, channels: Collection[str]
) -> OwnerChat | None:
    """The owner's private chat on the first of `channels` where it is known
    (agent/conversation/private_chats.py)."""
    return await private_chats.owner_chat(settings.people, Inbox(db), channels)


async def private_chat(db: StateDB, channel: str, user_id: str) -> ChatRef | None:
    """A person's private chat with the bot (None: not known yet)."""
    return await private_chats.private_chat(Inbox(db), channel, user_id)


def no_chat(what: str) -> str:
    """Why a schedule made at the terminal cannot run: no owner's private chat."""
    names = [kind.capabilities.display_name for kind in channel_kinds()]
    return NO_CHAT.format(what=what, channels=" or ".join(names), first=channel_kinds()[0].name)


class ChatSchedules:
    """The ScheduleBook the tools use: the schedules table, seen from the calling chat (the
    terminal is the owner and sees every chat's)."""

    def __init__(self, schedules: Schedules, settings: Settings) -> None:
        self._schedules = schedules
        self._settings = settings
        self.on_change: Callable[[], None] | None = None  # the scheduler, when one runs

    async def add(self, call: ToolCallContext, when: When, task: str) -> ScheduleEntry:
        new, where = await self._placed(call, when, task)
        limit = self._settings.schedules.max_per_chat
        if await self._schedules.count_active(new.chat.key) >= limit:
            raise ScheduleRefused(
                f"this chat already has {limit} active schedules, the most allowed; cancel "
                "one first (the list of schedules shows them)"
            )
        schedule = await self._schedules.add(new)
        if self.on_change is not None:
            self.on_change()
        return schedule.entry(where)

    async def _placed(
        self, call: ToolCallContext, when: When, task: str
    ) -> tuple[NewSchedule, str]:
        """The schedule as it will be kept, and where it runs when that is not this chat."""
        at = await placement(self._settings, self._schedules.db, call, "schedules")
        return NewSchedule(
            when.kind,
            when.spec,
            task,
            at.chat,
            at.sender_id,
            when.first_due,
            sender_name=at.sender_name,
            sender_username=at.sender_username,
            in_group=at.in_group,
        ), at.where

    async def entries(self, call: ToolCallContext) -> list[ScheduleEntry]:
        chat_key = None if _terminal(call) else call.chat_key
        return [s.entry() for s in await self._schedules.listing(chat_key, watches=False)]

    async def cancel(self, call: ToolCallContext, schedule_id: int) -> ScheduleEntry:
        schedule = await self._schedules.get(schedule_id)
        if schedule is None or not (_terminal(call) or schedule.chat.key == call.chat_key):
            raise ScheduleRefused(
                f"no schedule #{schedule_id} in this chat; list the schedules to see them"
            )
        if schedule.kind == "heartbeat":
            raise ScheduleRefused(
                "the heartbeat is set in config.toml ([heartbeat] enabled); it is not cancelled "
                "here"
            )
        if schedule.kind == "pin":
            raise ScheduleRefused(f"#{schedule_id} is a pin watch: cancel it with cancel_watch")
        if not await self._schedules.cancel(schedule_id, note="cancelled in a chat"):
            raise ScheduleRefused(f"schedule #{schedule_id} has already ended ({schedule.status})")
        return schedule.entry()


def _terminal(call: ToolCallContext) -> bool:
    return call.chat_key.startswith("cli:")
