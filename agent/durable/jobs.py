"""Jobs: work a turn handed to a sub-agent (the `delegate` tool), a row from the moment it
is asked until its result has reached the chat that asked, exactly once.

A job is `queued`, then `running`, then ends `done`, `failed`, `stopped` (past its time or
token limit) or `cancelled`. Its end and its delivery are one transaction: the result goes
into the outbox in it, or is marked taken by the turn that waited for it (`delivered`), so
a crash leaves either a job still to end or one whose result is on its way, never both and
never neither. A job that was running when pinclaw stopped runs again at the next start and
its effectful calls are not repeated: they are journalled in the tool journal like a
turn's, under the job's id negated (no inbox row has a negative id, so the inbox's trigger
never touches them), and the rows go when the job ends. `cancel_asked` is how a process
that does not run the job (`agent jobs cancel`) stops it: the runner reads it before each
model call, and a job that is not running is cancelled at once.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from agent.durable.file.state_db import StateDB, Transaction, inserted_id
from agent.durable.inbox import decode, encode
from agent.durable.tool_journal import KeyedJournal
from channels.base import IncomingMessage

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_key TEXT NOT NULL,
    origin TEXT NOT NULL,
    task TEXT NOT NULL,
    tools TEXT,
    model TEXT NOT NULL,
    time_limit_s REAL NOT NULL,
    token_limit INTEGER NOT NULL,
    tainted_by TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'queued',
    result TEXT NOT NULL DEFAULT '',
    tokens INTEGER NOT NULL DEFAULT 0,
    delivered TEXT NOT NULL DEFAULT '',
    cancel_asked INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, chat_key, id);
"""

JobState = Literal["queued", "running", "done", "failed", "stopped", "cancelled"]

_COLUMNS = (
    "id, chat_key, origin, task, tools, model, time_limit_s, token_limit, tainted_by, state,"
    " result, tokens, delivered, cancel_asked, created_at, started_at, finished_at"
)


@dataclass(frozen=True)
class Job:
    id: int
    chat_key: str  # the chat that asked: where the result goes
    origin: IncomingMessage  # the message whose turn asked: its chat and its person
    task: str
    tools: tuple[str, ...] | None  # the tools it may use; None: all of the asker's
    model: str
    time_limit_s: float
    token_limit: int
    tainted_by: str = ""  # what the asking turn had read that its owner did not write
    state: JobState = "queued"
    result: str = ""
    tokens: int = 0
    delivered: str = ""  # "": not yet; "turn": the waiting turn took it; "message"
    cancel_asked: bool = False
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def seconds(self) -> float:
        """How long it ran (so far)."""
        if self.started_at is None:
            return 0.0
        return (self.finished_at or time.time()) - self.started_at


def _job(row: Sequence[object]) -> Job:
    (id_, chat, origin, task, tools, model, limit_s, tokens_cap, taint) = row[:9]
    (state, result, tokens, delivered, cancel, created, started, finished) = row[9:]
    return Job(
        int(str(id_)),
        str(chat),
        decode(str(origin)),
        str(task),
        None if tools is None else tuple(json.loads(str(tools))),
        str(model),
        float(str(limit_s)),
        int(str(tokens_cap)),
        str(taint),
        state,  # type: ignore[arg-type]  # the table holds only JobState's words
        str(result),
        int(str(tokens)),
        str(delivered),
        bool(cancel),
        float(str(created)),
        None if started is None else float(str(started)),
        None if finished is None else float(str(finished)),
    )


class Jobs:
    """The jobs table of state.db."""

    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def add(self, job: Job) -> Job:
        """The job's row, written before anything of it runs; the job with its id."""
        tools = None if job.tools is None else json.dumps(list(job.tools))
        values = (
            job.chat_key,
            encode(job.origin),
            job.task,
            tools,
            job.model,
            job.time_limit_s,
            job.token_limit,
            job.tainted_by,
            time.time(),
        )

        def insert(conn: Transaction) -> int:
            return inserted_id(
                conn.execute(
                    "INSERT INTO jobs (chat_key, origin, task, tools, model, time_limit_s,"
                    " token_limit, tainted_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " RETURNING id",
                    values,
                )
            )

        return replace(job, id=await self.db.write(insert), created_at=values[-1])

    async def started(self, job_id: int) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE jobs SET state = 'running', started_at = COALESCE(started_at, ?)"
                " WHERE id = ? AND state IN ('queued', 'running')",
                (time.time(), job_id),
            )
        )

    def end_in(
        self,
        conn: Transaction,
        job_id: int,
        state: JobState,
        result: str,
        tokens: int,
        delivered: str,
    ) -> bool:
        """The job's end, inside the transaction that delivers its result (the outbox row,
        or nothing when the waiting turn takes it); False when it had ended already."""
        cursor = conn.execute(
            "UPDATE jobs SET state = ?, result = ?, tokens = ?, delivered = ?,"
            " finished_at = ? WHERE id = ? AND state IN ('queued', 'running')",
            (state, result, tokens, delivered, time.time(), job_id),
        )
        if cursor.rowcount == 0:
            return False
        conn.execute("DELETE FROM tool_journal WHERE inbox_id = ?", (-job_id,))
        return True

    @staticmethod
    def redeliver_in(conn: Transaction, job_id: int) -> None:
        """A result handed to a turn that stopped before reading it goes as a message."""
        conn.execute("UPDATE jobs SET delivered = 'message' WHERE id = ?", (job_id,))

    async def ask_cancel(self, job_id: int) -> Job | None:
        """Mark the job to be cancelled (the runner stops it at its next step); None: no
        such job."""

        def write(conn: Transaction) -> Job | None:
            conn.execute(
                "UPDATE jobs SET cancel_asked = 1 WHERE id = ? AND state IN ('queued', 'running')",
                (job_id,),
            )
            return _get(conn, job_id)

        return await self.db.write(write)

    async def cancel_asked(self, job_id: int) -> bool:
        row = await self.db.fetchone("SELECT cancel_asked FROM jobs WHERE id = ?", (job_id,))
        return row is not None and bool(row[0])

    async def get(self, job_id: int) -> Job | None:
        return await self.db.read(lambda conn: _get(conn, job_id))

    async def latest(self, chat_key: str, task: str) -> Job | None:
        """The chat's newest job with this task (what a delegate call cut off started)."""
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM jobs WHERE chat_key = ? AND task = ? ORDER BY id DESC",
            (chat_key, task),
        )
        return None if row is None else _job(row)

    async def unfinished(self, channel: str) -> list[Job]:
        """The channel's jobs an earlier run left queued or running, oldest first."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM jobs WHERE state IN ('queued', 'running')"
            " AND chat_key LIKE ? ESCAPE '\\' ORDER BY id",
            (_like_prefix(channel + ":"),),
        )
        return [_job(row) for row in rows]

    async def listed(self, chat_key: str | None = None, limit: int = 20) -> list[Job]:
        """The newest jobs (of one chat), the running ones first."""
        where, params = ("WHERE chat_key = ?", (chat_key,)) if chat_key else ("", ())
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM jobs {where}"
            " ORDER BY state IN ('queued', 'running') DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [_job(row) for row in rows]


def _get(conn: sqlite3.Connection, job_id: int) -> Job | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else _job(row)


def _like_prefix(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


class JobJournal(KeyedJournal):
    """A job's effectful calls (tools.base.CallJournal) in the tool journal, under the job's
    id negated: a job run again after a crash gives back what its calls did and does not
    repeat them."""

    def __init__(self, db: StateDB, job_id: int) -> None:
        super().__init__(db)
        self._job_key = -job_id

    def _key_in(self, conn: sqlite3.Connection) -> int | None:
        return self._job_key
