"""A home moved to PostgreSQL and back: `agent state migrate --to URL` copies state.db (a real
daemon's chat, and a row in every other table) into a throw-away PostgreSQL database
(tests/postgres_cluster.py); a daemon on it answers with the migrated history; `agent state
check`, `agent state backup` and the commands that read the store beside the daemon (`agent
usage`, `agent pairing list`, `agent doctor`) read the server; the backup, made the home's
state.db, starts a single-process pinclaw that still has the chat. The URL's password is
never printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from conftest import TEST_MODEL, Daemon, eventually
from daemon_process import agent
from fakes.llm_server import FakeLLM
from fakes.telegram_server import FakeTelegram
from postgres_cluster import PostgresCluster

from agent.cli.main import cli
from agent.daemon.local_server import lock_home
from agent.daemon.serve import keep_backups
from agent.durable.file.backups import DAILY
from agent.durable.file.migrations import LATEST
from agent.durable.file.storage_health import StorageHealth
from agent.durable.postgres import pg_copy
from agent.durable.postgres.pg_connection import PgConnection
from agent.durable.postgres.pg_schema import ensure, found_version

PASSWORD = "pw-never-shown-7f3"
DELETED_MEMORY = 900  # a memory id state.db handed out, then deleted: never given again
# Rows the filler writes where a value means something to a starting daemon.
MEANINGFUL: dict[str, dict[str, Any]] = {
    "memories": {"source": "tool", "tags": '["kept"]'},
    "jobs": {"state": "done", "delivered": "message"},
    "schedules": {"status": "cancelled"},
    "pairing_codes": {"status": "denied"},
    "paired": {"channel": "telegram", "kind": "person", "id": "777", "name": "Mallory"},
    "actuations": {"at": 1.7e9, "pin": "pump", "board": "garage", "value": "high"},
}
VALUES: dict[str, Any] = {
    "INTEGER": 7,
    "REAL": 1 / 3,  # floats compared exactly
    "TEXT": "x 'q' \"d\" % é",
    "BLOB": bytes(range(256)),
}


def with_password(url: str) -> str:
    return url.replace("pinclaw@", f"pinclaw:{PASSWORD}@")


def fill_every_table(path: Path) -> list[str]:
    """A row in each table the daemon's turn left empty, every column set; the tables."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        side = pg_copy.SQLiteSide(conn)
        tables = side.tables()
        for table, columns in tables.items():
            if conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]:
                continue
            kinds = {row[1]: row[2] for row in conn.execute(f"PRAGMA table_info({table})")}
            row = {c: MEANINGFUL.get(table, {}).get(c, VALUES[kinds[c]]) for c in columns}
            marks = ", ".join("?" for _ in row)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})", [*row.values()]
            )
        conn.execute(
            "INSERT INTO memories (id, scope, content, created_at, updated_at) "
            f"VALUES ({DELETED_MEMORY}, 's', 'gone', 1, 1)"
        )
        conn.execute(f"DELETE FROM memories WHERE id = {DELETED_MEMORY}")
    return sorted(tables)


def both(path: Path, url: str, table: str) -> tuple[list[Any], list[Any]]:
    """The table's rows in state.db and in PostgreSQL, the columns of state.db, sorted."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        names = ", ".join(columns)
        mine = conn.execute(f"SELECT {names} FROM {table}").fetchall()
    with psycopg.connect(url) as server:
        theirs = [tuple(r) for r in server.execute(f"SELECT {names} FROM {table}")]  # type: ignore[call-overload]
    return sorted(mine, key=pg_copy._order), sorted(theirs, key=pg_copy._order)


def in_process(*commands: tuple[str, ...]) -> list[Result]:
    """Each `agent COMMAND` through click in this process, one after the other (the logging
    each sets up put back after)."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    try:
        return [
            CliRunner().invoke(cli, list(args), prog_name="agent", obj={}, catch_exceptions=False)
            for args in commands
        ]
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


async def chat(fake: FakeTelegram, text: str) -> None:
    fake.inject_message(42, 42, text)
    await fake.await_for(lambda m: m.chat_id == 42 and text in (m.plain or ""), timeout=20)


def said(fake_llm: FakeLLM) -> str:
    """Everything the model was sent in the last request."""
    return "\n".join(str(m.get("content")) for m in fake_llm.requests[-1]["messages"])


async def test_a_home_moved_to_postgres_keeps_its_history_and_comes_back_from_a_backup(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    postgres: PostgresCluster,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    async with daemon():
        await chat(fake_telegram, "my name is Ada")
    state_db = home / "state.db"
    tables = fill_every_table(state_db)
    url = with_password(postgres.new_database())

    moved = await asyncio.to_thread(agent, "state", "migrate", "--to", url)
    assert moved.returncode == 0, moved.stderr
    assert PASSWORD not in moved.stdout + moved.stderr
    lines = moved.stdout.splitlines()
    assert lines[0].startswith("copied: ") and "memories 1" in lines[0] and "paired 1" in lines[0]
    assert lines[1].startswith(f"checked: every row of {len(tables)} tables in postgresql://")
    assert lines[2].startswith("next: set PINCLAW_STATE__URL")
    for table in tables:
        mine, theirs = both(state_db, url, table)
        assert mine and mine == theirs, table
    with psycopg.connect(url) as server:
        taken = server.execute("SELECT nextval(pg_get_serial_sequence('memories', 'id'))")
        assert taken.fetchone() == (DELETED_MEMORY + 1,)
        found = server.execute("SELECT id FROM memories WHERE terms @@ 'kept'::tsquery")
        assert found.fetchall() == [(7,)]  # the memories' search terms made from the rows

    again = await asyncio.to_thread(agent, "state", "migrate", "--to", url)
    assert again.returncode == 2
    assert "already holds pinclaw's rows" in again.stderr and PASSWORD not in again.stderr

    monkeypatch.setenv("PINCLAW_STATE__URL", url)
    async with daemon():  # the copied ids are behind the sequences: new rows fit after them
        await chat(fake_telegram, "what is my name?")
    assert "my name is Ada" in said(fake_llm)

    readers = asyncio.to_thread(
        in_process,
        ("state", "check"),
        ("state", "backup"),
        ("usage", "--by", "model"),
        ("pairing", "list"),
        ("hardware", "log", "--since", "2020-01-01"),
    )  # doctor asks for a daemon on the home's socket: pytest-socket allows that only outside
    (checked, made, usage, pairing, hardware), doctor = await asyncio.gather(
        readers, asyncio.to_thread(agent, "doctor")
    )
    server = f"postgresql://pinclaw@127.0.0.1:{postgres.port}/"
    for ran in (checked, made, usage, pairing, hardware):
        assert PASSWORD not in ran.output
    assert PASSWORD not in doctor.stdout + doctor.stderr
    assert checked.exit_code == 0, checked.output
    assert checked.output.splitlines()[0].startswith(f"server: {server}")
    assert f"schema version: {LATEST} (" in checked.output
    assert "messages 4" in checked.output  # two turns, each a question and its answer
    assert made.exit_code == 0, made.output
    [copy] = (home / "backups").glob("state-*.db")
    assert made.output.startswith(f"backed up {server}")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert usage.exit_code == 0 and TEST_MODEL in usage.output
    assert "let in: telegram person 777 Mallory" in pairing.output
    assert f"ok  state: {server}" in doctor.stdout
    assert "0 message(s) waiting for an answer" in doctor.stdout
    assert " pump on garage: high, confirmed " in hardware.output

    restored = tmp_path / "restored"
    restored.mkdir(mode=0o700)
    shutil.copy(copy, restored / "state.db")
    monkeypatch.delenv("PINCLAW_STATE__URL")
    monkeypatch.setenv("PINCLAW_HOME", str(restored))
    async with daemon():
        await chat(fake_telegram, "and now?")
    assert "my name is Ada" in said(fake_llm) and "what is my name?" in said(fake_llm)
    with contextlib.closing(sqlite3.connect(restored / "state.db")) as conn:
        found = conn.execute("SELECT rowid FROM memories_words WHERE terms MATCH 'kept'")
        assert found.fetchall() == [(7,)]  # the memories' index made again from the rows


def test_a_copy_that_differs_is_rolled_back(
    home: Path, postgres: PostgresCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.mkdir(mode=0o700)
    state_db = home / "state.db"
    asyncio.run(_made(state_db))
    fill_every_table(state_db)
    url = postgres.new_database()
    read_back = pg_copy.PostgresSide.rows

    def one_lost(side: pg_copy.PostgresSide, table: str, columns: Any) -> list[Any]:
        rows = read_back(side, table, columns)
        return rows[1:] if table == "messages" else rows

    monkeypatch.setattr(pg_copy.PostgresSide, "rows", one_lost)
    with pytest.raises(pg_copy.CopyDiffers, match="messages: 1 rows in the source, 0 in"):
        pg_copy.migrate_to(state_db, url)
    with psycopg.connect(url) as server:
        tables = server.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)  # not even the tables: one transaction


def test_the_daemons_daily_backup_on_postgres_is_a_state_db_of_the_servers_rows(
    home: Path, postgres: PostgresCluster
) -> None:
    home.mkdir(mode=0o700)
    state_db = home / "state.db"
    asyncio.run(_made(state_db))
    fill_every_table(state_db)
    url = postgres.new_database()
    pg_copy.migrate_to(state_db, url)
    state_db.unlink()  # the store is the server's now
    asyncio.run(_one_daily_backup(state_db, url))
    [daily] = (home / "backups").glob(f"state-*{DAILY}")
    for table in ("messages", "memories", "pin_readings"):
        mine, theirs = both(daily, url, table)
        assert mine and mine == theirs, table


async def _one_daily_backup(state_db: Path, url: str) -> None:
    folder = state_db.parent / "backups"
    health = StorageHealth(state_db.parent)
    backups = asyncio.create_task(keep_backups(state_db, 7, health, first_after_s=0, url=url))
    try:
        await eventually(lambda: any(folder.glob(f"state-*{DAILY}")), within=10)
    finally:
        backups.cancel()


def test_migrate_refuses_a_home_whose_daemon_runs_and_a_url_that_is_not_postgres(
    llm_env: dict[str, str], home: Path
) -> None:
    home.mkdir(mode=0o700)
    asyncio.run(_made(home / "state.db"))
    held = lock_home(home)
    try:
        running = agent("state", "migrate", "--to", "postgresql://pinclaw@127.0.0.1:1/x")
    finally:
        os.close(held)
    assert running.returncode == 2
    assert "not migrated: another pinclaw daemon runs for this home" in running.stderr
    wrong = agent("state", "migrate", "--to", str(home / "other.db"))
    assert wrong.returncode == 2 and "--to takes a postgresql:// URL" in wrong.stderr


def test_doctor_names_a_server_it_cannot_reach_without_its_password(
    llm_env: dict[str, str], home: Path
) -> None:
    with socket_free_port() as port:
        url = f"postgresql://pinclaw:{PASSWORD}@127.0.0.1:{port}/pinclaw"
        doctor = agent("doctor", env={"PINCLAW_STATE__URL": url})
    assert doctor.returncode == 2
    assert f"FAIL state: postgresql://pinclaw@127.0.0.1:{port}/pinclaw: cannot connect" in (
        doctor.stdout
    )
    assert PASSWORD not in doctor.stdout + doctor.stderr


@pytest.mark.parametrize("command", ["doctor", "run"])
def test_a_url_libpq_cannot_parse_is_refused_without_its_password(
    llm_env: dict[str, str], home: Path, command: str
) -> None:
    """A password with a "%" not written as %25 (or a space): libpq's own error quotes it.
    `agent doctor` and `agent run` (whose stderr is the service's log) say the url is wrong,
    in one line without it, and exit 2 as for a server they cannot use."""
    password = "Ab%zzPgPass8d41"
    url = f"postgresql://pinclaw:{password}@127.0.0.1:9/pinclaw"  # port 9: nothing there
    done = agent(command, env={"PINCLAW_STATE__URL": url}, timeout=60)
    assert done.returncode == 2
    assert "the PostgreSQL URL cannot be parsed" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert password not in done.stdout + done.stderr


@contextlib.contextmanager
def socket_free_port() -> Any:
    import socket

    with socket.socket() as probe:  # bound, not listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


async def _made(path: Path) -> None:
    from agent.durable.store import open_store

    await (await open_store(path)).db.close()


def test_a_store_an_older_pinclaw_made_gains_what_was_added_since(
    postgres: PostgresCluster,
) -> None:
    """A store at schema version 9, before the tool journal kept each call's taint: the next
    pinclaw adds the column, keeps the rows, and says version 10."""
    url = postgres.new_database()
    conn = PgConnection.connect(url)
    try:
        assert ensure(conn.raw) == LATEST == 10
        conn.execute(
            "INSERT INTO tool_journal (inbox_id, call_id, tool, arguments, started_at)"
            " VALUES (1, 'c1', 'shell', '{}', 1.0)"
        )
        conn.execute("ALTER TABLE tool_journal DROP COLUMN tainted_by")
        conn.execute("UPDATE pinclaw_meta SET value = '9' WHERE key = 'schema_version'")
        assert ensure(conn.raw) == LATEST
        rows = conn.execute("SELECT call_id, tainted_by FROM tool_journal").fetchall()
        assert [tuple(row) for row in rows] == [("c1", "")]
        assert found_version(conn.raw) == LATEST
    finally:
        conn.raw.close()
