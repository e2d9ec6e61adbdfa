"""The failures of state.db the rest of pinclaw tells apart come out of StateDB as the durable
layer's own exceptions (agent/durable/file/state_errors.py): a lock held too long is
StateBusy, no room is StateFull (and marks the disk full), a file that is not a database is
StateBroken. Any other SQLite error (a bug) keeps its own type. On PostgreSQL the same
exceptions come out of the server's errors (agent/durable/postgres/pg_connection.py): a lock
held past the busy timeout and a dropped connection are StateBusy, and the store goes on."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import PostgresCluster

from agent.app import open_store
from agent.durable.file.state_db import StateDB
from agent.durable.file.state_errors import (
    StateBroken,
    StateBusy,
    StateError,
    StateFull,
    translated,
)

SCHEMA = "CREATE TABLE IF NOT EXISTS notes (body BLOB);"


async def test_a_lock_held_by_another_connection_is_state_busy(tmp_path: Path) -> None:
    db = await StateDB(tmp_path / "state.db").open(SCHEMA)
    await db.read(lambda conn: conn.execute("PRAGMA busy_timeout = 50"))
    with contextlib.closing(sqlite3.connect(tmp_path / "state.db")) as other:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StateBusy) as raised:
            await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (x'00')"))
        other.execute("ROLLBACK")
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert not db.health.full
    await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (x'00')"))  # goes on
    await db.close()


async def test_no_room_is_state_full_and_marks_the_disk_full(tmp_path: Path) -> None:
    db = await StateDB(tmp_path / "state.db").open(SCHEMA)

    def cap(conn: sqlite3.Connection) -> None:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")

    await db.read(cap)
    with pytest.raises(StateFull, match="full"):
        await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (zeroblob(65536))"))
    assert db.health.full
    await db.close()


def test_a_file_that_is_not_a_database_is_state_broken(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"not a database, only some text, " * 64)
    with contextlib.closing(sqlite3.connect(path)) as conn, pytest.raises(sqlite3.Error) as raw:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    found = translated(raw.value)
    assert isinstance(found, StateBroken) and isinstance(found, StateError)
    assert str(found) == str(raw.value)


def test_other_sqlite_errors_are_left_as_they_are() -> None:
    assert translated(sqlite3.IntegrityError("UNIQUE constraint failed: notes.body")) is None
    assert translated(ValueError("not SQLite's")) is None


# -- PostgreSQL --------------------------------------------------------------------------------


async def test_on_postgresql_a_lock_held_by_another_session_is_state_busy(
    postgres: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres.new_database()
    store = await open_store(tmp_path / "state.db", url=url)
    db = store.db
    assert await db.fetchall("SHOW lock_timeout") == [("5s",)]  # state.db's busy timeout
    await db.read(lambda conn: conn.execute("SET lock_timeout = 50"))
    rule = "INSERT INTO approvals VALUES ('/w', 'shell:rm', 0)"
    with psycopg.connect(url) as other:
        other.execute("LOCK TABLE approvals")  # held until `other`'s transaction ends
        with pytest.raises(StateBusy) as raised:
            await db.write(lambda conn: conn.execute(rule))
    assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
    await db.write(lambda conn: conn.execute(rule))  # goes on
    assert await db.fetchall("SELECT rule FROM approvals") == [("shell:rm",)]
    await store.close()


async def test_on_postgresql_a_dropped_connection_is_state_busy_then_made_again(
    postgres: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres.new_database()
    store = await open_store(tmp_path / "state.db", url=url)
    [(pid,)] = await store.db.fetchall("SELECT pg_backend_pid()")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StateBusy):
        await store.db.fetchall("SELECT 1")
    assert await store.sessions.count("t:1:") == 0  # connected afresh
    [(again,)] = await store.db.fetchall("SELECT pg_backend_pid()")
    assert again != pid
    await store.close()


async def test_on_postgresql_a_duplicate_key_is_integrity_error_and_nothing_of_it_stays(
    postgres: PostgresCluster, tmp_path: Path
) -> None:
    store = await open_store(tmp_path / "state.db", url=postgres.new_database())
    insert = "INSERT INTO approvals VALUES ('/w', ?, 0)"

    def twice(conn: sqlite3.Connection) -> None:
        conn.execute(insert, ("shell:ls",))
        conn.execute(insert, ("shell:ls",))

    with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
        await store.db.write(twice)
    assert await store.db.fetchall("SELECT rule FROM approvals") == []  # the first went too
    await store.db.write(lambda conn: conn.execute(insert, ("shell:rm",)))
    assert await store.db.fetchall("SELECT rule FROM approvals") == [("shell:rm",)]
    await store.close()
