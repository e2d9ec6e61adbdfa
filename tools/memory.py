"""Long-term memory: facts the agent keeps between conversations, in the state database.

Memories belong to the chat they were made in, so what one person tells the agent in a
private chat does not surface in a group or in someone else's chat. Recall ranks by how
many of the query's words a memory contains (then by recency): no embedding model to
download, and plenty for the few hundred notes a personal assistant keeps.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiosqlite

from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.config import MemorySettings

MAX_MEMORY_CHARS = 2_000
_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_key TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_by_chat ON memories (chat_key, id);
"""


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text) if len(word) > 1}


class MemoryTools:
    """memory_store, memory_recall and memory_forget over one SQLite file."""

    def __init__(
        self,
        db_path: Path,
        settings: MemorySettings,
        *,
        scrub: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._path = db_path
        self._settings = settings
        self._scrub = scrub  # nothing secret is kept, even when the model is told one

    def tools(self) -> list[FunctionTool]:
        return [
            FunctionTool(self.memory_store, name="memory_store", writes=True),
            FunctionTool(self.memory_recall, name="memory_recall"),
            FunctionTool(self.memory_forget, name="memory_forget", writes=True),
        ]

    @contextlib.asynccontextmanager
    async def _db(self) -> AsyncIterator[aiosqlite.Connection]:
        """A connection per call: memory tools are rare, and this keeps no state around."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        async with aiosqlite.connect(self._path) as db:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.executescript(_SCHEMA)
            yield db

    async def memory_store(self, call: ToolCallContext, content: str) -> ToolResult:
        """Remember a durable fact or preference for later conversations (one short fact per
        call; never secrets).

        Args:
            content: The fact, in one or two sentences, e.g. "The user's cat is called Miso."
        """
        content = self._scrub(content.strip())
        if not content:
            return ToolResult.error("content is empty; give the fact to remember")
        if len(content) > MAX_MEMORY_CHARS:
            return ToolResult.error(
                f"content is {len(content)} characters; keep a memory under "
                f"{MAX_MEMORY_CHARS} (store several short facts instead)"
            )
        async with self._db() as db:
            cursor = await db.execute(
                "INSERT INTO memories (chat_key, content, created_at) VALUES (?, ?, ?)",
                (call.chat_key, content, time.time()),
            )
            await db.commit()
        return ToolResult.success(f"Remembered as memory #{cursor.lastrowid}.")

    async def memory_recall(self, call: ToolCallContext, query: str) -> ToolResult:
        """Find remembered facts relevant to a question, best matches first, with their ids.

        Args:
            query: Words to look for, e.g. "cat name" or "favourite food".
        """
        wanted = _words(query)
        async with (
            self._db() as db,
            db.execute(
                "SELECT id, content, created_at FROM memories WHERE chat_key = ? ORDER BY id",
                (call.chat_key,),
            ) as cursor,
        ):
            rows = list(await cursor.fetchall())
        scored = [
            (len(wanted & _words(content)), created, ident, content)
            for ident, content, created in rows
        ]
        hits = sorted((s for s in scored if s[0] > 0), reverse=True)[: self._settings.max_recall]
        if not hits:
            return ToolResult.success(f"No memory matches {query!r} ({len(rows)} stored).")
        lines = [
            f"#{ident} ({time.strftime('%Y-%m-%d', time.localtime(created))}): {content}"
            for _, created, ident, content in hits
        ]
        return ToolResult.success("\n".join(lines))

    async def memory_forget(self, call: ToolCallContext, memory_id: int) -> ToolResult:
        """Delete a remembered fact that is wrong or no longer wanted.

        Args:
            memory_id: The number shown by memory_recall, e.g. 12 for "#12".
        """
        async with self._db() as db:
            cursor = await db.execute(
                "DELETE FROM memories WHERE id = ? AND chat_key = ?", (memory_id, call.chat_key)
            )
            await db.commit()
        if cursor.rowcount == 0:
            return ToolResult.error(f"No memory #{memory_id} in this chat; use memory_recall")
        return ToolResult.success(f"Forgot memory #{memory_id}.")
