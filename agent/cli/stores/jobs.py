"""`agent jobs list|show|cancel`: the sub-agents' jobs of every chat.

Reads and writes state.db directly, so it works with the daemon running or not: a cancel
marks the job, and the daemon's runner stops it before its next model call (a job not
running ends cancelled when the daemon next takes it up), its chat told once.
Nothing heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.durable.jobs import Job


async def _with_jobs(settings: Settings, job: str, job_id: int = 0) -> list[Job]:
    """Open state.db (checked and brought to this version), do `job` ("list", "show" or
    "cancel"), close it."""
    from agent.durable.jobs import Jobs
    from agent.durable.store import open_store

    if settings.state_url is None and not settings.state_db.exists():
        return []
    store = await open_store(settings.state_db, url=settings.state_url)
    db = store.db
    try:
        jobs = Jobs(db)
        if job == "list":
            return await jobs.listed(limit=50)
        found = await (jobs.ask_cancel(job_id) if job == "cancel" else jobs.get(job_id))
        return [] if found is None else [found]
    finally:
        await store.close()


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


@click.group()
def jobs() -> None:
    """List, show and cancel the sub-agents' jobs (also while `agent run` is running)."""


@jobs.command("list")
@click.pass_context
def list_jobs(ctx: click.Context) -> None:
    """The running jobs, then the newest ended ones: task, model, tokens, time, state."""
    from agent.runtime.jobs.job_texts import job_line

    found = asyncio.run(_with_jobs(ctx.obj["load"](ctx), "list"))
    for job in found:
        click.echo(f"{job_line(job)}  [{job.chat_key}]")
    if not found:
        click.echo("No jobs.", err=True)


@jobs.command()
@click.argument("job_id", metavar="ID", type=int)
@click.pass_context
def show(ctx: click.Context, job_id: int) -> None:
    """Job ID in full: its task, limits, result and where it went."""
    from agent.runtime.jobs.job_texts import job_details

    found = asyncio.run(_with_jobs(ctx.obj["load"](ctx), "show", job_id))
    if not found:
        _fail(f"No job #{job_id}.")
    click.echo(job_details(found[0]))


@jobs.command()
@click.argument("job_id", metavar="ID", type=int)
@click.pass_context
def cancel(ctx: click.Context, job_id: int) -> None:
    """Cancel job ID: it stops before its next model call and its chat is told."""
    found = asyncio.run(_with_jobs(ctx.obj["load"](ctx), "cancel", job_id))
    if not found:
        _fail(f"No job #{job_id}.")
    job = found[0]
    if job.state not in ("queued", "running"):
        _fail(f"Job #{job_id} has already ended ({job.state}).")
    click.echo(f"Cancelling job #{job_id}: it stops before its next model call.")
