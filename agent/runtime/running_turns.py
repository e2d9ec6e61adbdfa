"""The turns a channel is running, by chat, and each chat's last finished turn: what /stop
cancels (and a newer message interrupts) and /status reports, kept apart so commands need
not reach into turn answering. When processes share the store, a /stop or an interrupting
message taken by one process reaches the turn running in another as an announcement
(`heard`: STOP, INTERRUPT)."""

from __future__ import annotations

import asyncio

from agent.turns.turn import TurnOutcome
from agent.turns.turn_record import TurnRecord

TURNS = "turns"  # the claim on a chat's turns (agent/runtime/queues/chat_queues.py)
STOP = "stop"  # announced: stop the chat's turn, wherever it runs
INTERRUPT = "interrupt"  # announced: a newer message interrupts it


class RunningTurns:
    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[TurnOutcome]] = {}
        self.last: dict[str, TurnRecord] = {}  # by chat key
        self.interrupted: set[str] = set()  # stopped by a newer message: run again with it
        self.typed: set[str] = set()  # chats whose running turn answers a person (no trigger)
        self.forgotten: set[str] = set()  # stopped by /new: nothing of the turn is stored

    def heard(self, kind: str, chat_key: str) -> None:
        """Another process's announcement about a chat whose turn may run here."""
        if kind == STOP:
            self.cancel(chat_key)
        elif kind == INTERRUPT:
            self.interrupt(chat_key)

    def cancel(self, chat_key: str) -> bool:
        """Stop the chat's running turn; False when none runs."""
        task = self.running.get(chat_key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def interrupt(self, chat_key: str) -> bool:
        """Stop the chat's running turn so that its messages run again with a newer one (a
        schedule's or the heartbeat's turn is left to finish: it would only run again)."""
        if chat_key in self.typed and self.cancel(chat_key):
            self.interrupted.add(chat_key)
            return True
        return False
