"""Copies of state.db through SQLite's online backup API: consistent however the daemon writes
meanwhile, one file (journal mode DELETE), 0600 in a 0700 folder, checked (quick_check)
before it is kept. The daemon keeps a daily one (`[state] backups_kept`, the oldest removed);
on PostgreSQL (`[state] url`) the same file is made from the server's rows
(agent/durable/postgres/pg_copy.py's backup).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BACKUPS_DIR = "backups"
DAILY = "-daily.db"  # the daemon's own backups end so; only these are rotated
DAY_S = 24 * 3600.0
LOCK_WAIT_S = 10.0


@dataclass(frozen=True)
class Backup:
    path: Path
    size: int
    version: int


def backups_dir(state_db: Path) -> Path:
    return state_db.parent / BACKUPS_DIR


def backup_name(at: float, *, daily: bool = False) -> str:
    return time.strftime("state-%Y%m%d-%H%M%S", time.localtime(at)) + (DAILY if daily else ".db")


def backup(state_db: Path, dest: Path, *, wait_s: float = LOCK_WAIT_S) -> Backup:
    """Copy state.db to `dest` (a new file) through SQLite's online backup API; a copy that
    fails its quick_check is removed. What SQLite says is raised as StateDBUnusable, its one
    line naming state.db (a file that cannot be copied or written: OSError)."""
    try:
        return _copy(state_db, dest, wait_s)
    except sqlite3.Error as exc:
        from agent.durable.file.state_db import unusable

        raise unusable(state_db, exc, wait_s) from exc


def _copy(state_db: Path, dest: Path, wait_s: float) -> Backup:
    from agent.home import PRIVATE_DIR_MODE, create_private_file

    if not state_db.is_file():
        raise FileNotFoundError(f"{state_db} does not exist")
    dest.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    if not create_private_file(dest):
        raise FileExistsError(f"{dest} exists already; name another file")
    try:
        with open_connection(state_db, wait_s) as source, open_connection(dest, wait_s) as copy:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one file, whatever the source used
            verdict = copy.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"the copy is damaged: {verdict}")
            version = int(copy.execute("PRAGMA user_version").fetchone()[0])
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return Backup(dest, dest.stat().st_size, version)


class open_connection:
    """A plain connection, closed on leaving (sqlite3's own context manager only commits)."""

    def __init__(self, path: Path, wait_s: float, *, read_only: bool = False) -> None:
        try:
            self._conn = sqlite3.connect(path, timeout=wait_s)
            self._conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            if not read_only or path.is_dir():
                raise
            # A read-only disk: SQLite cannot make the -shm it reads through; the file as
            # it lies on the disk can still be read (what a -wal holds is not seen).
            self._conn = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)

    def __enter__(self) -> sqlite3.Connection:
        return self._conn

    def __exit__(self, *exc: object) -> None:
        self._conn.close()


def daily_backup(state_db: Path, kept: int, copy: Callable[[Path], Backup] | None = None) -> Backup:
    """The daemon's backup of the day, then only the newest `kept` of them are left. `copy`
    makes the file it is given (default: `backup` of `state_db`)."""
    folder = backups_dir(state_db)
    dest = folder / backup_name(time.time(), daily=True)
    made = copy(dest) if copy is not None else backup(state_db, dest)
    for old in sorted(folder.glob(f"state-*{DAILY}"))[:-kept]:
        old.unlink(missing_ok=True)
    return made


def next_backup_in(state_db: Path) -> float:
    """Seconds until the daily backup is due (0: now), from the newest one's time."""
    found = sorted(backups_dir(state_db).glob(f"state-*{DAILY}"))
    if not found:
        return 0.0
    try:
        age = time.time() - found[-1].stat().st_mtime
    except OSError:
        return 0.0
    return min(max(DAY_S - age, 0.0), DAY_S)  # a clock stepped back waits a day at most
