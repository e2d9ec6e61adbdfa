"""The owner's button for a memory kept unvetted (tools/taint.py): keep it, or forget it.

A turn that had read words the owner did not write keeps what it stores as unvetted
(tools/memory/memory_tools.py). Once such a turn ends, each memory it kept is shown to the
owner in their private chat on that channel, with Approve (keep it as theirs: vetted) and
Deny (forget it). No answer within the approval timeout leaves it unvetted, for `agent memory
list --unvetted` later. Asked in the background: the chat's reply does not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence

from agent.runtime.approvals import defanged
from channels.base import ApprovalQuestion, Channel, ChatRef, MayAnswer
from tools.background import stop_tasks
from tools.memory.store import Memory, MemoryStore

log = logging.getLogger(__name__)

UNANSWERED = "⌛ No answer: it stays unvetted (agent memory vet ID, or forget ID)"


class MemoryVetting:
    """The vetting questions of one channel's turns, each a task of its own."""

    def __init__(
        self,
        channel: Channel,
        memory: MemoryStore,
        owner: tuple[Callable[[], Awaitable[ChatRef | None]], MayAnswer],
        timeout_s: Callable[[], float],
    ) -> None:
        self._channel = channel
        self._memory = memory
        self._owner_chat, self._is_owner = owner
        self._timeout_s = timeout_s
        self._asking: set[asyncio.Task[None]] = set()

    def offer(self, ids: Sequence[int], from_chat: ChatRef) -> None:
        """Ask the owner about each of `ids`, kept by a turn in `from_chat`."""
        task = asyncio.create_task(self._ask_all(tuple(ids), from_chat))
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def close(self) -> None:
        """Stop asking (the memories stay unvetted)."""
        await stop_tasks(*self._asking)

    async def _ask_all(self, ids: tuple[int, ...], from_chat: ChatRef) -> None:
        owner = await self._owner_chat()
        if owner is None:
            log.info("%s: no private chat of the owner's to ask about %s", from_chat.key, ids)
            return
        for ident in ids:
            memory = await self._memory.get(ident)
            if memory is not None and memory.unvetted:
                await self._ask(owner, memory, from_chat)

    async def _ask(self, owner: ChatRef, memory: Memory, from_chat: ChatRef) -> None:
        where = "" if from_chat == owner else f" in {from_chat.key}"
        text = defanged(
            f"A turn{where} kept memory #{memory.id} {memory.unvetted}:\n“{memory.content}”\n"
            "Approve: keep it as yours. Deny: forget it."
        )
        question = ApprovalQuestion(
            f"vet-{memory.id}-{uuid.uuid4().hex[:8]}", text, always=False, unanswered=UNANSWERED
        )
        try:
            async with asyncio.timeout(self._timeout_s()):
                answer = await self._channel.ask_approval(owner, question, self._is_owner)
        except TimeoutError:
            return
        except Exception as exc:  # the owner blocked the bot, the network…: the CLI remains
            log.warning("could not ask the owner about memory #%d: %s", memory.id, exc)
            return
        if answer == "deny":
            await self._memory.forget(None, id=memory.id)
        else:
            await self._memory.vet(memory.id)
        log.info("memory #%d: the owner said %s", memory.id, answer)
