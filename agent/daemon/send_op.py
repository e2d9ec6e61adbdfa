"""The daemon's "send" op (`agent send`): the owner's text, sent as the bot to a chat the
agent may talk in, through that chat's outbox like any reply (stored before it is
acknowledged, retried through 429s and outages until `delivery_deadline_s`).

A chat qualifies when the channel's allow-list admits it as a person's private chat (its id
is an allowed user's; "*" admits any) or when an allowed person has written in it (a group
the agent is in): a script cannot make the bot speak where nobody let it. `to` is a numeric
chat id or a `[people]` name, resolved to that person's private chat on the channel; never
`@name`, which Telegram would read as a public channel.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from agent.daemon.chat_address import TO_ACCEPTED, chat_form
from agent.daemon.local_server import Connection, Request
from agent.proactive.schedule_book import private_chat
from agent.runtime.channel_runtime import ChannelRuntime
from agent.security import Scrubber
from channels.base import ChatRef, Reply

MAX_TEXT = 20_000
POLL_S = 0.05


class SendOp:
    def __init__(self, runtimes: Mapping[str, ChannelRuntime], scrub: Scrubber) -> None:
        self._runtimes = runtimes  # filled once the channels start
        self._scrub = scrub

    async def __call__(self, request: Request, conn: Connection) -> None:
        channel, to = str(request.get("channel", "")), str(request.get("to", "")).strip()
        text = self._scrub(str(request.get("text", ""))).strip()
        runtime = self._runtimes.get(channel)
        refusal = (
            f"{channel or 'no channel'} is not running in this daemon (running: "
            f"{', '.join(self._runtimes) or 'none'})"
            if runtime is None
            else "nothing to send: the text is empty"
            if not text
            else f"the text is {len(text):,} characters; at most {MAX_TEXT:,}"
            if len(text) > MAX_TEXT
            else None
        )
        chat: ChatRef | None = None
        if runtime is not None and refusal is None:
            chat, refusal = await resolve(runtime, to)
            if chat is not None and not await may_send(runtime, chat.chat_id):
                refusal = (
                    f"{channel} chat {chat.chat_id!r} is not one the agent talks in: its id is "
                    f"not on [channels.{channel}] allowed_users and no allowed person has "
                    "written there"
                )
        if refusal is not None or runtime is None or chat is None:
            conn.send({"event": "error", "message": refusal, "code": 2})
            return
        to = chat.chat_id if to == chat.chat_id else f"{chat.chat_id} ({to})"
        outgoing_id = await runtime.queue_reply(chat, Reply(text))
        wait_s = float(request.get("wait_s", 30.0))
        status, error = await delivered(runtime, outgoing_id, wait_s)
        if status == "sent":
            conn.send({"event": "done", "code": 0, "stderr": f"sent to {channel} chat {to}"})
        elif status == "expired":
            message = f"not delivered to {channel} chat {to} by its deadline: {error}"
            conn.send({"event": "error", "message": message, "code": 1})
        else:
            note = f"stored, not delivered yet{f' ({error})' if error else ''}; the daemon "
            note += "keeps trying until the delivery deadline"
            conn.send({"event": "done", "code": 0, "stderr": note})


async def resolve(runtime: ChannelRuntime, to: str) -> tuple[ChatRef | None, str | None]:
    """The chat `to` names on the runtime's channel, or why there is none."""
    channel = runtime.channel.name
    form = chat_form(channel, to)
    if form == "id":
        return ChatRef(channel, to), None
    if form is None:
        return None, f"{to!r} is not a chat: {TO_ACCEPTED}"
    person = runtime.setup.settings.people.get(to)
    user_id = getattr(person, channel, "") if person is not None else ""
    if not user_id:
        return None, f'no {channel} id for {to!r}: add {channel} = "<id>" under [people.{to}]'
    chat = await private_chat(runtime.store.db, channel, user_id)
    if chat is None:
        return None, f"{to} has no private {channel} chat with the bot yet: they write first"
    return chat, None


async def may_send(runtime: ChannelRuntime, chat_id: str) -> bool:
    if runtime.setup.access.open_to_all or runtime.is_allowed_sender(chat_id):
        return True
    senders = await runtime.store.inbox.senders(runtime.channel.name, chat_id)
    return any(runtime.is_allowed_sender(sender, username) for sender, username in senders)


async def delivered(runtime: ChannelRuntime, outgoing_id: int, wait_s: float) -> tuple[str, str]:
    """The outbox row's status ("sent", "expired" or "pending") and last error, once it is
    final or `wait_s` has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        status, error = await runtime.store.outbox.fate(outgoing_id) or ("pending", "")
        if status != "pending" or time.monotonic() >= deadline:
            return status, error
        await asyncio.sleep(POLL_S)
