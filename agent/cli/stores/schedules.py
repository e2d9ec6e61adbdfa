"""`agent schedules list|cancel`: the owner's view of every chat's schedules and pin watches.

Reads and writes state.db directly, so it works with the daemon running or not: a running
scheduler (and pin watcher) reads the table again before each run, and a cancelled schedule
does not run (nor a cancelled watch fire).
Nothing heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from agent.config import Settings
    from agent.durable.schedules import Schedule, Schedules


def _zone(settings: Settings) -> ZoneInfo:
    from agent.prompt.source import host_timezone
    from tools.proactive.schedule_times import zone_named

    return zone_named(settings.agent.timezone or host_timezone())


async def _with_schedules(settings: Settings, job: str, schedule_id: int = 0) -> list[Schedule]:
    """Open state.db (checked and brought to this version, as every command does), do `job`
    ("list", "list-all" or "cancel"), close it."""
    from agent.durable.schedules import Schedules
    from agent.durable.store import open_store

    if settings.state_url is None and not settings.state_db.exists():
        return []
    store = await open_store(settings.state_db, url=settings.state_url)
    db = store.db
    try:
        schedules = Schedules(db)
        if job == "cancel":
            return await _cancel(schedules, schedule_id)
        found = await schedules.listing()
        return found if job == "list-all" else [s for s in found if s.status == "active"]
    finally:
        await store.close()


async def _cancel(schedules: Schedules, schedule_id: int) -> list[Schedule]:
    """[the schedule as it was] when it is cancelled now; exits 1 saying why not."""
    found = await schedules.get(schedule_id)
    if found is None:
        _fail(f"No schedule #{schedule_id}.")
    elif found.kind == "heartbeat":
        _fail("That is the heartbeat: turn it off with [heartbeat] enabled = false.")
    elif not await schedules.cancel(schedule_id, note="cancelled with agent schedules cancel"):
        _fail(f"Schedule #{schedule_id} has already ended ({found.status}).")
    return [found]


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


def _line(schedule: Schedule, zone: ZoneInfo) -> str:
    from agent.proactive.watch_book import watch_entry
    from tools.proactive.schedule_tools import describe
    from tools.proactive.watch_tools import describe_watch

    if schedule.kind == "pin":
        what = describe_watch(watch_entry(schedule), zone)
    else:
        what = describe(schedule.entry(), zone)
    return f"{what}  [{schedule.chat.key}, set by {schedule.set_by}]"


@click.group()
def schedules() -> None:
    """List and cancel what the agent is to do later, and its pin watches (also while `agent
    run` is running)."""


@schedules.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also the ended ones (newest first).")
@click.pass_context
def list_schedules(ctx: click.Context, show_all: bool) -> None:
    """Show the active schedules, soonest first."""
    settings = ctx.obj["load"](ctx)
    found = asyncio.run(_with_schedules(settings, "list-all" if show_all else "list"))
    zone = _zone(settings)
    for schedule in found:
        click.echo(_line(schedule, zone))
    if not found:
        click.echo("No schedules.", err=True)


@schedules.command()
@click.argument("schedule_id", metavar="ID", type=int)
@click.pass_context
def cancel(ctx: click.Context, schedule_id: int) -> None:
    """Cancel schedule (or pin watch) ID so it never runs again."""
    settings = ctx.obj["load"](ctx)
    found = asyncio.run(_with_schedules(settings, "cancel", schedule_id))
    if not found:  # no state.db yet
        _fail(f"No schedule #{schedule_id}.")
    click.echo(f"Cancelled {_line(found[0], _zone(settings))}")
