"""The memory store of a configuration: where its memories are kept (state.db, or the
shared PostgreSQL) and whether they are searched by meaning too. Here, below the app, so
`agent memory` opens them without importing the daemon's whole wiring."""

from __future__ import annotations

from agent.config import Settings
from agent.conversation.scopes import LegacyScope
from agent.durable.file.state_db import StateDB
from agent.model.side_calls import embed
from tools.memory.store import Embedder, MemoryStore
from tools.memory.text_index import POSTGRES


def memory_embedder(settings: Settings) -> Embedder | None:
    """Embeddings for the memory store, when `memory.embedding_model` is set (same provider
    endpoint and key as the chat model)."""
    model = settings.memory.embedding_model
    if not model:
        return None
    key = settings.llm.api_key

    async def embed_texts(texts: list[str]) -> list[list[float]]:
        secret = key.get_secret_value() if key is not None else None
        return await embed(texts, model, settings.llm.api_base, api_key=secret)

    return embed_texts


def memory_store(settings: Settings, state: StateDB | None = None) -> MemoryStore:
    """The memories, searched by meaning too when an embedding model is set: with [state] url
    in PostgreSQL, on the process's `state`; else in state.db, where memories from before
    scopes go to the person their chat can be traced to."""
    if settings.state_url:
        assert state is not None, "the memories on PostgreSQL are the opened state's"
        return MemoryStore(state, text=POSTGRES, embed=memory_embedder(settings))
    legacy = LegacyScope(settings.people)
    return MemoryStore(settings.state_db, embed=memory_embedder(settings), legacy_scope=legacy)
