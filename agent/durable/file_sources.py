"""FileSources: the workspace files written by a turn that had read untrusted content.

A file keeps no mark of who wrote it, and a later turn (after /new, or another chat's) that
reads it would hold the same words as the page they came from. So the files a tainted turn,
or someone else's, writes are recorded here as they are written, with what it had read or
whose turn it was (tools/files.py, and tools/shell/shell_tool.py after each command), and
reading one taints the reader (both ask `source_of`). A file the owner's own
untainted turn writes again is theirs from then on. Paths are stored relative to the
workspace, so a moved home keeps its records.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from agent.durable.file.state_db import StateDB

SCHEMA = """
CREATE TABLE IF NOT EXISTS file_sources (
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    written_at REAL NOT NULL
);
"""


class FileSources:
    """The untrusted files of one workspace, in state.db."""

    def __init__(self, db: StateDB, workspace: Path) -> None:
        self._db = db
        self._workspace = workspace.resolve()

    async def source_of(self, path: Path) -> str:
        """What the turn that last wrote `path` had read ("": nothing untrusted, or a file
        outside the workspace)."""
        name = self._relative(path)
        if name is None:
            return ""
        row = await self._db.fetchone("SELECT source FROM file_sources WHERE path = ?", (name,))
        return str(row[0]) if row else ""

    async def record(self, paths: Iterable[Path], source: str) -> None:
        """`paths` were written by a turn that had read `source` ("": by the owner's own
        untainted turn, which makes them trusted again)."""
        names = [n for n in (self._relative(p) for p in paths) if n is not None]
        if not names:
            return

        def write(conn: sqlite3.Connection) -> None:
            if source:
                conn.executemany(
                    "INSERT INTO file_sources VALUES (?, ?, ?) ON CONFLICT (path)"
                    " DO UPDATE SET source = excluded.source, written_at = excluded.written_at",
                    [(name, source, time.time()) for name in names],
                )
            else:
                conn.executemany("DELETE FROM file_sources WHERE path = ?", [(n,) for n in names])

        await self._db.write(write)

    def _relative(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self._workspace).as_posix()
        except ValueError:
            return None
