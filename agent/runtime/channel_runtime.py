"""ChannelRuntime: one channel's runtime, put together from parts that each do one job
(docs/architecture.md, "One message, end to end"):

- intake.py (MessageIntake): a message in, checked, stored in the inbox, its chat woken;
- commands.py (ChatCommands): /new, /stop, /status... answered at once;
- turn_answering.py (TurnAnswerer): the chat's pending messages answered, one turn each;
- chat_queues.py (ChatQueues): each chat's queue, which never stops, and the turn's commit;
- replies.py (ChatReplies) and courier.py (Courier): the outbox, sent part by part;
- owner/pairing.py (Doorkeeper): who may talk, and the strangers' pairing.

What every part reads — the settings, the prompt source, the model, the runner — is one
TurnSetup (turn_setup.py) that a reload replaces between turns. The parts are assembled
here from collaborators the App built once; the proactive side reaches a channel through
the three calls of `Enqueue` (enqueue.py), which this class answers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from agent.durable.always_allowed import AlwaysAllowed
from agent.durable.owner.chat_busy import ChatBusy
from agent.durable.store import Store
from agent.durable.triggers import Trigger
from agent.runtime.attachments import Downloads, Transcriber
from agent.runtime.commands import ChatCommands
from agent.runtime.intake import MessageIntake, repair_text
from agent.runtime.jobs.delegate_tool import JobDesk
from agent.runtime.jobs.job_run import JobKit
from agent.runtime.jobs.job_runner import JobRunner
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.owner.memory_vetting import MemoryVetting
from agent.runtime.owner.metering import OwnerControls
from agent.runtime.queues.busy import Answering, BusyModes
from agent.runtime.queues.chat_queues import ChatQueues, Finished
from agent.runtime.queues.courier import Courier
from agent.runtime.queues.reactions import Reactions
from agent.runtime.queues.replies import Alongside, ChatReplies
from agent.runtime.queues.turn_slots import TurnSlots
from agent.runtime.running_turns import FORGET, STOP, RunningTurns
from agent.runtime.turn_answering import TurnAnswerer
from agent.runtime.turn_setup import TurnSetup
from agent.security import Scrubber
from agent.turns.loop import ToolEvent
from agent.turns.turn_record import TurnRecord
from channels.base import Channel, ChatRef, IncomingMessage, Reply
from tools.memory.store import MemoryStore
from tools.policy import SecurityPolicy


class ChannelRuntime:
    def __init__(
        self,
        channel: Channel,
        setup: TurnSetup,
        store: Store,
        *,
        slots: TurnSlots,
        scrub: Scrubber,
        policy: SecurityPolicy,
        transcribe: Transcriber | None,
        memory: MemoryStore | None,
        jobs: JobDesk | None = None,
    ) -> None:
        """The channel's parts, from what the App built once (`slots`: the turn slots all
        channels share; `policy` and `scrub`: the tools' own; `jobs`: where the delegate
        tool finds this channel's job runner)."""
        self.channel, self.setup, self.store = channel, setup, store
        settings = setup.settings
        self.controls = OwnerControls.of(setup, store.db)
        self.courier = Courier(
            channel,
            store.outbox,
            files=policy.paths,
            delivery=settings.channels.delivery,
            claims=store.claims,
        )
        self.replies = ChatReplies(channel, store, self.courier, setup)
        self.door = Doorkeeper(  # the allow-list, and who the owner let in (pairing)
            channel,
            setup,
            store.db,
            self.replies.queue,
            self.courier.wake,
            scrub,
        )
        self.turns = RunningTurns()
        store.claims.hear(self._heard)  # a /stop or an interruption taken elsewhere
        chosen = ChatBusy(store.db)
        self.busy = BusyModes(channel.name, setup, store.inbox, chosen, self.turns, store.claims)
        self.reactions = Reactions(channel, setup)
        always = AlwaysAllowed(store.db, setup.source.workspace.resolve())
        self.jobs: JobRunner | None = None
        if jobs is not None:
            parts = (jobs.jobs, self.controls, self.door, always, scrub, memory, store.sessions)
            kit = JobKit(channel, setup, *parts)
            self.jobs = JobRunner(kit, self.replies, jobs.slots, store.claims)
            jobs.attach(self.jobs)
        self.commands = ChatCommands(
            setup,
            store,
            self.turns,
            self.controls,
            self.door,
            lambda: slots.asking,
            self.busy,
            jobs=self.jobs,
        )

        def approval_s() -> float:
            return setup.settings.security.approval_timeout_s

        owner = (self.door.owner_chat, self.door.is_owner)
        self._vetting = MemoryVetting(channel, memory, owner, approval_s) if memory else None
        limit_s = settings.channels.download_timeout_s
        self.answerer = TurnAnswerer(
            channel,
            setup,
            store,
            slots=slots,
            turns=self.turns,
            busy=self.busy,
            reactions=self.reactions,
            replies=self.replies,
            door=self.door,
            controls=self.controls,
            always=always,
            downloads=Downloads(channel, policy.paths, limit_s, transcribe, scrub),
            policy=policy,
            scrub=scrub,
            memory=memory,
            vetting=self._vetting,
        )
        self.queues = ChatQueues(
            channel.name,
            store.db,
            store.inbox,
            self.busy,
            self.courier,
            self._answer_pending,
            claims=store.claims,
            slots=slots,
        )
        self.intake = MessageIntake(
            setup,
            store,
            self.door,
            self.commands,
            self.replies,
            self.queues.wake,
            scrub,
            self.busy,
            self.reactions,
        )
        self._scrub = scrub

    async def _answer_pending(self, answering: Answering) -> Finished | None:
        """A queued turn, for which /stop and /new count from the moment it is taken up."""
        with self.turns.preparing(answering.pending.message.chat.key):
            return await self.answerer.answer_pending(answering)

    def _heard(self, kind: str, chat_key: str) -> None:
        """Another process's announcement: a /stop (or /new) stops the chat's turn and jobs
        here too."""
        self.turns.heard(kind, chat_key)
        if kind in (STOP, FORGET) and self.jobs is not None:
            self.jobs.stop_chat(chat_key)

    # -- Enqueue --------------------------------------------------------------------------

    def is_allowed_sender(self, sender_id: str, username: str = "") -> bool:
        return self.door.allows(sender_id, username)

    async def queue_reply(
        self, chat: ChatRef, reply: Reply, *, alongside: Alongside | None = None
    ) -> int:
        return await self.replies.queue(chat, reply, alongside=alongside)

    async def enqueue_triggered(
        self, msg: IncomingMessage, trigger: Trigger, *, alongside: Alongside
    ) -> bool:
        return await self.intake.enqueue_triggered(msg, trigger, alongside=alongside)

    # -- the terminal -----------------------------------------------------------------------

    @property
    def last_turns(self) -> dict[str, TurnRecord]:
        return self.turns.last

    async def handle(
        self,
        msg: IncomingMessage,
        on_event: Callable[[ToolEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Reply:
        """Answer one message now, without the inbox or outbox: the terminal's one-shot or
        chat, where the person waits for the answer and nothing needs redelivering. Its text
        is repaired as a chat message's is (a terminal's non-UTF-8 bytes, an API client's
        half emoji): a lone surrogate cannot be stored, and the turn would fail after the
        model answered."""
        text = self._scrub(repair_text(msg.text))  # as pinclaw keeps it
        msg = dataclasses.replace(msg, text=text)
        said = await self.commands.answer(msg, in_chat=False)
        if said is not None:
            return Reply(said)
        return await self.answerer.answer_now(msg, on_event=on_event, on_text=on_text)

    # -- starting and stopping --------------------------------------------------------------

    async def resume(self) -> None:
        """Run what an earlier run left: pending messages, then queued replies."""
        await self.door.start()
        await self.queues.resume()
        if self.jobs is not None:
            await self.jobs.resume()

    async def drain(self, grace_s: float) -> None:
        """Stop starting turns; let running ones and sending finish within `grace_s`. What
        is unfinished stays pending in state.db for the next start."""
        self.intake.closing = True
        await self.door.close()  # the owner's pairing questions
        if self._vetting:
            await self._vetting.close()
        deadline = time.monotonic() + grace_s
        await self.queues.drain(grace_s)
        if self.jobs is not None:  # left where they are, for the next start
            await self.jobs.drain()
        await self.courier.drain(max(0.0, deadline - time.monotonic()))
