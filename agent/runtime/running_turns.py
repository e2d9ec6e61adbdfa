"""The turns a channel is running, by chat, and each chat's last finished turn: what /stop
cancels (and a newer message interrupts) and /status reports, kept apart so commands need
not reach into turn answering. When processes share the store, a /stop or an interrupting
message taken by one process reaches the turn running in another as an announcement
(`heard`: STOP, FORGET, INTERRUPT)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from agent.model.responses import Message
from agent.turns.turn import TurnOutcome
from agent.turns.turn_record import TurnRecord

TURNS = "turns"  # the claim on a chat's turns (agent/runtime/queues/chat_queues.py)
STOP = "stop"  # announced: stop the chat's turn, wherever it runs
FORGET = "forget"  # announced by /new: stop it, and store nothing of it
INTERRUPT = "interrupt"  # announced: a newer message interrupts it


class RunningTurns:
    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[TurnOutcome]] = {}
        self.last: dict[str, TurnRecord] = {}  # by chat key
        self.interrupted: set[str] = set()  # stopped by a newer message: run again with it
        self.typed: set[str] = set()  # chats whose running turn answers a person (no trigger)
        self.forgotten: set[str] = set()  # stopped by /new: nothing of the turn is stored

    async def run(
        self,
        chat_key: str,
        turn: Coroutine[Any, Any, TurnOutcome],
        *,
        typed: bool,
        asked: Message,
    ) -> TurnOutcome:
        """The chat's turn run as the task /stop, /new and a newer message cancel — from its
        start, the history it reads (and may summarise, a model call) included. A shutdown
        cancels it too, and escapes: nothing is stored. Stopped, it keeps `asked` (the
        person's message), or nothing after /new; interrupted, nothing: it runs again."""
        task = asyncio.create_task(turn)
        self.running[chat_key] = task
        if typed:
            self.typed.add(chat_key)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                task.cancel()  # we were cancelled (shutdown): stop the turn too
                raise
            if chat_key in self.interrupted:  # a newer message: nothing of it is kept
                return TurnOutcome("interrupted", "", [], TurnRecord("cancelled"))
            kept = [] if chat_key in self.forgotten else [asked]
            return TurnOutcome("done", "Stopped.", kept, TurnRecord("cancelled"))
        finally:
            self.running.pop(chat_key, None)
            self.interrupted.discard(chat_key)
            self.typed.discard(chat_key)
            self.forgotten.discard(chat_key)

    def heard(self, kind: str, chat_key: str) -> None:
        """Another process's announcement about a chat whose turn may run here."""
        if kind == STOP:
            self.cancel(chat_key)
        elif kind == FORGET:
            self.forget(chat_key)
        elif kind == INTERRUPT:
            self.interrupt(chat_key)

    def cancel(self, chat_key: str) -> bool:
        """Stop the chat's running turn; False when none runs."""
        task = self.running.get(chat_key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def forget(self, chat_key: str) -> bool:
        """Stop the chat's running turn so that nothing of it is stored (/new: it would open
        the fresh conversation); False when none runs."""
        if chat_key in self.running:  # its own `finally` clears the mark
            self.forgotten.add(chat_key)
        return self.cancel(chat_key)

    def interrupt(self, chat_key: str) -> bool:
        """Stop the chat's running turn so that its messages run again with a newer one (a
        schedule's or the heartbeat's turn is left to finish: it would only run again)."""
        if chat_key in self.typed and self.cancel(chat_key):
            self.interrupted.add(chat_key)
            return True
        return False
