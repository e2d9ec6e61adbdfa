"""TurnAnswerer: one channel's turns. A pending message of the inbox is answered in its
chat's queue (its reply, its session and its inbox row in one transaction, handed to the
chat queues to commit); the terminal's message is answered at once (`answer_now`). Chats
run side by side up to a shared number of turn slots (a turn waiting for a person's approval
holds none: queues/turn_slots.py); a turn no model could answer waits
and runs again (outage.py). Whose turn it is — the audience — is resolved once per message
and carried to the budget, the inputs and the reply's files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from agent.conversation.compaction import model_summariser
from agent.conversation.scopes import Audience, audience_of
from agent.durable.always_allowed import AlwaysAllowed
from agent.durable.file.state_db import Transaction
from agent.durable.file_sources import FileSources
from agent.durable.store import Store
from agent.durable.tool_journal import ToolJournal
from agent.durable.triggers import Trigger
from agent.model.responses import OnRetry
from agent.prompt.context import SILENT_REPLY
from agent.runtime.approvals import turn_approvers
from agent.runtime.attachments import Downloads, forwarded_words
from agent.runtime.media import reply_files, resolve_reply
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.owner.memory_vetting import MemoryVetting
from agent.runtime.owner.metering import OwnerControls, Refused
from agent.runtime.queues.busy import Answering, BusyModes, merged
from agent.runtime.queues.chat_queues import Finished
from agent.runtime.queues.outage import OutageNotice, StillThinking, retry_later
from agent.runtime.queues.reactions import Reactions
from agent.runtime.queues.replies import ChatReplies
from agent.runtime.queues.turn_slots import Slot, TurnSlots
from agent.runtime.running_turns import RunningTurns
from agent.runtime.turn_inputs import TurnInputs, turn_inputs
from agent.runtime.turn_setup import TurnSetup
from agent.security import Scrubber
from agent.turns.loop import ToolEvent
from agent.turns.turn import HoldSilentPrefix, Steer, TurnOutcome, is_silent
from agent.turns.turn_record import TurnRecord
from channels.base import Channel, IncomingMessage, Reply, ReplyStream
from tools.memory.store import MemoryStore
from tools.policy import SecurityPolicy

log = logging.getLogger(__name__)


class TurnAnswerer:
    def __init__(
        self,
        channel: Channel,
        setup: TurnSetup,
        store: Store,
        *,
        slots: TurnSlots,
        turns: RunningTurns,
        busy: BusyModes,
        reactions: Reactions,
        replies: ChatReplies,
        door: Doorkeeper,
        controls: OwnerControls,
        always: AlwaysAllowed,
        downloads: Downloads,
        policy: SecurityPolicy,
        scrub: Scrubber,
        memory: MemoryStore | None,
        vetting: MemoryVetting | None,
    ) -> None:
        self._channel = channel
        self._setup = setup
        self._store = store
        self._slots = slots
        self.turns = turns
        self._busy = busy
        self._reactions = reactions
        self._replies = replies
        self._door = door
        self._controls = controls
        self._always = always
        self._downloads = downloads
        self._sources = FileSources(store.db, policy.workspace)  # a forwarded file's words
        self._policy = policy
        self._scrub = scrub
        self._memory = memory
        self._vetting = vetting

    async def answer_pending(self, answering: Answering) -> Finished | None:
        """The turn of an inbox message (and the rows folded into it: busy.py), as one
        transaction for the chat queues to commit; None when it waits to run again (no model
        answered, or a newer message interrupted it). A wait for someone else's answer (in
        a group, or the owner's for this chat) sets it aside (`answering.waiting`): the
        chat goes on meanwhile."""
        pending, taken = answering.pending, answering.taken  # taken: rows steered in
        trigger = pending.trigger  # nobody typed, nobody waits
        channel, settings = self._channel, self._setup.settings
        if trigger is None:
            self._reactions.mark(pending.messages, "working")
        # Its files fetched before it takes one of the turn slots all chats share.
        limit = settings.channels.max_attachment_mb
        fetch = self._downloads.fetch_rows(pending, self._store.inbox, limit, self._sources)
        pending = await self.turns.unless_stopped(pending.message.chat.key, fetch, pending)
        msg = merged(pending, settings.channels.max_message_chars)
        fresh = not pending.attempts and trigger is None
        stream = channel.open_stream(msg.chat, msg.message_id) if fresh else None
        on_text = stream.push if stream else None
        if on_text is not None and msg.is_group:
            on_text = HoldSilentPrefix(on_text)
        typing = channel.typing(msg.chat) if trigger is None else contextlib.nullcontext()
        queue, agent = self._replies.queue, settings.agent
        notice = OutageNotice(pending, queue, after_s=agent.outage_notice_after_s)
        audience = self._audience(msg)
        steer = self._busy.steer(answering, self._setup.runner.envelope)
        waiting = answering.waiting  # set when its question waits on someone else
        async with self._slots.hold() as slot, typing:
            slot.on_asking = waiting.set
            after_s = agent.still_thinking_after_s if fresh else 0.0  # once a message
            slow = StillThinking(msg.chat, queue, after_s, on_text, asked=lambda: slot.asked)
            try:
                on_text = slow.shown if on_text is not None else None
                outcome, session = await self._turn(
                    msg,
                    audience,
                    slot,
                    on_text=on_text,
                    on_retry=notice,
                    trigger=trigger,
                    steer=None if trigger else steer,
                    waiting=waiting,
                )
            finally:
                await slow.call_off()
                await notice.call_off()
        if outcome.status == "interrupted":  # its rows run again with the newer message
            if stream is not None:
                await _discarded(stream)
            return None
        retry = outcome.status == "retry"
        if retry and await retry_later(pending, notice, agent, self._store.inbox):
            if stream is not None:  # its answer comes later, as a message of its own
                await _discarded(stream)
            return None
        quiet = msg.is_group or trigger is not None  # may answer with the silent token
        silent = quiet and outcome.status == "done" and is_silent(outcome.text)
        files = reply_files(self._policy, msg, owner_private=audience.owner_private)
        reply_to, previews = "" if trigger else msg.message_id, not outcome.tainted_by
        reply = resolve_reply(outcome.text, files, reply_to=reply_to, previews=previews)
        status = "failed" if retry else outcome.status
        kept = [] if silent and trigger is not None else outcome.messages  # no empty check-ins
        parts = None if silent else self._replies.parts(reply)
        voice = self._replies.voice  # a reply read aloud: made now, kept in the outbox
        spoken = trigger is None and outcome.status == "done"
        if parts and spoken and await voice.wanted(pending.message):
            parts = await voice.parts(reply, parts, self._replies.parts)
        within, store = self._replies.deliver_within_s, self._store
        taint = outcome.tainted_by  # kept with the turn: the next one starts tainted
        lead, rows = pending.id, (*pending.ids, *(row.id for row in taken))
        answered = [*pending.messages, *(row.message for row in taken)] if not trigger else []

        def commit(conn: Transaction) -> int | None:  # one transaction, one trip
            sessions = store.sessions  # the session the turn read, even after a /new
            sessions.add_turn(conn, msg.chat.key, kept, lead, tainted_by=taint, session=session)
            for row in rows:  # each says which turn took it
                store.inbox.finish(conn, row, status, taken_by=lead)
            if parts is None:
                return None
            return store.outbox.insert(
                conn, msg.chat, parts, inbox_id=lead, deliver_within_s=within
            )

        def committed() -> None:
            self._reactions.mark(answered, "done" if status == "done" else "failed")

        return Finished(msg.chat, commit, stream, committed)

    async def answer_now(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Reply:
        """Answer one message now, without the inbox or outbox: the terminal's one-shot or
        chat, where the person waits for the answer (`on_text`: as it streams) and nothing
        needs redelivering."""
        audience = self._audience(msg)
        limit = self._setup.settings.channels.max_attachment_mb
        fetched = await self._downloads.fetch(msg, limit, self._sources)  # before its slot
        async with self._slots.hold() as slot:
            outcome, session = await self._turn(
                fetched, audience, slot, on_event=on_event, on_text=on_text
            )
        taint = outcome.tainted_by
        await self._store.sessions.append_turn(
            msg.chat.key, outcome.messages, tainted_by=taint, session=session
        )
        files = reply_files(self._policy, msg, owner_private=audience.owner_private)
        previews = not taint  # a tainted turn's reply: no previews, no URL media
        return resolve_reply(outcome.text, files, reply_to=msg.message_id, previews=previews)

    def _audience(self, msg: IncomingMessage) -> Audience:
        settings = self._setup.settings
        share = settings.memory.share_group_memories
        return audience_of(msg, settings.people, share_group_memories=share)

    async def _turn(
        self,
        msg: IncomingMessage,
        audience: Audience,
        slot: Slot,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_retry: OnRetry = None,
        trigger: Trigger | None = None,
        steer: Steer | None = None,
        waiting: asyncio.Event | None = None,
    ) -> tuple[TurnOutcome, int | None]:
        """The turn's outcome and the session it read (None: none yet), its commit's place.
        It runs, from reading its inputs on, as a task /stop and /new can cancel
        (RunningTurns.run); a shutdown cancels it too, and then nothing is stored (the
        message stays pending). The turn keeps what it starts with: a reload gives the setup
        a new runner and model for the next turns."""
        key, setup, last = msg.chat.key, self._setup, self.turns.last
        runner, settings = setup.runner, setup.settings
        llm = await self._controls.for_turn(setup.llm, msg, trigger, audience)
        if isinstance(llm, Refused):  # a limit is reached: its line to a person, no model called
            log.warning("%s: turn not run: %s", key, llm.reason)
            last[key] = TurnRecord("budget", error=llm.reason)
            said = SILENT_REPLY if trigger else llm.reason
            return TurnOutcome("done", said, [], last[key]), None
        door = self._door
        prepared: list[TurnInputs] = []  # once read: the session and taint it runs with

        async def prepared_and_run() -> TurnOutcome:
            inputs = await turn_inputs(
                msg,
                audience,
                settings,
                self._store.sessions,
                self._memory,
                history_tokens=setup.history_tokens,
                summarise=model_summariser(llm, self._scrub),
                journal=ToolJournal(self._store.db, msg),  # journals only a pending inbox row
                approvers=turn_approvers(
                    self._channel,
                    msg.chat,
                    door.allows,
                    (door.owner_chat, door.is_owner) if door.owner_ids() else None,
                    always=self._always,
                    timeout_s=settings.security.approval_timeout_s,
                    parked=slot.asking,
                    group=msg.is_group,
                ),
            )
            prepared.append(inputs)
            return await runner.run(
                msg,
                inputs.prior,
                inputs.context,
                deadline_s=settings.agent.turn_deadline_s,
                private=audience.owner_private,
                remembered=inputs.remembered,
                on_event=on_event,
                on_text=on_text,
                on_retry=on_retry,
                trigger=trigger,
                llm=llm,
                steer=steer,
            )

        asked = {"role": "user", "content": runner.envelope(msg, trigger=trigger)}
        run = prepared_and_run()
        outcome = await self.turns.run(key, run, typed=not trigger, asked=asked, waiting=waiting)
        # The owner's button for each memory kept unvetted, in the background: however the
        # run ended (stopped, interrupted, to be retried), as a run again gets memory_store's
        # result back from the journal without storing, or offering, it again.
        left = tuple(prepared[0].context.taint.left_unvetted) if prepared else ()
        unvetted = outcome.unvetted or left
        if outcome.messages and not outcome.tainted_by:  # stopped, or failed: words kept
            # What it had read that its speaker did not write (its loop's outcome is lost).
            outcome.tainted_by = (
                prepared[0].context.taint.why() if prepared else forwarded_words(msg)
            )
        if unvetted and self._vetting:
            self._vetting.offer(unvetted, msg.chat)
        if outcome.status != "interrupted":
            last[key] = outcome.record
        return outcome, prepared[0].session if prepared else None


async def _discarded(stream: ReplyStream) -> None:
    """The turn's preview removed: a cut stream's text must not stay above the answer."""
    try:
        await stream.discard()
    except Exception as exc:  # the platform refused: the answer still comes
        log.info("the streamed preview could not be removed: %s", exc)
