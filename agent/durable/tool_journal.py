"""The tool journal: a turn's effectful calls, so that a turn run again does not act twice.

A message stays pending in the inbox until its turn commits; a crash in between runs the
turn again. Before an effectful call runs (tools.base.has_effects), its intent is committed
here, keyed to the message's inbox row; after it, its outcome. When the same message runs
again, each call the model makes is matched, in order, to a journalled call of the same tool
with the same (canonical, scrubbed) arguments: one that finished gives back its recorded
result and is not run; one cut off with no outcome is not run blindly either: the tool
checks the world itself where it can (a pin read back, a file compared), a tool whose calls
are safe to repeat runs again, and any other says its outcome is unknown. The model then
decides. A call the journal does not hold runs as always. The rows go when the message
stops being pending (a trigger on the inbox: in the transaction that commits the turn).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from agent.durable.file.state_db import StateDB, inserted_id
from agent.model.responses import ToolCall
from channels.base import IncomingMessage
from tools.base import (
    CallJournal,
    JournalEntry,
    ToolCallContext,
    ToolRegistry,
    ToolResult,
    has_effects,
    is_repeat_safe,
    recheck,
)

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    inbox_id INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    started_at REAL NOT NULL,
    ok INTEGER,
    result TEXT,
    finished_at REAL,
    tainted_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tool_journal_by_turn ON tool_journal (inbox_id, id);
CREATE TRIGGER IF NOT EXISTS tool_journal_done AFTER UPDATE OF status ON inbox
    WHEN NEW.status != 'pending'
BEGIN
    DELETE FROM tool_journal WHERE inbox_id = NEW.id;
END;
"""  # after the inbox's SCHEMA: the trigger needs its table
# Version 10 (agent/durable/file/migrations.py): the untrusted sources a call's result held,
# a line each, so that its turn run again is marked with them (tools/taint.py).
TAINTED_BY = "ALTER TABLE tool_journal ADD COLUMN tainted_by TEXT NOT NULL DEFAULT ''"

RECORDED = "[Not run again: this call already ran before pinclaw restarted. Its result then:]"
UNKNOWN = (
    "Not run again: this call ({tool}) was running when pinclaw stopped; its outcome is "
    "unknown — check before repeating it."
)
CHECKED = (
    "Not run again: this call ({tool}) was running when pinclaw stopped and its outcome was "
    "not recorded. Checked now: {finding}"
)
RAN_AGAIN = (
    "[This call ({tool}) was running when pinclaw stopped and its outcome was not recorded; "
    "it is safe to repeat, so it ran again:]"
)

NOT_JOURNALLED = "Not run: pinclaw could not record the call first, so nothing was done"

Execute = Callable[[], Awaitable[ToolResult]]


def canonical(arguments: str) -> str:
    """The arguments as one text per meaning: keys sorted, spacing normalised (as written
    when they are not JSON, or nested deeper than Python reads)."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return arguments


class KeyedJournal:
    """Effectful calls journalled under one key of `tool_journal.inbox_id`: an inbox row's id
    for a turn (ToolJournal), a job's id negated for a job (agent/durable/jobs.py). A
    subclass says how the key is found; None (nothing that runs again) journals nothing."""

    def __init__(self, db: StateDB) -> None:
        self._db = db
        self._key: int | None = None
        self._entries: list[JournalEntry] | None = None
        self._loading = asyncio.Lock()

    def _key_in(self, conn: sqlite3.Connection) -> int | None:
        raise NotImplementedError

    def _may_journal(self) -> bool:
        """False when no key can be found without asking state.db (then it is not asked)."""
        return True

    async def entries(self) -> Sequence[JournalEntry]:
        """What earlier runs journalled under the key, and what this one did so far."""
        async with self._loading:
            if self._entries is None:
                found = await self._db.read(self._load) if self._may_journal() else (None, [])
                self._key, self._entries = found
            return list(self._entries)

    async def start(self, tool: str, call_id: str, arguments: str) -> JournalEntry | None:
        """The intent, committed before the call runs; None when nothing is journalled."""
        await self.entries()
        key = self._key
        if key is None or self._entries is None:
            return None
        row = (key, call_id, tool, arguments, time.time())
        entry_id = await self._db.write(
            lambda conn: inserted_id(
                conn.execute(
                    "INSERT INTO tool_journal (inbox_id, call_id, tool, arguments, started_at)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING id",
                    row,
                )
            )
        )
        entry = JournalEntry(entry_id, tool, arguments, None)
        self._entries.append(entry)
        return entry

    async def finish(
        self, entry: JournalEntry, result: ToolResult, tainted_by: Sequence[str] = ()
    ) -> None:
        """The outcome (scrubbed already), committed once the call returned, with the
        untrusted sources it brought into its turn."""
        sources = "\n".join(tainted_by)
        values = (int(result.ok), result.output, time.time(), sources, entry.id)
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE tool_journal SET ok = ?, result = ?, finished_at = ?, tainted_by = ?"
                " WHERE id = ?",
                values,
            )
        )
        if self._entries is not None:
            done = replace(entry, result=result, tainted_by=tuple(tainted_by))
            self._entries = [done if e.id == entry.id else e for e in self._entries]

    def _load(self, conn: sqlite3.Connection) -> tuple[int | None, list[JournalEntry]]:
        key = self._key_in(conn)
        if key is None:
            return None, []
        rows = conn.execute(
            "SELECT id, tool, arguments, ok, result, tainted_by FROM tool_journal"
            " WHERE inbox_id = ? ORDER BY id",
            (key,),
        ).fetchall()
        return key, [
            JournalEntry(
                id,
                tool,
                args,
                None if ok is None else ToolResult(bool(ok), result),
                tuple(filter(None, sources.split("\n"))),
            )
            for id, tool, args, ok, result, sources in rows
        ]


class ToolJournal(KeyedJournal):
    """The journal of one inbox message's turn, in state.db. A message with no pending inbox
    row (a one-shot, which nothing runs again) journals nothing."""

    def __init__(self, db: StateDB, msg: IncomingMessage) -> None:
        super().__init__(db)
        self._chat_key = msg.chat.key
        self._message_id = msg.message_id

    def _may_journal(self) -> bool:
        return bool(self._message_id)

    def _key_in(self, conn: sqlite3.Connection) -> int | None:
        row = conn.execute(
            "SELECT id FROM inbox WHERE chat_key = ? AND message_id = ? AND status = 'pending'",
            (self._chat_key, self._message_id),
        ).fetchone()
        return None if row is None else int(row[0])


class CallReplay:
    """One run of the tool-call loop over a turn's journal: which calls the journal already
    holds (each matched at most once per run), and how each effectful call runs."""

    def __init__(
        self,
        journal: CallJournal,
        tools: ToolRegistry,
        scrub: Callable[[str], str],
        timeout_s: float,
    ) -> None:
        self._journal = journal
        self._tools = tools
        self._scrub = scrub
        self._timeout_s = timeout_s
        self._claimed: set[int] = set()  # entries matched, or started, in this run

    def _effectful(self, call: ToolCall) -> bool:
        tool = self._tools.get(call.name)
        return tool is not None and has_effects(tool)

    def _key(self, call: ToolCall) -> str:
        return self._scrub(canonical(call.arguments))

    async def claim(
        self, calls: Sequence[ToolCall], skipped: Sequence[bool]
    ) -> list[JournalEntry | None]:
        """For each call in order, the earliest journalled call of the same tool and
        arguments not matched yet (None: it runs normally). `skipped` calls match nothing."""
        wanted = [not skip and self._effectful(c) for c, skip in zip(calls, skipped, strict=True)]
        if not any(wanted):
            return [None] * len(calls)
        entries = await self._journal.entries()
        claims: list[JournalEntry | None] = []
        for call, want in zip(calls, wanted, strict=True):
            key = (call.name, self._key(call))
            free = (e for e in entries if e.id not in self._claimed)
            hit = next((e for e in free if (e.tool, e.arguments) == key), None) if want else None
            if hit is not None:
                self._claimed.add(hit.id)
            claims.append(hit)
        return claims

    async def run(
        self,
        call: ToolCall,
        claim: JournalEntry | None,
        execute: Execute,
        context: ToolCallContext,
    ) -> ToolResult:
        """Run the call through the journal: `execute` runs it and scrubs the result."""
        if not self._effectful(call):
            return await execute()
        if claim is None:
            try:
                entry = await self._journal.start(call.name, call.id, self._key(call))
            except Exception as exc:  # no effect whose intent is not on disk first
                log.error("%s: its intent could not be journalled: %s", call.name, exc)
                return ToolResult.error(f"{NOT_JOURNALLED} ({type(exc).__name__}: {exc})")
            if entry is not None:
                self._claimed.add(entry.id)
            result, brought = await _tainting(execute, context)
            if entry is not None:
                await self._finish(entry, result, brought)
            return result
        if claim.result is not None:
            for source in claim.tainted_by:  # its words are back in the turn: so is its taint
                context.taint.read(source)
            recorded = claim.result
            return ToolResult(recorded.ok, f"{RECORDED}\n{recorded.output}")
        return await self._cut_off(call, claim, execute, context)

    async def _cut_off(
        self, call: ToolCall, claim: JournalEntry, execute: Execute, context: ToolCallContext
    ) -> ToolResult:
        """A call that started before a crash and has no outcome: checked, run again when
        that is safe, else reported as unknown."""
        tool = self._tools.get(call.name)
        assert tool is not None
        found = await self._recheck(call, context)
        if found is not None:
            finding = self._scrub(found.output)
            return ToolResult(found.ok, CHECKED.format(tool=call.name, finding=finding))
        if is_repeat_safe(tool):
            result, brought = await _tainting(execute, context)
            await self._finish(claim, result, brought)
            return ToolResult(result.ok, f"{RAN_AGAIN.format(tool=call.name)}\n{result.output}")
        return ToolResult.error(UNKNOWN.format(tool=call.name))

    async def _finish(
        self, entry: JournalEntry, result: ToolResult, tainted_by: Sequence[str]
    ) -> None:
        """Record the outcome; when that fails the result still reaches the model, and a
        run after a crash finds the call cut off (never repeated blindly)."""
        try:
            await self._journal.finish(entry, result, tainted_by)
        except Exception as exc:
            log.error("%s: its outcome could not be journalled: %s", entry.tool, exc)

    async def _recheck(self, call: ToolCall, context: ToolCallContext) -> ToolResult | None:
        """The tool's own look at the world (None: it has none, or it failed)."""
        tool = self._tools.get(call.name)
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError:
            return None
        if tool is None or not isinstance(args, dict):
            return None
        try:
            async with asyncio.timeout(self._timeout_s):
                return await recheck(tool, args, context)
        except Exception:
            log.exception("%s: checking a call cut off by a crash failed", call.name)
            return None


async def _tainting(execute: Execute, context: ToolCallContext) -> tuple[ToolResult, list[str]]:
    """The call's result, and the untrusted sources its turn gained while it ran (a call
    beside it in the same reply may have added some: kept too, as more taint is safe)."""
    before = len(context.taint.sources)
    result = await execute()
    return result, context.taint.sources[before:]
