"""ChannelRuntime: one per channel. Takes its messages into the inbox, runs their turns and
queues their replies in the outbox (docs/architecture.md, "One message, end to end"; what a
turn is given: turn_inputs.py). Chats run side by side up to a shared number of turn slots,
a chat's messages one at a time, oldest first; a turn no model could answer waits and runs
again (outage.py); commands are answered at once; no chat ever stops (chat_queues.py: a
failed worker retries with backoff, a sweep wakes every chat with pending work).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sqlite3
import time
from collections.abc import Callable

from agent.config import Settings
from agent.conversation.compaction import model_summariser
from agent.conversation.scopes import audience_of
from agent.durable.always_allowed import AlwaysAllowed
from agent.durable.inbox import Pending
from agent.durable.quirks import ProviderQuirks
from agent.durable.store import Store
from agent.durable.tool_journal import ToolJournal
from agent.durable.triggers import Trigger
from agent.model.responses import ModelClient, OnRetry
from agent.prompt.context import SILENT_REPLY
from agent.prompt.source import PromptSource
from agent.runtime.approvals import turn_approvers
from agent.runtime.attachments import Downloads, Transcriber
from agent.runtime.chat_queues import ChatQueues, Finished
from agent.runtime.commands import CommandContext, parse_command, run_command
from agent.runtime.courier import Courier
from agent.runtime.intake import prepared, refusal_text, too_big
from agent.runtime.media import reply_files, resolve_reply
from agent.runtime.outage import OutageNotice, retry_later
from agent.runtime.owner.memory_vetting import MemoryVetting
from agent.runtime.owner.metering import Controls, Refused
from agent.runtime.owner.pair_command import pair_command
from agent.runtime.owner.pairing import Doorkeeper
from agent.runtime.turn_inputs import turn_inputs
from agent.security import Scrubber
from agent.turns.loop import ToolEvent
from agent.turns.state import Access, TurnRecord
from agent.turns.turn import HoldSilentPrefix, TurnOutcome, TurnRunner, is_silent
from channels.base import Channel, ChatRef, IncomingMessage, OutgoingPart, Reply, within_parts
from tools.memory.store import MemoryStore
from tools.policy import SecurityPolicy

log = logging.getLogger(__name__)

Alongside = Callable[[sqlite3.Connection], None]  # a caller's change, in the same transaction


class ChannelRuntime:
    def __init__(
        self,
        channel: Channel,
        *,
        access: Access,
        source: PromptSource,
        llm: ModelClient,
        store: Store,
        turn_slots: asyncio.Semaphore,
        quirks: ProviderQuirks | None = None,
        scrub: Scrubber | None = None,
        policy: SecurityPolicy | None = None,
        always: AlwaysAllowed | None = None,
        transcribe: Transcriber | None = None,
        history_tokens: int = 16_000,
        memory: MemoryStore | None = None,
        controls: Controls | None = None,
    ) -> None:
        self.channel = channel
        self.controls = controls or Controls.of(lambda: self.settings, store.db, source.timezone)
        self.access = access
        self.source = source
        self.llm = llm
        self.store = store
        self.sessions = store.sessions
        self._slots = turn_slots
        self._scrub = scrub or Scrubber()
        self._policy = policy or SecurityPolicy.from_settings(
            source.settings.security, source.workspace
        )
        self.always = always or AlwaysAllowed(store.db, source.workspace.resolve())
        limit_s = source.settings.channels.download_timeout_s
        self._downloads = Downloads(channel, self._policy.paths, limit_s, transcribe, self._scrub)
        self._history_tokens = history_tokens
        self._memory = memory
        self.runner = TurnRunner(
            channel, source=source, llm=llm, quirks=quirks or ProviderQuirks(), scrub=self._scrub
        )
        delivery = source.settings.channels.delivery
        self.courier = Courier(channel, store.outbox, files=self._policy.paths, delivery=delivery)
        self.queues = ChatQueues(
            channel.name, store.db, store.inbox, self.courier, self._answer_pending
        )
        self._running: dict[str, asyncio.Task[TurnOutcome]] = {}
        self.last_turns: dict[str, TurnRecord] = {}
        self.door = Doorkeeper(  # the allow-list, and who the owner let in (pairing)
            channel,
            lambda: self.access,
            store.db,
            lambda: self.settings,
            self.queue_reply,
            self.courier.wake,
            self._scrub,
        )
        self._vetting = memory and MemoryVetting(
            channel, memory, (self.door.owner_chat, self.door.is_owner), self._approval_s
        )
        self._closing = False

    def _approval_s(self) -> float:
        return self.settings.security.approval_timeout_s

    @property
    def system_prompt(self) -> str:
        return self.runner.system_prompt

    @property
    def settings(self) -> Settings:
        return self.source.settings

    # -- intake ---------------------------------------------------------------------------

    async def submit(self, msg: IncomingMessage) -> bool:
        """Store the message, then return: the channel may acknowledge it after this. False
        when it is not taken (a re-delivered message, or shutting down)."""
        await self.store.db.health.admit()  # a full disk: it waits here, unacknowledged
        if self._closing:
            log.warning("%s: shutting down; message %s not taken", msg.chat.key, msg.message_id)
            return False
        limits = self.settings.channels
        refused = too_big(msg.files, limits.max_attachment_mb)
        msg = prepared(msg, max_chars=limits.max_message_chars, max_mb=limits.max_attachment_mb)
        if not self.is_allowed(msg) and not await self.door.admit(msg):
            return True  # a stranger: nothing of theirs stored but what pairing needs
        msg = self.entered(msg)
        if parse_command(msg.text) is not None:
            return await self._command(msg)
        nothing_left = not msg.text.strip() and not msg.files and not msg.attachments
        if await self.store.inbox.add(msg, status="done" if nothing_left else "pending") is None:
            log.info("%s: message %s seen before; not taken twice", msg.chat.key, msg.message_id)
            return False
        if refused:
            text = refusal_text(refused, limits.max_attachment_mb)
            await self.queue_reply(msg.chat, Reply(text, reply_to=msg.message_id))
        if not nothing_left:
            self.wake(msg.chat.key)
        return True

    async def _command(self, msg: IncomingMessage) -> bool:
        """Run a command now (not behind the chat's running turn) and queue its answer."""
        if await self.store.inbox.add(msg, status="done") is None:
            return False
        if parse_command(msg.text) == "pair":
            text: str | None = await pair_command(self.door, msg)
        else:
            text = await run_command(msg.text, self._command_context(msg))
        await self.queue_reply(msg.chat, Reply(text or "", reply_to=msg.message_id))
        return True

    async def queue_reply(
        self, chat: ChatRef, reply: Reply, *, alongside: Alongside | None = None
    ) -> int:
        """A reply no message of the chat is waiting for, stored in the outbox (in one
        transaction with `alongside`, which may raise to store nothing); its id."""
        parts, within = self.parts(reply), self._deliver_within_s

        def store(conn: sqlite3.Connection) -> int:
            if alongside is not None:
                alongside(conn)
            return self.store.outbox.insert(
                conn, chat, parts, inbox_id=None, deliver_within_s=within
            )

        outgoing_id = await self.store.db.write(store)
        self.courier.wake(chat.key)
        return outgoing_id

    async def enqueue_triggered(
        self, msg: IncomingMessage, trigger: Trigger, *, alongside: Alongside
    ) -> None:
        """A message nobody typed (a schedule, the heartbeat, a pin watch) into the inbox,
        in one transaction with `alongside` (the book's own change, which may raise to
        store nothing), then its chat woken."""

        def store(conn: sqlite3.Connection) -> None:
            alongside(conn)
            self.store.inbox.insert(conn, msg, trigger=trigger)

        await self.store.db.write(store)
        self.wake(msg.chat.key)

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        """The reply in the platform's messages; past `channels.max_parts` of them, a
        summary and the whole text as a document."""
        return within_parts(reply, self.channel.parts(reply), self.settings.channels.max_parts)

    @property
    def _deliver_within_s(self) -> float:
        return float(self.settings.channels.delivery_deadline_s)

    def entered(self, msg: IncomingMessage) -> IncomingMessage:
        """The person's text as pinclaw keeps it: scrubbed of secrets once, here, where it
        enters; the prompt, the store and the logs use this copy."""
        return dataclasses.replace(msg, text=self._scrub(msg.text))

    def is_allowed(self, msg: IncomingMessage) -> bool:
        return self.door.allows_message(msg)

    def is_allowed_sender(self, sender_id: str, username: str = "") -> bool:
        return self.door.allows(sender_id, username)

    # -- the chats' queues ----------------------------------------------------------------

    async def resume(self) -> None:
        """Run what an earlier run left: pending messages, then queued replies."""
        await self.door.start()
        await self.queues.resume()

    def wake(self, chat_key: str) -> None:
        """Answer the chat's pending messages (also those the scheduler stored)."""
        self.queues.wake(chat_key)

    async def _answer_pending(self, pending: Pending) -> None:
        msg, trigger = pending.message, pending.trigger  # trigger: nobody typed, nobody waits
        stream = (
            self.channel.open_stream(msg.chat, msg.message_id)
            if not pending.attempts and trigger is None
            else None
        )
        on_text = stream.push if stream else None
        if on_text is not None and msg.is_group:
            on_text = HoldSilentPrefix(on_text)
        typing = self.channel.typing(msg.chat) if trigger is None else contextlib.nullcontext()
        notice = OutageNotice(pending, self.queue_reply)
        async with self._slots, typing:
            msg = await self._downloads.fetch(msg)
            outcome = await self._turn(msg, on_text=on_text, on_retry=notice, trigger=trigger)
        retry = outcome.status == "retry"
        if retry and await retry_later(pending, notice, self.settings.agent, self.store.inbox):
            return
        quiet = msg.is_group or trigger is not None  # may answer with the silent token
        silent = quiet and outcome.status == "done" and is_silent(outcome.text)
        files = reply_files(self._policy, msg, self.settings.people)
        reply_to, previews = "" if trigger else msg.message_id, not outcome.tainted_by
        reply = resolve_reply(outcome.text, files, reply_to=reply_to, previews=previews)
        status = "failed" if outcome.status == "retry" else outcome.status
        kept = [] if silent and trigger is not None else outcome.messages  # no empty check-ins
        parts, within = None if silent else self.parts(reply), self._deliver_within_s

        taint = outcome.tainted_by  # kept with the turn: the next one starts tainted

        def commit(conn: sqlite3.Connection) -> int | None:  # one transaction, one trip
            self.sessions.add_turn(conn, msg.chat.key, kept, pending.id, tainted_by=taint)
            self.store.inbox.finish(conn, pending.id, status)
            if parts is None:
                return None
            return self.store.outbox.insert(
                conn, msg.chat, parts, inbox_id=pending.id, deliver_within_s=within
            )

        await self.queues.commit(Finished(msg.chat, commit, stream))

    # -- turns ----------------------------------------------------------------------------

    async def _turn(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_retry: OnRetry = None,
        trigger: Trigger | None = None,
    ) -> TurnOutcome:
        """Run the turn as a task /stop can cancel; a shutdown cancels it too, and then
        nothing is stored (the message stays pending). The turn keeps what it starts with:
        a reload gives the runtime a new runner and model for the next turns."""
        key, runner, settings = msg.chat.key, self.runner, self.settings
        history_tokens = self._history_tokens
        llm = await self.controls.for_turn(self.llm, msg, trigger)
        if isinstance(llm, Refused):  # a limit is reached: its line to a person, no model called
            log.warning("%s: turn not run: %s", key, llm.reason)
            self.last_turns[key] = TurnRecord("budget", error=llm.reason)
            said = SILENT_REPLY if trigger else llm.reason
            return TurnOutcome("done", said, [], self.last_turns[key])
        inputs = await turn_inputs(
            msg,
            settings,
            self.sessions,
            self._memory,
            history_tokens=history_tokens,
            summarise=model_summariser(llm, self._scrub),
            journal=ToolJournal(self.store.db, msg),  # journals only a pending inbox message
            approvers=turn_approvers(
                self.channel,
                msg.chat,
                self.is_allowed_sender,
                (self.door.owner_chat, self.door.is_owner) if self.door.owner_ids() else None,
                always=self.always,
                timeout_s=self._approval_s(),
            ),
        )
        task = asyncio.create_task(
            runner.run(
                msg,
                inputs.prior,
                inputs.context,
                deadline_s=settings.agent.turn_deadline_s,
                private=inputs.context.owner_private,
                remembered=inputs.remembered,
                on_event=on_event,
                on_text=on_text,
                on_retry=on_retry,
                trigger=trigger,
                llm=llm,
            )
        )
        self._running[key] = task
        try:
            outcome = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                task.cancel()  # we were cancelled (shutdown): stop the turn too
                raise
            user = {"role": "user", "content": self.runner.envelope(msg, trigger=trigger)}
            outcome = TurnOutcome("done", "Stopped.", [user], TurnRecord("cancelled"))
        finally:
            self._running.pop(key, None)
        self.last_turns[key] = outcome.record
        if outcome.unvetted and self._vetting:  # the owner's button for each, in the background
            self._vetting.offer(outcome.unvetted, msg.chat)
        return outcome

    async def handle(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Reply:
        """Answer one message now, without the inbox or outbox: the terminal's one-shot or
        chat, where the person waits for the answer (`on_text`: as it streams) and nothing
        needs redelivering."""
        msg = self.entered(msg)
        command = await run_command(msg.text, self._command_context(msg))
        if command is not None:
            return Reply(command)
        async with self._slots:
            fetched = await self._downloads.fetch(msg)
            outcome = await self._turn(fetched, on_event=on_event, on_text=on_text)
        taint = outcome.tainted_by
        await self.sessions.append_turn(msg.chat.key, outcome.messages, tainted_by=taint)
        files = reply_files(self._policy, msg, self.settings.people)
        previews = not outcome.tainted_by  # a tainted turn's reply: no previews, no URL media
        return resolve_reply(outcome.text, files, reply_to=msg.message_id, previews=previews)

    def cancel(self, chat_key: str) -> bool:
        task = self._running.get(chat_key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def _command_context(self, msg: IncomingMessage) -> CommandContext:
        key = msg.chat.key
        return CommandContext(
            key,
            self.sessions,
            self.llm.model,
            self.last_turns.get(key),
            lambda: self.cancel(key),
            self.store.inbox,
            self.llm.health,
            self._history_tokens,
            controls=self.controls,
            owner=audience_of(msg, self.settings.people).owner_private,
            sender=msg.sender_name or msg.sender_id,
        )

    async def drain(self, grace_s: float) -> None:
        """Stop starting turns; let running ones and sending finish within `grace_s`. What
        is unfinished stays pending in state.db for the next start."""
        self._closing = True
        await self.door.close()  # the owner's pairing questions
        if self._vetting:
            await self._vetting.close()
        deadline = time.monotonic() + grace_s
        await self.queues.drain(grace_s)
        await self.courier.drain(max(0.0, deadline - time.monotonic()))
