"""`agent state backup|check|migrate`: a copy of state.db, what it holds, and its move to
PostgreSQL — backup and check are safe while `agent run` is running.

A backup uses SQLite's online backup API through a connection of its own: a consistent
snapshot however the daemon writes meanwhile, one file (journal mode DELETE), 0600 in a 0700
folder, checked (quick_check) before it is kept. The daemon keeps a daily one
(`[state] backups_kept`, DAILY names, the oldest removed). The check reads
(agent/durable/file/state_check.py): SQLite's integrity_check, the schema version
(agent/durable/file/migrations.py), the rows of each table.
With `[state] url` (PostgreSQL) the check reads the server (agent/durable/postgres/pg_check.py)
and the backup is a state.db-format file of its rows (agent/durable/postgres/pg_copy.py),
which a single-process pinclaw can be started on. `migrate --to URL` copies state.db into an
empty PostgreSQL database with that same code, holding the home's daemon lock meanwhile.
Nothing heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from agent.durable.file.backups import backup, backup_name, backups_dir
from agent.durable.file.state_errors import StateError


@click.group()
def state() -> None:
    """Back up state.db and check it (also while `agent run` is running); move it to
    PostgreSQL."""


@state.command("backup")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.pass_context
def backup_command(ctx: click.Context, file: Path | None) -> None:
    """Copy state.db to FILE, safely while the daemon runs. With [state] url, FILE is a
    state.db-format copy of every row on the PostgreSQL server.

    FILE defaults to <home>/backups/state-YYYYMMDD-HHMMSS.db (0600, in a 0700 folder)."""
    settings = ctx.obj["load"](ctx)
    dest = file or backups_dir(settings.state_db) / backup_name(time.time())
    source, url = str(settings.state_db), settings.state_url
    try:
        if url is None:
            made = backup(settings.state_db, dest)
        else:
            from agent.durable.postgres.pg_copy import CopyDiffers
            from agent.durable.postgres.pg_copy import backup as pg_backup
            from agent.durable.postgres.pg_state import shown_url

            source = shown_url(url)
            try:
                made = pg_backup(url, dest)
            except CopyDiffers as exc:
                raise StateError(str(exc)) from exc
    except (OSError, StateError) as exc:  # StateDBUnusable: the one line for what SQLite said
        click.echo(f"backup failed: {str(exc).removeprefix('state.db error: ')}", err=True)
        sys.exit(1)
    size, version = _size(made.size), made.version
    click.echo(f"backed up {source} to {made.path} ({size}, schema version {version})")


@state.command("check")
@click.pass_context
def check_command(ctx: click.Context) -> None:
    """Check state.db: integrity, schema version, rows per table.

    With [state] url: the PostgreSQL server, its schema version and rows per table."""
    from agent.durable.file.migrations import diagnose

    settings = ctx.obj["load"](ctx)
    if settings.state_url is not None:
        lines, healthy = _server_report(settings.state_url, settings.state_db)
        click.echo("\n".join(lines))
        sys.exit(0 if healthy else 1)
    path = settings.state_db
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


@state.command("migrate")
@click.option(
    "--to",
    "url",
    required=True,
    metavar="URL",
    help="The PostgreSQL database: postgresql://USER[:PASSWORD]@HOST[:PORT]/NAME, empty.",
)
@click.pass_context
def migrate_command(ctx: click.Context, url: str) -> None:
    """Copy state.db into an empty PostgreSQL database.

    Stop `agent run` first (no daemon may start on the home meanwhile). The copy is one
    transaction, every row checked: a copy that differs from state.db is rolled back.
    state.db is left as it is. Exit 0 copied, 1 the copy differed (nothing kept), 2 nothing
    copied (a bad URL, a database that holds rows, a daemon running)."""
    import asyncio
    import os

    from agent.daemon.local_server import DaemonRunning, lock_home
    from agent.durable.postgres import pg_copy
    from agent.durable.postgres.pg_state import is_postgres_url, shown_url

    settings = ctx.obj["load"](ctx)
    path, where = settings.state_db, shown_url(url)
    if not is_postgres_url(url):
        _stop("--to takes a postgresql:// URL (postgresql://USER@HOST:PORT/NAME)", 2)
    if not path.is_file():
        _stop(f"nothing to migrate: {path} does not exist", 2)
    try:
        lock = lock_home(settings.home)
    except DaemonRunning as exc:
        how = f"kill {exc.pid}" if exc.pid else "`agent doctor` names it"
        _stop(f"not migrated: {exc}; stop it first ({how}), then migrate", 2)
    try:
        asyncio.run(_up_to_date(path))
        copied = pg_copy.migrate_to(path, url)
    except (pg_copy.CopyRefused, StateError) as exc:
        _stop(f"not migrated to {where}: {str(exc).removeprefix('PostgreSQL: ')}", 2)
    except pg_copy.CopyDiffers as exc:
        _stop(f"not migrated: the copy in {where} differed from state.db ({exc}); rolled back", 1)
    finally:
        os.close(lock)
    full = [f"{c.table} {c.rows}" for c in copied if c.rows]
    empty = len(copied) - len(full)
    click.echo(f"copied: {', '.join(full) or 'no rows'} ({empty} tables empty)")
    click.echo(f"checked: every row of {len(copied)} tables in {where} is the one in {path}")
    click.echo(
        f"next: set PINCLAW_STATE__URL to that URL in {settings.home / 'agent.env'} (or url "
        "under [state] in config.toml), then start `agent run`; state.db stays as it was, "
        "and what is written to it from now on is not in PostgreSQL"
    )


async def _up_to_date(path: Path) -> None:
    """state.db at this pinclaw's schema version, as `agent run` would bring it."""
    from agent.durable.store import open_store

    await (await open_store(path)).db.close()


def _stop(line: str, code: int) -> NoReturn:
    click.echo(line, err=True)
    sys.exit(code)


def _report(path: Path) -> tuple[list[str], bool]:
    """What `check` prints, and whether SQLite found the file whole."""
    from agent.durable.file.migrations import APPLICATION_ID, describe
    from agent.durable.file.state_check import check

    lines = [f"file: {path} ({_size(path.stat().st_size) if path.is_file() else 'not a file'})"]
    found = check(path)
    if found.integrity is not None:
        lines.append("integrity: " + ("ok" if found.whole else "; ".join(found.integrity)))
    if found.application_id is not None and found.version is not None:
        app_id = found.application_id
        owner = {APPLICATION_ID: "pinclaw", 0: "not marked"}.get(app_id, f"0x{app_id:08x}")
        lines.append(f"schema version: {describe(found.version)}; application: {owner}")
    if found.rows is not None:
        counts = ", ".join(f"{name} {count}" for name, count in found.rows)
        lines.append(f"rows: {counts or 'no tables'}")
    if found.error is not None:
        return [*lines, f"sqlite: {found.error}"], False
    return [*lines, _backups_line(path)], found.whole


def _server_report(url: str, state_db: Path) -> tuple[list[str], bool]:
    """What `check` prints of the PostgreSQL store, and whether this pinclaw can use it."""
    from agent.durable.file.migrations import LATEST, describe
    from agent.durable.postgres.pg_check import check
    from agent.durable.postgres.pg_state import shown_url

    lines = [f"server: {shown_url(url)}"]
    try:
        found = check(url)
    except StateError as exc:
        return [*lines, f"cannot connect: {str(exc).removeprefix('PostgreSQL: ')}"], False
    if found.version == 0:
        return [*lines, "schema version: none yet (the first `agent run` makes the tables)"], True
    counts = ", ".join(f"{name} {count}" for name, count in found.rows)
    lines += [f"schema version: {describe(found.version)}", f"rows: {counts}"]
    return [*lines, _backups_line(state_db)], found.version <= LATEST


def _backups_line(state_db: Path) -> str:
    folder = backups_dir(state_db)
    found_backups = sorted(folder.glob("state-*.db"), key=lambda p: p.stat().st_mtime)
    newest = f", newest {found_backups[-1].name}" if found_backups else ""
    return f"backups: {len(found_backups)} in {folder}{newest}"


def _size(size: int) -> str:
    return f"{size / 1024:.0f} KiB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MiB"
