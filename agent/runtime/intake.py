"""MessageIntake: where a chat channel's messages come in. Each is made what a stored message
must be (valid text, bounded size, files within limits: nothing a chat sends can make a turn
fail — a lone surrogate cannot be encoded, a 1 MB text fits no model's window, a 200 MB file
would be held in memory), scrubbed of secrets, let in or handed to the doorkeeper, then
stored in the inbox and its chat woken; a command is answered at once. A message nobody
typed (a schedule, the heartbeat, a pin watch) enters here too.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

from agent.durable.file.state_db import Transaction
from agent.durable.store import Store
from agent.durable.triggers import Trigger
from agent.runtime.commands import ChatCommands, parse_command
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.queues.busy import BusyModes
from agent.runtime.queues.reactions import BUSY_LINES, Reactions
from agent.runtime.queues.replies import Alongside, ChatReplies
from agent.runtime.turn_setup import TurnSetup
from agent.security import Scrubber
from channels.base import IncomingMessage, RemoteFile, Reply

log = logging.getLogger(__name__)

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
MB = 1024 * 1024


def repair_text(text: str) -> str:
    """Replace lone UTF-16 surrogates (which no encoder accepts) with U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def is_utf8_text(text: str) -> bool:
    """False when `text` holds a lone surrogate (bytes that were not UTF-8): fine to repair
    in a message, but a name repaired could become another one, so a name is refused."""
    return _LONE_SURROGATE.search(text) is None


def cut_text(text: str, max_chars: int) -> str:
    """At most `max_chars` characters, with a note to the model saying what was cut."""
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n\n[The message was cut here: it had {len(text):,} characters, "
        f"the limit is {max_chars:,}. Tell the user if the rest matters.]"
    )


def too_big(files: tuple[RemoteFile, ...], max_mb: float) -> list[RemoteFile]:
    return [item for item in files if item.size > max_mb * MB]


def refusal_text(refused: list[RemoteFile], max_mb: float) -> str:
    names = ", ".join(f"{item.name} ({item.size / MB:.0f} MB)" for item in refused)
    return f"I can't take {names}: files over {max_mb:g} MB are not accepted."


def prepared(msg: IncomingMessage, *, max_chars: int, max_mb: float) -> IncomingMessage:
    """The message as it will be stored: repaired, cut, and without files over the limit."""
    files = tuple(
        dataclasses.replace(item, name=repair_text(item.name))
        for item in msg.files
        if item not in too_big(msg.files, max_mb)
    )
    return dataclasses.replace(
        msg,
        text=cut_text(repair_text(msg.text), max_chars),
        sender_name=repair_text(msg.sender_name),
        sender_username=repair_text(msg.sender_username),
        files=files,
    )


class MessageIntake:
    def __init__(
        self,
        setup: TurnSetup,
        store: Store,
        door: Doorkeeper,
        commands: ChatCommands,
        replies: ChatReplies,
        wake: Callable[[str], None],  # the chat's queue: answer its pending messages
        scrub: Scrubber,
        busy: BusyModes,
        reactions: Reactions,
    ) -> None:
        self._setup = setup
        self._store = store
        self._door = door
        self._commands = commands
        self._replies = replies
        self._wake = wake
        self._scrub = scrub
        self._busy = busy
        self._reactions = reactions
        self.closing = False  # shutting down: nothing more is taken

    async def submit(self, msg: IncomingMessage) -> bool:
        """Store the message, then return: the channel may acknowledge it after this. False
        when it is not taken (a re-delivered message, or shutting down)."""
        store = self._store
        await store.db.health.admit()  # a full disk: it waits here, unacknowledged
        if self.closing:
            log.warning("%s: shutting down; message %s not taken", msg.chat.key, msg.message_id)
            return False
        limits = self._setup.settings.channels
        refused = too_big(msg.files, limits.max_attachment_mb)
        msg = prepared(msg, max_chars=limits.max_message_chars, max_mb=limits.max_attachment_mb)
        if not self._door.allows_message(msg) and not await self._door.admit(msg):
            return True  # a stranger: nothing of theirs stored but what pairing needs
        msg = dataclasses.replace(msg, text=self._scrub(msg.text))  # as pinclaw keeps it
        nothing_left = not msg.text.strip() and not msg.files and not msg.attachments
        command = parse_command(msg.text)
        status = "done" if nothing_left or command else "pending"
        if await store.inbox.add(msg, status=status) is None:
            log.info("%s: message %s seen before; not taken twice", msg.chat.key, msg.message_id)
            return False
        said = refusal_text(refused, limits.max_attachment_mb) if refused else None
        if command is not None:  # at once, not behind the chat's running turn
            said = await self._commands.answer(msg, in_chat=True) or ""
        if said is not None:
            await self._replies.queue(msg.chat, Reply(said, reply_to=msg.message_id))
        if status == "pending":
            self._wake(msg.chat.key)
            busy = await self._busy.arrived(msg.chat.key)  # "interrupt" stops the running turn
            self._reactions.mark([msg], "taken")
            if busy and self._reactions.says_busy:
                line = Reply(BUSY_LINES[busy], reply_to=msg.message_id)
                await self._replies.queue(msg.chat, line)
        return True

    async def enqueue_triggered(
        self, msg: IncomingMessage, trigger: Trigger, *, alongside: Alongside
    ) -> bool:
        """A message nobody typed into the inbox, in one transaction with `alongside` (the
        book's own change, which may raise to store nothing), then its chat woken. False:
        its message id was stored before (a webhook's delivery sent again)."""

        def store(conn: Transaction) -> bool:
            alongside(conn)
            return self._store.inbox.insert(conn, msg, trigger=trigger) is not None

        stored = await self._store.db.write(store)
        if stored:
            self._wake(msg.chat.key)
        return stored
