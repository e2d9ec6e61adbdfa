"""`agent state backup|check`: a copy of state.db, and what it holds — both safe while
`agent run` is running.

A backup uses SQLite's online backup API through a connection of its own: a consistent
snapshot however the daemon writes meanwhile, one file (journal mode DELETE), 0600 in a 0700
folder, checked (quick_check) before it is kept. The daemon keeps a daily one
(`[state] backups_kept`, DAILY names, the oldest removed). The check reads
(agent/durable/file/state_check.py): SQLite's integrity_check, the schema version
(agent/durable/file/migrations.py), the rows of each table.
Nothing heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from agent.durable.file.backups import backup, backup_name, backups_dir
from agent.durable.file.state_errors import StateError


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
    except (OSError, StateError) as exc:  # StateDBUnusable: the one line for what SQLite said
        click.echo(f"backup failed: {str(exc).removeprefix('state.db error: ')}", err=True)
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
    folder = backups_dir(path)
    found_backups = sorted(folder.glob("state-*.db"), key=lambda p: p.stat().st_mtime)
    newest = f", newest {found_backups[-1].name}" if found_backups else ""
    lines.append(f"backups: {len(found_backups)} in {folder}{newest}")
    return lines, found.whole


def _size(size: int) -> str:
    return f"{size / 1024:.0f} KiB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MiB"
