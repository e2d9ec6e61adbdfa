"""`agent state backup|check`: a copy of state.db, and what it holds — both safe while
`agent run` is running.

A backup uses SQLite's online backup API through a connection of its own: a consistent
snapshot however the daemon writes meanwhile, one file (journal mode DELETE), 0600 in a 0700
folder, checked (quick_check) before it is kept. The daemon keeps a daily one
(`[state] backups_kept`, DAILY names, the oldest removed). The check reads: SQLite's
integrity_check, the schema version (agent/durable/file/migrations.py), the rows of each table.
Nothing heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import click

from agent.durable.file.backups import (
    LOCK_WAIT_S,
    backup,
    backup_name,
    backups_dir,
    open_connection,
)


@click.group()
def state() -> None:
    """Back up state.db and check it (also while `agent run` is running)."""


@state.command("backup")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.pass_context
def backup_command(ctx: click.Context, file: Path | None) -> None:
    """Copy state.db to FILE, safely while the daemon runs.

    FILE defaults to <home>/backups/state-YYYYMMDD-HHMMSS.db (0600, in a 0700 folder)."""
    settings = ctx.obj["load"](ctx)
    dest = file or backups_dir(settings.state_db) / backup_name(time.time())
    try:
        made = backup(settings.state_db, dest)
    except (OSError, sqlite3.Error) as exc:
        click.echo(f"backup failed: {_reason(settings.state_db, exc)}", err=True)
        sys.exit(1)
    size, version = _size(made.size), made.version
    click.echo(f"backed up {settings.state_db} to {made.path} ({size}, schema version {version})")


@state.command("check")
@click.pass_context
def check_command(ctx: click.Context) -> None:
    """Check state.db: integrity, schema version, rows per table."""
    from agent.durable.file.migrations import diagnose

    path = ctx.obj["load"](ctx).state_db
    if not path.exists():
        click.echo(f"{path}: not created yet (the first `agent run` makes it)")
        return
    lines, healthy = _report(path)
    for line in lines:
        click.echo(line)
    problem = diagnose(path)
    if problem is not None:  # what to do, but this check: it has just run
        click.echo(str(problem).replace("run `agent state check`, then r", "R"))
    sys.exit(0 if healthy and problem is None else 1)


def _report(path: Path) -> tuple[list[str], bool]:
    """What `check` prints, and whether SQLite found the file whole."""
    from agent.durable.file.migrations import APPLICATION_ID, describe

    lines = [f"file: {path} ({_size(path.stat().st_size) if path.is_file() else 'not a file'})"]
    try:
        with open_connection(path, LOCK_WAIT_S, read_only=True) as conn:
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
            healthy = problems == ["ok"]
            lines.append("integrity: " + ("ok" if healthy else "; ".join(problems)))
            app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            owner = {APPLICATION_ID: "pinclaw", 0: "not marked"}.get(app_id, f"0x{app_id:08x}")
            lines.append(f"schema version: {describe(version)}; application: {owner}")
            lines.append(f"rows: {_counts(conn)}")
    except sqlite3.Error as exc:
        return [*lines, f"sqlite: {exc}"], False
    folder = backups_dir(path)
    found = sorted(folder.glob("state-*.db"), key=lambda p: p.stat().st_mtime)
    newest = f", newest {found[-1].name}" if found else ""
    lines.append(f"backups: {len(found)} in {folder}{newest}")
    return lines, healthy


def _counts(conn: sqlite3.Connection) -> str:
    """Rows per table, the full-text indexes' own shadow tables left out."""
    tables = conn.execute(
        "SELECT name, sql LIKE 'CREATE VIRTUAL%' FROM sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    virtual = tuple(f"{name}_" for name, is_virtual in tables if is_virtual)
    counts = []
    for name, _ in tables:
        if not name.startswith(virtual) or not virtual:
            (count,) = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()
            counts.append(f"{name} {count}")
    return ", ".join(counts) or "no tables"


def _reason(state_db: Path, exc: BaseException) -> str:
    if isinstance(exc, sqlite3.Error):
        from agent.durable.file.state_db import unusable

        return str(unusable(state_db, exc)).removeprefix("state.db error: ")
    return str(exc)


def _size(size: int) -> str:
    return f"{size / 1024:.0f} KiB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MiB"
