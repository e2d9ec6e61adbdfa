"""ChatReplies: what a channel sends that no message of the chat waits for — a command's
answer, a refusal, a schedule's notice, the owner's `agent send` — stored in the outbox and
handed to the courier; and the split of any reply into the platform's messages (a voice
note first, when the chat wants replies read aloud: voice_replies.py)."""

from __future__ import annotations

from collections.abc import Callable

from agent.durable.file.state_db import Transaction
from agent.durable.owner.chat_voices import ChatVoices
from agent.durable.store import Store
from agent.runtime.queues.courier import Courier
from agent.runtime.queues.voice_replies import VoiceReplies
from agent.runtime.turn_setup import TurnSetup
from channels.base import Channel, ChatRef, OutgoingPart, Reply, within_parts

Alongside = Callable[[Transaction], None]  # a caller's change, in the same transaction


class ChatReplies:
    def __init__(self, channel: Channel, store: Store, courier: Courier, setup: TurnSetup) -> None:
        self._channel = channel
        self._store = store
        self._courier = courier
        self._setup = setup
        self.voice = VoiceReplies(channel, lambda: setup.settings.voice, ChatVoices(store.db).get)

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        """The reply in the platform's messages; past `channels.max_parts` of them, a
        summary and the whole text as a document."""
        max_parts = self._setup.settings.channels.max_parts
        return within_parts(reply, self._channel.parts(reply), max_parts)

    @property
    def deliver_within_s(self) -> float:
        return float(self._setup.settings.channels.delivery_deadline_s)

    async def queue(
        self, chat: ChatRef, reply: Reply, *, alongside: Alongside | None = None
    ) -> int:
        """Store the reply in the outbox (in one transaction with `alongside`, which may
        raise to store nothing) and wake the chat's courier; the outbox row's id."""
        parts, within = self.parts(reply), self.deliver_within_s

        def store(conn: Transaction) -> int:
            if alongside is not None:
                alongside(conn)
            return self._store.outbox.insert(
                conn, chat, parts, inbox_id=None, deliver_within_s=within
            )

        outgoing_id = await self._store.db.write(store)
        self._courier.wake(chat.key)
        return outgoing_id
