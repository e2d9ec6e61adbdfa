"""`agent budget show | set NAME AMOUNT | reset`: the spending limits of `[budget]` and the
owner's own values, kept in state.db (also while `agent run` runs: it reads them before each
turn). A value set here holds until config.toml says something new for that limit.

Nothing heavy is imported until a command runs (the limits' names come with the settings'
models, which every one of them reads).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

import click

from agent.runtime.owner.budget import LIMITS

if TYPE_CHECKING:
    from agent.config import Settings


async def _with_budget(settings: Settings, job: str, name: str = "", amount: float = 0.0) -> str:
    """Open state.db (brought to this version, as every command does), do `job`, close it."""
    from agent.durable.store import open_store
    from agent.prompt.source import host_timezone
    from agent.runtime.owner.budget import Budget
    from agent.runtime.owner.owner_commands import limits_text
    from tools.proactive.schedule_times import zone_named

    store = await open_store(settings.state_db, url=settings.state_url)
    db = store.db
    try:
        zone = zone_named(settings.agent.timezone or host_timezone())
        budget = Budget(lambda: settings.budget, db, zone)
        if job == "set":
            return await budget.set(name, amount)
        if job == "reset":
            return await budget.reset()
        return limits_text(await budget.standing(), "agent budget set NAME AMOUNT")
    finally:
        await store.close()


@click.group()
def budget() -> None:
    """Show and set the spending limits (also while `agent run` is running)."""


@budget.command()
@click.pass_context
def show(ctx: click.Context) -> None:
    """Each limit, what was spent against it today or this month, and whose value it is."""
    click.echo(asyncio.run(_with_budget(ctx.obj["load"](ctx), "show")))


@budget.command("set")
@click.argument("name", type=click.Choice(LIMITS))
@click.argument("amount")
@click.pass_context
def set_limit(ctx: click.Context, name: str, amount: str) -> None:
    """Set limit NAME to AMOUNT (dollars; tokens for `tokens`; 0: no limit)."""
    from agent.runtime.owner.budget import parse_amount

    try:
        value = parse_amount(name, amount)
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(asyncio.run(_with_budget(ctx.obj["load"](ctx), "set", name, value)))


@budget.command()
@click.pass_context
def reset(ctx: click.Context) -> None:
    """Drop every value set by hand: config.toml's limits apply again."""
    click.echo(asyncio.run(_with_budget(ctx.obj["load"](ctx), "reset")))
