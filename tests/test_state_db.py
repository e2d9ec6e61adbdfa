"""state.db's schema versions and the files pinclaw cannot use.

Every schema this project has shipped (rebuilt here from the CREATE statements of each
release in `git log -p`, with the columns each one's code added on open) is brought to the
latest version with its rows kept, and ends exactly like a file made fresh. A malformed,
foreign, newer, read-only, directory or locked state.db stops `agent run`, `agent run -m`
and `agent doctor` with one line and exit 2 — and a newer one is left byte for byte as it
was. `agent state backup` copies it while the daemon writes; `agent state check` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from fakes.llm_server import FakeLLM
from fakes.telegram_server import FakeTelegram

from agent.app import open_store
from agent.conversation.scopes import OWNER
from agent.daemon.serve import keep_backups
from agent.durable.file import migrations
from agent.durable.file.backups import DAILY, DAY_S, backup_name, daily_backup, next_backup_in
from agent.durable.file.migrations import APPLICATION_ID, LATEST
from agent.durable.file.state_db import StateDB, StateDBUnusable
from agent.durable.file.storage_health import StorageHealth
from tools.memory import schema as memory_schema

REPO = Path(__file__).resolve().parent.parent

# -- the schemas that shipped, oldest first ------------------------------------------------

SESSIONS_0 = """
CREATE TABLE chats (chat_key TEXT PRIMARY KEY, session INTEGER NOT NULL DEFAULT 1);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, chat_key TEXT NOT NULL,
    session INTEGER NOT NULL, turn INTEGER NOT NULL, position INTEGER NOT NULL,
    role TEXT NOT NULL, message TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX messages_by_chat ON messages (chat_key, session, id);
"""
MEMORY_BY_CHAT = """
CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, chat_key TEXT NOT NULL,
    content TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX memories_by_chat ON memories (chat_key, id);
"""
APPROVALS = """
CREATE TABLE approvals (workspace TEXT NOT NULL, rule TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (workspace, rule));
"""
QUEUES = """
CREATE TABLE inbox (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
    chat_key TEXT NOT NULL, message_id TEXT NOT NULL, message TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL DEFAULT 0, failing_since REAL,
    notified INTEGER NOT NULL DEFAULT 0, received_at REAL NOT NULL, done_at REAL);
CREATE UNIQUE INDEX inbox_once ON inbox (chat_key, message_id) WHERE message_id != '';
CREATE INDEX inbox_by_status ON inbox (status, chat_key, id);
CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
    chat_key TEXT NOT NULL, chat TEXT NOT NULL, inbox_id INTEGER, parts TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, deliver_by REAL NOT NULL,
    last_error TEXT NOT NULL DEFAULT '');
CREATE INDEX outbox_by_status ON outbox (status, chat_key, id);
ALTER TABLE messages ADD COLUMN inbox_id INTEGER;
"""
COMPACTION = """
CREATE TABLE summaries (chat_key TEXT NOT NULL, session INTEGER NOT NULL,
    up_to_turn INTEGER NOT NULL, content TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (chat_key, session, up_to_turn));
ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;
"""
QUIRKS = """
CREATE TABLE provider_quirks (model TEXT NOT NULL, quirk TEXT NOT NULL, value TEXT NOT NULL,
    learned_at REAL NOT NULL, PRIMARY KEY (model, quirk));
"""
MEMORY_BY_SCOPE = """
DROP INDEX memories_by_chat;
ALTER TABLE memories RENAME TO memories_old;
CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL,
    content TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '[]',
    source TEXT NOT NULL DEFAULT 'tool' CHECK (source IN ('chat', 'tool', 'import')),
    created_at REAL NOT NULL, updated_at REAL NOT NULL, embedding BLOB);
INSERT INTO memories (id, scope, content, created_at, updated_at)
    SELECT id, 'person:owner', content, created_at, created_at FROM memories_old;
DROP TABLE memories_old;
CREATE INDEX memories_by_scope ON memories (scope, id);
CREATE VIRTUAL TABLE memories_words USING fts5(terms, tokenize='unicode61');
CREATE VIRTUAL TABLE memories_trigram USING fts5(text, tokenize='trigram');
"""
MORE_INDEXES = """
CREATE INDEX outbox_by_inbox ON outbox (inbox_id);
CREATE INDEX messages_by_turn ON messages (chat_key, session, turn);
"""
SCHEDULES = """
CREATE TABLE schedules (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
    spec TEXT NOT NULL, task TEXT NOT NULL, channel TEXT NOT NULL, chat_key TEXT NOT NULL,
    chat TEXT NOT NULL, sender_id TEXT NOT NULL, sender_name TEXT NOT NULL DEFAULT '',
    sender_username TEXT NOT NULL DEFAULT '', in_group INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL, next_due REAL, last_run REAL, runs INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'active', note TEXT NOT NULL DEFAULT '');
CREATE INDEX schedules_due ON schedules (status, next_due);
CREATE INDEX schedules_by_chat ON schedules (chat_key, status);
ALTER TABLE inbox ADD COLUMN trigger TEXT NOT NULL DEFAULT '';
"""
# (the commit that shipped it, what each release added); each schema is all those before.
RELEASES = [
    ("9170b98 foundation: sessions", SESSIONS_0),
    ("5f91fa7 memory tools", MEMORY_BY_CHAT),
    ("99b3a61 approvals", APPROVALS),
    ("47a267d durable inbox and outbox", QUEUES),
    ("ba74a7c scopes and compaction", COMPACTION),
    ("85963a5 provider quirks", QUIRKS),
    ("3209490 memory scopes and full-text search", MEMORY_BY_SCOPE),
    ("35d6e63 indexes for turns and replies", MORE_INDEXES),
    ("508e9b1 schedules and triggers (0.1.0: version 1)", SCHEDULES),
]


def shipped(path: Path, upto: int) -> None:
    """state.db as release `upto` left it, with a row in each table it had."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        for _, script in RELEASES[: upto + 1]:
            conn.executescript(script)
        conn.execute(
            "INSERT INTO messages (chat_key, session, turn, position, role, message, created_at)"
            """ VALUES ('telegram:42:', 1, 1, 0, 'user', '{"role": "user"}', 1.0)"""
        )
        columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
        if "chat_key" in columns:  # before scopes: the terminal's memory becomes the owner's
            conn.execute(
                "INSERT INTO memories (chat_key, content, created_at)"
                " VALUES ('cli:session:x', 'likes tea', 2.0)"
            )
        elif columns:  # indexed as that release's store did
            conn.execute(
                "INSERT INTO memories (scope, content, created_at, updated_at)"
                " VALUES ('person:owner', 'likes tea', 2.0, 2.0)"
            )
            memory_schema.index(conn, 1, "likes tea", [])
        conn.commit()


def layout(path: Path) -> dict[str, Any]:
    """Everything about a file's schema that matters: tables and their columns, indexes
    and the columns they cover, triggers, the version and the mark."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = conn.execute(
            "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).fetchall()
        tables = {
            n: sorted(tuple(r[1:6]) for r in conn.execute(f'PRAGMA table_info("{n}")'))
            for kind, n, _ in names
            if kind == "table"
        }
        indexes = {
            n: (t, [r[2] for r in conn.execute(f'PRAGMA index_info("{n}")')])
            for kind, n, t in names
            if kind == "index"
        }
        return {
            "tables": tables,
            "indexes": indexes,
            "triggers": sorted(n for kind, n, _ in names if kind == "trigger"),
            "version": conn.execute("PRAGMA user_version").fetchone()[0],
            "app": conn.execute("PRAGMA application_id").fetchone()[0],
        }


def open_and_close(path: Path, **kwargs: Any) -> None:
    async def go() -> None:
        store = await open_store(path, **kwargs)
        await store.db.close()

    asyncio.run(go())


@pytest.mark.parametrize("upto", range(len(RELEASES)), ids=[r[0] for r in RELEASES])
def test_every_shipped_schema_reaches_the_latest_with_its_rows(tmp_path: Path, upto: int) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    open_and_close(fresh)
    shipped(old, upto)
    open_and_close(old, legacy_scope=lambda key: OWNER if key.startswith("cli:") else key)
    assert layout(old) == layout(fresh)
    assert layout(old)["version"] == LATEST and layout(old)["app"] == APPLICATION_ID
    with contextlib.closing(sqlite3.connect(old)) as conn:
        assert conn.execute("SELECT chat_key, role FROM messages").fetchall() == [
            ("telegram:42:", "user")
        ]
        if upto >= 1:  # the releases with memories
            assert conn.execute("SELECT scope, content FROM memories").fetchall() == [
                (OWNER, "likes tea")
            ]
            found = conn.execute(
                "SELECT rowid FROM memories_trigram WHERE memories_trigram MATCH 'tea'"
            ).fetchall()
            assert found == [(1,)]  # and findable
    open_and_close(old)  # at the latest version: nothing more to do
    assert layout(old) == layout(fresh)


def test_a_version_1_file_takes_the_later_steps_in_order(tmp_path: Path) -> None:
    path, fresh = tmp_path / "v1.db", tmp_path / "fresh.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrations.memory_schema.ensure(conn, str)
        conn.execute("BEGIN")
        migrations.STEPS[0].apply(conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    assert "tool_journal" not in layout(path)["tables"]
    open_and_close(path)
    open_and_close(fresh)
    assert layout(path) == layout(fresh)
    assert [step.version for step in migrations.STEPS] == list(range(1, LATEST + 1))


# -- files that cannot be used -------------------------------------------------------------


def agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        timeout=120,
    )


def truncated(path: Path) -> None:
    open_and_close(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executemany(
            "INSERT INTO approvals VALUES (?, 'x', 0)", [(str(i),) for i in range(999)]
        )
        conn.commit()
    os.truncate(path, path.stat().st_size // 2)


def foreign(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, album TEXT, taken REAL)")
        conn.commit()


def newer(path: Path) -> None:
    open_and_close(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {LATEST + 1}")


BROKEN = {
    "truncated": (truncated, "it is damaged"),
    "random bytes": (lambda p: p.write_bytes(os.urandom(64 * 1024)), "not a SQLite database"),
    "another program's": (foreign, "another program's database (tables: photos)"),
    "newer": (newer, f"a newer pinclaw (schema version {LATEST + 1}; this one knows up to"),
    "a folder": (lambda p: p.mkdir(), "it is a folder"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_state_db_stops_each_command_with_one_line_and_exit_2(
    llm_env: dict[str, str], home: Path, case: str
) -> None:
    home.mkdir(mode=0o700)
    make, problem = BROKEN[case]
    make(home / "state.db")
    before = (home / "state.db").read_bytes() if (home / "state.db").is_file() else b""
    for command in (["run", "-m", "hello"], ["run"], ["doctor"]):
        result = agent(*command, env=llm_env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        if command == ["doctor"]:
            [line] = [x for x in result.stdout.splitlines() if x.startswith("FAIL state.db:")]
        else:  # (and the home's modes, tightened once: another line of its own)
            [line] = [x for x in result.stderr.splitlines() if "tightened the modes" not in x]
            assert line.startswith(f"state.db error: {home / 'state.db'}: ")
        assert problem in line and ("restore a backup" in line or " aside" in line)
    if case == "newer":  # refused, never half-used: not a byte changed
        assert (home / "state.db").read_bytes() == before


@pytest.fixture
def read_only_home(home: Path) -> Iterator[Path]:
    """A home whose state.db is read-only: a read-only mount as root (who may write any
    file), the file's mode otherwise."""
    home.mkdir(mode=0o700)
    open_and_close(home / "state.db")
    if os.geteuid() != 0:
        (home / "state.db").chmod(0o400)
        yield home
        return
    mount = home.parent / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        ro_home = mount / "home"
        ro_home.mkdir(mode=0o700)
        (ro_home / "state.db").write_bytes((home / "state.db").read_bytes())
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield ro_home
    finally:
        subprocess.run(["umount", "-l", str(mount)])


def test_a_read_only_state_db_is_refused_instead_of_a_daemon_that_never_answers(
    llm_env: dict[str, str], read_only_home: Path
) -> None:
    workspace = read_only_home.parent.parent / "workspace"  # a writable one: only state.db is not
    env = {
        **llm_env,
        "PINCLAW_HOME": str(read_only_home),
        "PINCLAW_WORKSPACE__PATH": str(workspace),
    }
    for command in (["run", "-m", "hello"], ["run"]):
        result = agent(*command, env=env)
        assert result.returncode == 2, result.stderr
        [line] = [x for x in result.stderr.splitlines() if x.startswith("state.db error:")]
        assert "read-only" in line and "writable" in line


def hold_lock(path: Path) -> subprocess.Popen[str]:
    """Another process holding state.db locked (exclusive locking mode, a write open)."""
    code = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('PRAGMA locking_mode=EXCLUSIVE'); c.execute('BEGIN EXCLUSIVE')\n"
        "c.execute('INSERT INTO approvals VALUES (1, 2, 3)')\n"
        "print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_lock_held_elsewhere_is_waited_for_then_reported(
    llm_env: dict[str, str], home: Path
) -> None:
    home.mkdir(mode=0o700)
    open_and_close(home / "state.db")
    holder = hold_lock(home / "state.db")
    try:
        started = time.monotonic()
        result = agent("run", "-m", "hello", env=llm_env)
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "locked by another process (pid " in line and "stayed locked for 10 s" in line
    assert 9.5 < waited < 30
    assert agent("run", "-m", "hello", env=llm_env).returncode == 0  # released: it works


def test_a_lock_released_within_the_bound_is_only_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_and_close(path)
    holder = hold_lock(path)

    async def go() -> float:
        asyncio.get_running_loop().call_later(1.0, holder.kill)
        started = time.monotonic()
        db = await StateDB(path).open(migrate=lambda conn: None, wait_s=5)
        await db.close()
        return time.monotonic() - started

    try:
        assert 0.8 < asyncio.run(go()) < 5
    finally:
        holder.kill()
        holder.wait()


def test_opening_refuses_before_sqlite_writes_anything(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    newer(path)
    before = path.read_bytes()
    with pytest.raises(StateDBUnusable, match="newer pinclaw"):
        open_and_close(path)
    assert path.read_bytes() == before
    assert not path.with_name("state.db-wal").exists()


# -- backups and the check -----------------------------------------------------------------


async def test_a_backup_while_the_daemon_writes_is_whole_private_and_checked(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        for n in range(5):
            fake_telegram.inject_message(42, 42, f"message {n}")
        backup_run = asyncio.create_task(asyncio.to_thread(agent, "state", "backup"))
        await fake_telegram.await_for(lambda m: m.chat_id == 42, count=5, timeout=20)
        made = await backup_run
        checked = await asyncio.to_thread(agent, "state", "check")
    assert made.returncode == 0, made.stderr
    folder = home / "backups"
    [copy] = folder.glob("state-*.db")
    assert made.stdout.startswith(f"backed up {home / 'state.db'} to {copy} (")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one file
        assert 0 <= conn.execute("SELECT COUNT(*) FROM inbox").fetchone()[0] <= 5
    assert checked.returncode == 0, checked.stdout
    lines = checked.stdout.splitlines()
    assert "integrity: ok" in lines
    assert any(x.startswith(f"schema version: {LATEST} (") for x in lines)
    assert any(x.startswith("rows: ") and "inbox 5" in x for x in lines)
    assert f"backups: 1 in {folder}, newest {copy.name}" in lines


def test_check_names_a_damaged_file_and_fails(llm_env: dict[str, str], home: Path) -> None:
    home.mkdir(mode=0o700)
    truncated(home / "state.db")
    result = agent("state", "check", env=llm_env)
    assert result.returncode == 1
    assert "state.db error:" in result.stdout and "damaged" in result.stdout


def test_daily_backups_keep_the_newest_only(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_and_close(path)
    folder = tmp_path / "backups"
    folder.mkdir()
    old = [folder / backup_name(time.time() - day * 86400, daily=True) for day in (3, 2, 1)]
    for file in old:
        file.write_bytes(b"")
    manual = folder / backup_name(time.time() - 5 * 86400)  # made by hand: never removed
    manual.write_bytes(b"")
    made = daily_backup(path, kept=2)
    assert sorted(folder.iterdir()) == sorted([manual, old[2], made.path])
    assert made.version == LATEST


async def test_the_daemon_keeps_a_daily_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = await open_store(path)
    await store.db.close()
    task = asyncio.create_task(keep_backups(path, 7, StorageHealth(tmp_path), first_after_s=0))
    try:
        for _ in range(100):
            if list((tmp_path / "backups").glob(f"state-*{DAILY}")):
                break
            await asyncio.sleep(0.05)
        [made] = (tmp_path / "backups").glob(f"state-*{DAILY}")
        assert next_backup_in(path) > DAY_S - 60  # the next one tomorrow
    finally:
        task.cancel()
    assert layout(made)["version"] == LATEST


def test_a_pending_message_stored_by_an_earlier_release_still_loads() -> None:
    """0.1.0 kept `mentions_bot` with each message; the field is gone, its rows are not."""
    from agent.durable.inbox import decode

    stored = (
        '{"chat": {"channel": "telegram", "chat_id": "42", "thread_id": ""}, "sender_id": "42",'
        ' "sender_name": "Ann", "text": "water the plants", "attachments": [], "is_group": false,'
        ' "mentions_bot": true, "message_id": "7", "sender_username": "ann", "files": []}'
    )
    msg = decode(stored)
    assert (msg.chat.key, msg.text, msg.message_id) == ("telegram:42:", "water the plants", "7")
