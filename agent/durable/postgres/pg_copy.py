"""Every table pinclaw keeps, copied between state.db and PostgreSQL and checked row by row.

`agent state migrate --to URL` copies a home's state.db into an empty PostgreSQL database;
`agent state backup` (and the daemon's daily backup) on PostgreSQL copies the other way, into
a new file in state.db's format, so a shared store can be restored into a single-process
pinclaw. Both directions are the same code over two sides: each table's columns that both
sides have are read from the source in one snapshot and written to the target in one
transaction, then read back and compared with the source (every row, sorted the same way,
floats exactly); a copy that differs is rolled back whole. Ids keep their values, and the
target's id counters are set past every id the source handed out (deleted rows' included),
so no id is given twice. The memories' search indexes are each store's own (FTS5 tables, or
PostgreSQL's terms and folded columns): made again from the rows on the side copied to.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import psycopg
from psycopg import sql

from agent.durable.file.backups import Backup
from agent.durable.file.migrations import LATEST, migrate
from agent.durable.file.state_errors import StateError
from agent.durable.postgres import pg_schema
from agent.durable.postgres.pg_connection import PgConnection
from agent.home import PRIVATE_DIR_MODE, create_private_file
from tools.memory import schema as memory_schema
from tools.memory.text_index import POSTGRES

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Copied:
    table: str
    rows: int


class CopyRefused(Exception):
    """Nothing was copied, and why (one line): a target that already holds rows, or one
    that lacks a table of the source's."""


class CopyDiffers(Exception):
    """The copy read back is not its source (or could not be written): rolled back; `str()`
    names the table, never a row's content."""


class Side(Protocol):
    """One store's tables, inside the transaction the caller holds."""

    def tables(self) -> dict[str, list[str]]:
        """Each table of pinclaw's, with its columns in order."""
        ...

    def rows(self, table: str, columns: Sequence[str]) -> list[Row]: ...

    def write(self, table: str, columns: Sequence[str], rows: list[Row]) -> None: ...

    def last_id(self, table: str) -> int:
        """The highest id this side handed out in `table` (0: none, or no id counter)."""
        ...

    def set_last_id(self, table: str, value: int) -> None: ...


class SQLiteSide:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def tables(self) -> dict[str, list[str]]:
        found = self.conn.execute(
            "SELECT name, sql LIKE 'CREATE VIRTUAL%' FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        indexes = tuple(str(name) for name, virtual in found if virtual)  # and their shadows
        return {
            str(name): [row[1] for row in self.conn.execute(f'PRAGMA table_info("{name}")')]
            for name, _ in found
            if not str(name).startswith(indexes)
        }

    def rows(self, table: str, columns: Sequence[str]) -> list[Row]:
        return self.conn.execute(f"SELECT {_names(columns)} FROM {_quoted(table)}").fetchall()

    def write(self, table: str, columns: Sequence[str], rows: list[Row]) -> None:
        marks = ", ".join("?" for _ in columns)
        self.conn.executemany(
            f"INSERT INTO {_quoted(table)} ({_names(columns)}) VALUES ({marks})", rows
        )

    def last_id(self, table: str) -> int:
        (top,) = self.conn.execute(f"SELECT MAX(rowid) FROM {_quoted(table)}").fetchone()
        return max(self._counter(table), int(top or 0))  # an INTEGER PRIMARY KEY is the rowid

    def set_last_id(self, table: str, value: int) -> None:
        """Only an AUTOINCREMENT table keeps a counter (sqlite_sequence); the others hand
        out the highest id + 1, which the copied rows already set."""
        if self._autoincrement(table) and self._counter(table) < value:
            self.conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (table,))
            self.conn.execute("INSERT INTO sqlite_sequence VALUES (?, ?)", (table, value))

    def _autoincrement(self, table: str) -> bool:
        row = self.conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        return bool(row) and "AUTOINCREMENT" in str(row[0]).upper()

    def _counter(self, table: str) -> int:
        if not self._autoincrement(table):
            return 0
        row = self.conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        ).fetchone()
        return int(row[0]) if row else 0


class PostgresSide:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def tables(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for table, column in self.conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name <> 'pinclaw_meta'"
            " AND table_name IN (SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')"
            " ORDER BY table_name, ordinal_position"
        ):
            found.setdefault(str(table), []).append(str(column))
        return found

    def rows(self, table: str, columns: Sequence[str]) -> list[Row]:
        query = sql.SQL("SELECT {} FROM {}").format(_pg_names(columns), sql.Identifier(table))
        return [tuple(row) for row in self.conn.execute(query)]

    def write(self, table: str, columns: Sequence[str], rows: list[Row]) -> None:
        query = sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), _pg_names(columns))
        with self.conn.cursor().copy(query) as copy:
            for row in rows:
                copy.write_row(row)

    def last_id(self, table: str) -> int:
        if table not in self._counted():
            return 0
        query = (
            "SELECT GREATEST(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass),"
            " (SELECT MAX(id) FROM {}))"
        )
        return _one(self.conn, sql.SQL(query).format(sql.Identifier(table)), (table,))

    def set_last_id(self, table: str, value: int) -> None:
        if table in self._counted() and value > 0:
            self.conn.execute("SELECT setval(pg_get_serial_sequence($1, 'id'), $2)", (table, value))

    def _counted(self) -> set[str]:
        """The tables whose id is an identity column (state.db's INTEGER PRIMARY KEY)."""
        rows = self.conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema ="
            " current_schema() AND column_name = 'id' AND is_identity = 'YES'"
        )
        return {str(table) for (table,) in rows}

    def counts(self) -> list[tuple[str, int]]:
        """Rows per table, by name."""
        return [(table, _one(self.conn, _count(table))) for table in self.tables()]


def copy_tables(source: Side, target: Side) -> list[Copied]:
    """Every table of the source into the target, inside the transactions the caller holds,
    then compared; CopyRefused when the target lacks a table, CopyDiffers when the copy read
    back is not the source."""
    have, want = source.tables(), target.tables()
    lacking = sorted(set(have) - set(want))
    if lacking:
        raise CopyRefused(f"the target has no table {', '.join(lacking)}")
    shared = {table: [c for c in columns if c in have[table]] for table, columns in want.items()}
    copied = []
    for table, columns in shared.items():
        rows = source.rows(table, columns) if table in have else []
        target.write(table, columns, rows)
        target.set_last_id(table, source.last_id(table))
        copied.append(Copied(table, len(rows)))
    for table, columns in shared.items():
        if table in have:
            _compare(table, columns, source.rows(table, columns), target.rows(table, columns))
    return copied


def migrate_to(state_db: Path, url: str) -> list[Copied]:
    """Copy `state_db` (at this pinclaw's schema version) into the PostgreSQL database at
    `url`, its tables made when missing: all of it in one transaction there, or nothing.
    CopyRefused (also when the database already holds rows, or is another program's),
    CopyDiffers; StateError when the server cannot be reached."""
    target = PgConnection.connect(url)
    try:
        with _snapshot(state_db) as source, target.raw.transaction():
            pg_schema.ensure(target.raw)
            side = PostgresSide(target.raw)
            full = [f"{table} {count}" for table, count in side.counts() if count]
            if full:
                raise CopyRefused(
                    f"it already holds pinclaw's rows ({', '.join(full[:4])}); migrate into "
                    "an empty database (createdb), or keep using the one it is"
                )
            copied = _copy(SQLiteSide(source), side)
            _reindex_postgres(target)
            return copied
    except pg_schema.SchemaRefused as exc:
        raise CopyRefused(str(exc)) from exc
    except psycopg.Error as exc:  # not ours to write, or gone: rolled back, nothing copied
        raise CopyRefused(f"PostgreSQL: {_first_line(exc)}") from exc
    finally:
        target.close()


def backup(url: str, dest: Path) -> Backup:
    """A state.db-format copy of the PostgreSQL store at `url`, in `dest` (a new file, 0600
    in a 0700 folder): the tables made at this pinclaw's version, every row, the memories'
    indexes; checked (quick_check) before it is kept. StateError when the server cannot be
    reached; CopyDiffers when the copy is not what the server holds."""
    dest.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    if not create_private_file(dest):
        raise FileExistsError(f"{dest} exists already; name another file")
    source = PgConnection.connect(url)
    try:
        with contextlib.closing(sqlite3.connect(dest, isolation_level=None)) as copy:
            migrate(copy, dest)  # every table, at LATEST, marked pinclaw's
            source.raw.read_only = True
            source.raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # one snapshot
            with source.raw.transaction():
                copy.execute("BEGIN IMMEDIATE")
                _copy(PostgresSide(source.raw), SQLiteSide(copy))
                memory_schema.reindex(copy)
                copy.execute("COMMIT")
            verdict = copy.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                raise CopyDiffers(f"the copy is damaged: {verdict}")
    except psycopg.Error as exc:
        dest.unlink(missing_ok=True)
        raise StateError(f"PostgreSQL: {_first_line(exc)}") from exc
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    return Backup(dest, dest.stat().st_size, LATEST)


def _copy(source: Side, target: Side) -> list[Copied]:
    try:
        return copy_tables(source, target)
    except (psycopg.DataError, psycopg.IntegrityError, sqlite3.IntegrityError) as exc:
        raise CopyDiffers(f"a row could not be written: {_first_line(exc)}") from exc


def _reindex_postgres(conn: PgConnection) -> None:
    """The memories' search terms and folded text (tools/memory/text_index.py), made from
    the copied rows."""
    POSTGRES.reindex(cast(sqlite3.Connection, conn))


@contextlib.contextmanager
def _snapshot(state_db: Path) -> Iterator[sqlite3.Connection]:
    """A read transaction on `state_db`: every table as it was at its first read, however
    another process writes meanwhile (WAL keeps that snapshot)."""
    with contextlib.closing(sqlite3.connect(state_db, isolation_level=None, timeout=10)) as conn:
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")


def _compare(table: str, columns: Sequence[str], source: list[Row], copy: list[Row]) -> None:
    if len(source) != len(copy):
        raise CopyDiffers(f"{table}: {len(source)} rows in the source, {len(copy)} in the copy")
    for mine, theirs in zip(sorted(source, key=_order), sorted(copy, key=_order), strict=True):
        if mine != theirs or [type(v) for v in mine] != [type(v) for v in theirs]:
            differ = [c for c, a, b in zip(columns, mine, theirs, strict=True) if a != b]
            raise CopyDiffers(
                f"{table}: a row differs in the copy ({', '.join(differ) or 'a value type'})"
            )


def _order(row: Row) -> tuple[tuple[int, Any], ...]:
    """A key that sorts any mix of NULL, numbers, text and bytes the same on both sides."""
    return tuple(
        (0, 0)
        if value is None
        else (1, value)
        if isinstance(value, int | float)
        else (2, value)
        if isinstance(value, str)
        else (3, bytes(value))
        for value in row
    )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _names(columns: Sequence[str]) -> str:
    return ", ".join(_quoted(column) for column in columns)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pg_names(columns: Sequence[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(column) for column in columns)


def _one(conn: psycopg.Connection[Any], query: sql.Composed, params: Row = ()) -> int:
    row = conn.execute(query, params).fetchone()
    return int(row[0] or 0) if row else 0


def _count(table: str) -> sql.Composed:
    return sql.SQL("SELECT COUNT(*) FROM {}").format(sql.Identifier(table))
