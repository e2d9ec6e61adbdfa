"""Store: state.db and the three tables every channel's runtime keeps its chats in."""

from __future__ import annotations

from dataclasses import dataclass

from agent.durable.file.state_db import StateDB
from agent.durable.inbox import Inbox
from agent.durable.outbox import Outbox
from agent.durable.sessions import SessionStore


@dataclass(frozen=True)
class Store:
    """state.db and the three things kept in it."""

    db: StateDB
    sessions: SessionStore
    inbox: Inbox
    outbox: Outbox
