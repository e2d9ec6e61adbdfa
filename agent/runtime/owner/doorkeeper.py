"""Who may talk on a channel: its allow-list, and with `channels.<name>.pairing` (the
default) the people and groups the owner let in (agent/durable/owner/pairings.py); and what a
stranger gets.

With pairing, a stranger's private message gets one reply with a code (at most once an hour:
a code lives that long) and the owner a line in their private chat with Approve / Deny
buttons; a stranger who sends an invite code the owner made is in at once; any other code
counts as wrong, and WRONG_LIMIT of them lock that sender's pairing for an hour. A stranger in
a group gets silence; the owner adds a group with `/pair here`
(agent/runtime/owner/pair_command.py).
Without pairing: the allow-list alone and one polite reply per stranger an hour (silence in
groups), as before pairing existed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from agent.conversation import private_chats
from agent.durable.file.state_db import StateDB
from agent.durable.inbox import Inbox
from agent.durable.owner.pairing_codes import shown, typed_code
from agent.durable.owner.pairings import CODE_LIFE_S, Code, Outcome, Pairings
from agent.runtime.owner.pairing_texts import code_text, decision_text, owner_text, stranger_text
from agent.runtime.turn_setup import TurnSetup
from agent.security import Scrubber
from channels.base import ApprovalQuestion, Channel, ChatRef, IncomingMessage, Reply
from channels.base import sender_allowed as on_list
from tools.background import stop_tasks

log = logging.getLogger(__name__)

QueueReply = Callable[[ChatRef, Reply], Awaitable[int]]
RELOAD_S = 30.0  # `agent pairing` may change state.db under a running daemon
CLOSED = "⌛ No longer waiting here: /pair list shows what was decided."
TOLD_KEPT = 1_000  # strangers remembered as told at most (the oldest forgotten first)


class Doorkeeper:
    """The access check of one channel, and the pairing of its strangers."""

    def __init__(
        self,
        channel: Channel,
        setup: TurnSetup,
        db: StateDB,
        queue: QueueReply,
        wake: Callable[[str], None],
        scrub: Scrubber,
    ) -> None:
        self.channel = channel
        self._setup = setup  # its access and settings, read at each check (a reload changes them)
        self.pairings = Pairings(db)
        self._inbox = Inbox(db)
        self._queue = queue
        self._wake = wake  # the courier: a decision's line to the stranger is in the outbox
        self._scrub = scrub
        self._people: set[str] = set()  # let in, as state.db said when last read
        self._groups: set[str] = set()
        # Strangers given the polite reply, oldest first, with when: each is told at most
        # once per CODE_LIFE_S (as a code is given), and a spam wave cannot grow it for ever.
        self._told: OrderedDict[str, float] = OrderedDict()
        self._asking: dict[str, asyncio.Task[None]] = {}  # the owner's open questions, by code
        self._reloading: asyncio.Task[None] | None = None

    @property
    def pairing(self) -> bool:
        settings = getattr(self._setup.settings.channels, self.channel.name, None)
        return bool(getattr(settings, "pairing", False))

    def allows(self, sender_id: str, username: str = "") -> bool:
        """On the allow-list, or let in (with pairing on)."""
        access = self._setup.access
        if access.open_to_all or on_list(access.allowed_users, sender_id, username):
            return True
        return self.pairing and sender_id in self._people

    def allows_message(self, msg: IncomingMessage) -> bool:
        """`allows` the sender, or the message is in a group the owner added."""
        if self.allows(msg.sender_id, msg.sender_username):
            return True
        return self.pairing and msg.is_group and msg.chat.chat_id in self._groups

    async def admit(self, msg: IncomingMessage) -> bool:
        """A message `allows_message` refused: taken when state.db lets its sender in now (an
        `agent pairing approve` since the last read; in a private chat, not read again for
        each stranger in a busy group); else the stranger is answered (or not) and False:
        nothing of theirs is stored but what pairing needs."""
        log.info("%s: %s (%s) is not let in", self.channel.name, msg.sender_id, msg.sender_name)
        if not self.pairing:
            await self._polite(msg)
            return False
        if msg.is_group:  # silence; the copy of `paired` is at most RELOAD_S old
            return False
        await self.load()
        if self.allows_message(msg):
            return True
        typed = typed_code(msg.text)
        if typed is None:
            await self._request(msg)
        else:
            await self._redeem(msg, typed)
        return False

    # -- the owner ------------------------------------------------------------------------

    def owner_ids(self) -> set[str]:
        """The owner's ids on this channel: [people] entries with owner = true."""
        people = self._setup.settings.people.values()
        return {getattr(p, self.channel.name, "") for p in people if p.owner} - {""}

    def is_owner(self, sender_id: str, _username: str = "") -> bool:
        return sender_id in self.owner_ids()

    async def owner_chat(self) -> ChatRef | None:
        """The owner's private chat here (None: not known yet)."""
        people = self._setup.settings.people
        owner = await private_chats.owner_chat(people, self._inbox, (self.channel.name,))
        return None if owner is None else owner.chat

    async def tell_owner(self, text: str) -> None:
        chat = await self.owner_chat()
        if chat is None:
            log.warning(
                "%s: %s (no private chat of the owner's to say it in)", self.channel.name, text
            )
            return
        await self._queue(chat, Reply(text))

    # -- decisions ------------------------------------------------------------------------

    async def decide(self, typed: str, approve: bool, by: str) -> Outcome:
        """The owner's answer to a code of this channel; its question's buttons go."""
        outcome = await self.pairings.decide(typed, approve, by, channel=self.channel.name)
        code = outcome.code
        if code is None or outcome.verdict not in ("approved", "denied"):
            return outcome
        if outcome.verdict == "approved" and code.kind == "request":
            self._people.add(code.sender_id)
        if code.chat_key:
            self._wake(code.chat_key)
        asking = self._asking.pop(code.code, None)
        if asking is not None and asking is not asyncio.current_task():
            asking.cancel()
        return outcome

    async def add_group(self, msg: IncomingMessage) -> None:
        """The group `msg` was sent in, added by the owner from inside it."""
        await self.pairings.add_group(msg.chat, by=f"/pair here by {msg.sender_name}")
        self._groups.add(msg.chat.chat_id)

    # -- state.db -------------------------------------------------------------------------

    async def load(self) -> None:
        """Who is let in, as state.db says now."""
        members = await self.pairings.members(self.channel.name)
        self._people = {m.id for m in members if m.kind == "person"}
        self._groups = {m.id for m in members if m.kind == "group"}

    async def start(self) -> None:
        """Read who is let in, and again every RELOAD_S (a revoke from `agent pairing`)."""
        await self.load()
        self._reloading = asyncio.create_task(self._reload_every(RELOAD_S))

    async def _reload_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.load()
            except Exception as exc:  # state.db busy or full: the next round
                log.warning("%s: could not read who is let in: %s", self.channel.name, exc)

    async def close(self) -> None:
        """Stop reading; the owner's open questions show CLOSED (their codes stay open)."""
        await stop_tasks(*self._asking.values(), self._reloading)

    # -- strangers ------------------------------------------------------------------------

    async def _polite(self, msg: IncomingMessage) -> None:
        """Pairing off: one polite answer per stranger an hour, silence in groups."""
        if msg.is_group or not self._first_told(msg.sender_id):
            return
        text = stranger_text(self.channel.name, msg.sender_id)
        await self._queue(msg.chat, Reply(text, reply_to=msg.message_id))

    def _first_told(self, sender_id: str) -> bool:
        """True (and remembered) unless the sender was told within CODE_LIFE_S: the told
        are forgotten once that long ago, or when TOLD_KEPT newer strangers came since."""
        now, told = time.monotonic(), self._told
        while told and next(iter(told.values())) <= now - CODE_LIFE_S:
            told.popitem(last=False)
        if sender_id in told:
            return False
        while len(told) >= TOLD_KEPT:
            told.popitem(last=False)
        told[sender_id] = now
        return True

    async def _request(self, msg: IncomingMessage) -> None:
        outcome = await self.pairings.ask(msg)
        if outcome.verdict == "full":  # too many open requests: the owner is not asked
            log.warning(
                "%s: pairing requests are full; %s not asked", self.channel.name, msg.sender_id
            )
            await self._polite(msg)
        if outcome.verdict != "new" or outcome.code is None:
            return  # an open code (one an hour), or locked: silence
        code = outcome.code
        owner = await self.owner_chat()
        await self._queue(
            msg.chat, Reply(code_text(code, owner_asked=owner is not None), reply_to=msg.message_id)
        )
        if owner is None:
            log.warning(
                "%s: pairing code %s for %s: no owner's private chat to ask in; approve it "
                "with `agent pairing approve`",
                self.channel.name,
                shown(code.code),
                code.who,
            )
            return
        asking = asyncio.create_task(self._ask_owner(owner, code, self._scrub(msg.text)))
        self._asking[code.code] = asking
        asking.add_done_callback(lambda done: self._forget(code.code, done))

    def _forget(self, code: str, task: asyncio.Task[None]) -> None:
        if self._asking.get(code) is task:
            del self._asking[code]

    async def _ask_owner(self, owner: ChatRef, code: Code, said: str) -> None:
        """The owner's line with Approve / Deny, open while the code lives."""
        question = ApprovalQuestion(
            f"pair-{code.code}", owner_text(code, said), always=False, unanswered=CLOSED
        )
        try:
            async with asyncio.timeout(max(1.0, code.expires_at - self.pairings.now())):
                answer = await self.channel.ask_approval(owner, question, self.is_owner)
        except TimeoutError:
            return
        except Exception as exc:  # the owner blocked the bot, the network…: the CLI remains
            log.warning(
                "%s: could not ask the owner about %s: %s", self.channel.name, shown(code.code), exc
            )
            return
        outcome = await self.decide(code.code, answer != "deny", by="button")
        if outcome.verdict not in ("approved", "denied"):
            await self._queue(owner, Reply(decision_text(outcome, code.code)))

    async def _redeem(self, msg: IncomingMessage, typed: str) -> None:
        outcome = await self.pairings.redeem(msg, typed)
        verdict = outcome.verdict
        if verdict == "in" and outcome.code is not None:
            self._people.add(msg.sender_id)
            text = "That code let you in: write to me any time."
            await self.tell_owner(f"🔑 {outcome.code.who} came in with invite {shown(typed)}.")
        elif verdict == "wrong":
            text = (
                f"That code is not valid (or no longer). After {outcome.left} more wrong "
                "code(s), pairing closes to you for an hour."
            )
        elif verdict == "locked_now":
            text = "Too many wrong codes: pairing is closed to you for an hour."
            who = f"{msg.sender_name} ({self.channel.name} id {msg.sender_id})"
            await self.tell_owner(
                f"🔒 {who} sent too many wrong pairing codes: locked for an hour."
            )
        else:
            return  # their own request's code, or locked: silence
        await self._queue(msg.chat, Reply(text, reply_to=msg.message_id))
