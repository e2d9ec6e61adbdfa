"""BusyModes: what a chat's message does when it comes while the chat is busy, and which
pending rows one turn answers.

The modes (`[channels] busy`, a channel's own `busy`, one chat's `/busy MODE`):

- queue: the message waits for its own turn (a burst within `debounce_ms` is one turn);
- steer: it joins the running turn after its current round of tools, as a user message the
  model sees (agent/turns/loop.py); a turn with no round left leaves it queued;
- interrupt: the running turn stops (its finished tool effects stay done, in the tool
  journal under its first row), and one new turn answers its rows and the new one;
- collect: everything pending when the chat's next turn starts is that one turn, after the
  chat has been quiet for `debounce_ms` (1,500 by default).

Nothing here drops a message: a row stays pending in the inbox until the turn that took it
commits, and then says which turn that was (`taken_by`). A kill -9 at any point runs the rows
again. A message nobody typed (a schedule, the heartbeat) is never folded with others.

A turn whose question waits on someone else (any in a group; the owner's, asked privately for
another person's chat) is set aside (`Answering.waiting`): the chat's next messages are
answered meanwhile, in turns of their own, whatever the mode, and the turn set aside takes no
newer message in (steer).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.durable.inbox import Inbox, Pending
from agent.durable.owner.chat_busy import ChatBusy
from agent.durable.store import Claims, OneProcess
from agent.model.responses import Message
from agent.runtime.running_turns import INTERRUPT, TURNS, RunningTurns
from agent.runtime.turn_setup import TurnSetup
from agent.turns.turn import Steer
from channels.base import IncomingMessage
from channels.config import BUSY_MODES

MAX_FOLDED = 20  # rows one turn answers at most; the rest are the next turn's


@dataclass
class Answering:
    """One turn of a chat's queue: its rows, the rows steered into it as it runs, and
    whether it waits set aside for someone else's answer (so the chat goes on)."""

    pending: Pending
    taken: list[Pending] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def rows(self) -> set[int]:
        return {*self.pending.ids, *(row.id for row in self.taken)}


class BusyModes:
    def __init__(
        self,
        channel: str,
        setup: TurnSetup,
        inbox: Inbox,
        chosen: ChatBusy,
        turns: RunningTurns,
        claims: Claims | None = None,
    ) -> None:
        self._channel = channel
        self._claims = claims or OneProcess()  # the store's, when processes share it
        self._setup = setup
        self._inbox = inbox
        self.chosen = chosen
        self._turns = turns

    async def mode(self, chat_key: str) -> str:
        """The chat's /busy choice, else its channel's."""
        chosen = await self.chosen.get(chat_key)
        if chosen in BUSY_MODES:
            return chosen
        return self._setup.settings.channels.busy_of(self._channel)

    def debounce_s(self, mode: str) -> float:
        return self._setup.settings.channels.debounce_of(self._channel, mode) / 1000

    async def next_turn(
        self, chat_key: str, skip: frozenset[int] = frozenset()
    ) -> tuple[Pending | None, float]:
        """The rows the chat's next turn answers (the first with the rest folded in), and
        how long to wait first for a burst to end (0: go). `skip`: the rows of turns set
        aside, which still answer them."""
        rows = await self._inbox.pending(chat_key, limit=MAX_FOLDED + len(skip))
        rows = [row for row in rows if row.id not in skip][:MAX_FOLDED]
        if not rows:
            return None, 0.0
        lead = rows[0]
        typed_at = next((n for n, row in enumerate(rows) if row.trigger is None), None)
        if lead.trigger is not None and (
            typed_at is None or rows[typed_at].next_attempt_at >= lead.next_attempt_at
        ):
            return lead, 0.0
        # A schedule or heartbeat waiting out an outage holds back no person's message: it
        # is answered first (and told of the outage), the trigger's turn when its time comes.
        rows = rows[typed_at:]
        lead = rows[0]
        mode = await self.mode(chat_key)
        debounce = self.debounce_s(mode)
        typed: list[Pending] = []
        for row in rows:  # a person's messages, up to the first one nobody typed
            if row.trigger is not None:
                break
            typed.append(row)
        quiet_for = time.time() - typed[-1].received_at
        if debounce > quiet_for and len(rows) < MAX_FOLDED:
            return lead, debounce - quiet_for
        if mode in ("collect", "interrupt"):
            return dataclasses.replace(lead, folded=tuple(typed[1:])), 0.0
        burst = [lead]
        for row in typed[1:]:
            if row.received_at - burst[-1].received_at > debounce:
                break
            burst.append(row)
        return dataclasses.replace(lead, folded=tuple(burst[1:])), 0.0

    async def arrived(self, chat_key: str) -> str | None:
        """A person's message is in the inbox: the chat's mode when a turn runs there (in
        "interrupt", that turn stops — also in another process sharing the store), else
        None."""
        claims = self._claims
        here = chat_key in self._turns.running
        if not here and not (claims.shared and await claims.held_elsewhere(TURNS, chat_key)):
            return None
        mode = await self.mode(chat_key)
        if mode == "interrupt":
            if here:
                self._turns.interrupt(chat_key)
            else:
                await claims.announce(INTERRUPT, chat_key)
        return mode

    def steer(self, turn: Answering, envelope: Callable[[IncomingMessage], str]) -> Steer:
        """What the running turn is steered with: the chat's newer text messages (none
        forwarded), when its mode is "steer" then and the turn was not set aside; their rows
        go to `turn.taken` (committed with the turn)."""
        lead, taken = turn.pending, turn.taken
        key = lead.message.chat.key

        async def newer() -> list[Message]:
            if turn.waiting.is_set() or await self.mode(key) != "steer":
                return []
            after = max((*lead.ids, *(row.id for row in taken)))
            joined: list[Message] = []
            for row in await self._inbox.pending(key, after=after, limit=MAX_FOLDED):
                message = row.message
                if row.trigger is not None or message.files or message.attachments:
                    break  # in order: this one and what follows wait for their own turn
                if message.forwarded_from:
                    break  # someone else's words: a turn of their own, tainted from its start
                taken.append(row)
                joined.append({"role": "user", "content": envelope(message)})
            return joined

        return newer


async def busy_command(busy: BusyModes, msg: IncomingMessage) -> str:
    """/busy: the chat's mode; /busy MODE sets it (anyone who may talk here); /busy reset."""
    key, words = msg.chat.key, msg.text.split()[1:]
    if not words:
        mode = await busy.mode(key)
        return f"While I work, a new message here: {mode} (/busy {' | '.join(BUSY_MODES)})."
    wanted = words[0].lower()
    if wanted == "reset":
        await busy.chosen.reset(key)
        return f"Back to this channel's mode: {await busy.mode(key)}."
    if wanted not in BUSY_MODES:
        return f"/busy takes one of: {', '.join(BUSY_MODES)}, reset."
    await busy.chosen.choose(key, wanted, msg.sender_name or msg.sender_id)
    return f"While I work, a new message here will {BUSY_SAYS[wanted]}."


BUSY_SAYS = {
    "queue": "wait for its own answer",
    "steer": "join the answer being worked on",
    "interrupt": "stop it, and I answer both together",
    "collect": "be answered together with the others",
}


def merged(lead: Pending, max_chars: int) -> IncomingMessage:
    """One message of the turn's rows: their words in order (each with its sender's name
    when more than one person wrote), their files; the first row's id and reply target."""
    rows = (lead, *lead.folded)
    if len(rows) == 1:
        return lead.message
    messages = [row.message for row in rows]
    senders = {msg.sender_id for msg in messages}
    parts = [
        f"{msg.sender_name or msg.sender_id}: {msg.text}" if len(senders) > 1 else msg.text
        for msg in messages
        if msg.text.strip()
    ]
    text = "\n\n".join(parts)
    if len(text) > max_chars:
        text = text[:max_chars] + "\n\n[The messages were cut here: too long together.]"
    return dataclasses.replace(
        lead.message,
        text=text,
        files=tuple(item for msg in messages for item in msg.files),
        attachments=tuple(item for msg in messages for item in msg.attachments),
        # A forwarded row anywhere makes the turn hold someone else's words (its taint).
        forwarded_from=next((m.forwarded_from for m in messages if m.forwarded_from), ""),
    )
