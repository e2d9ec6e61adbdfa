"""`agent pairing list | approve CODE | deny CODE | invite | revoke CHANNEL ID`: the owner's
side of pairing at the terminal (agent/durable/owner/pairings.py).

Reads and writes state.db directly, so it works with the daemon running or not, as `agent
schedules` does: a running daemon reads who is let in again on that person's next message
(and every 30 s), and its courier sends the line a decision left in the outbox for the
stranger. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from channels.registry import channel_names

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.durable.owner.pairings import Pairings

T = TypeVar("T")
DECIDED = ("approved", "denied")


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


def _with_pairings(settings: Settings, job: Callable[[Pairings], Awaitable[T]]) -> T:
    """Open state.db (checked and brought to this version, as every command does), do `job`,
    close it."""
    from agent.durable.owner.pairings import Pairings
    from agent.durable.store import open_store

    async def run() -> T:
        store = await open_store(settings.state_db, url=settings.state_url)
        db = store.db
        try:
            return await job(Pairings(db))
        finally:
            await store.close()

    return asyncio.run(run())


def doctor_lines(settings: Settings) -> list[str]:
    """For `agent doctor`: who was let in and the open codes (read-only), and a channel
    whose pairing has no owner to ask."""
    from agent.durable.owner.pairings import paired_lines
    from agent.durable.store import read_state

    lines = []
    for channel in channel_names():
        config = settings.channels.section(channel)
        owners = [p for p in settings.people.values() if p.owner and p.id_on(channel)]
        if config is not None and config.enabled and config.pairing and not owners:
            lines.append(
                f"{channel}: no [people] entry with owner = true and a {channel} id, so "
                "strangers' codes are not shown to you there: see `agent pairing list`"
            )
    return lines + (read_state(settings, paired_lines) or [])


@click.group()
def pairing() -> None:
    """Let people in who wrote to the bot: list, approve or deny their codes, make an invite
    (also while `agent run` is running)."""


@pairing.command("list")
@click.pass_context
def list_pairing(ctx: click.Context) -> None:
    """Show the open codes and who is let in."""
    from agent.durable.owner.pairings import paired_lines
    from agent.durable.store import read_state

    settings = ctx.obj["load"](ctx)
    lines = read_state(settings, paired_lines) or []
    for line in lines:
        click.echo(line)
    if not lines:
        click.echo("No open codes, and nobody let in by pairing.", err=True)


def _decide(ctx: click.Context, code: str, approve: bool) -> None:
    from agent.runtime.owner.pairing_texts import decision_text

    settings = ctx.obj["load"](ctx)
    outcome = _with_pairings(settings, lambda p: p.decide(code, approve, by="agent pairing"))
    text = decision_text(outcome, code)
    if outcome.verdict not in DECIDED:
        _fail(text)
    click.echo(text)


@pairing.command()
@click.argument("code")
@click.pass_context
def approve(ctx: click.Context, code: str) -> None:
    """Let in the person who was given CODE."""
    _decide(ctx, code, approve=True)


@pairing.command()
@click.argument("code")
@click.pass_context
def deny(ctx: click.Context, code: str) -> None:
    """Refuse the request with CODE (no new code for them for a day), or withdraw an invite."""
    _decide(ctx, code, approve=False)


@pairing.command()
@click.option(
    "--channel",
    type=click.Choice(channel_names()),
    default=channel_names()[0],
    show_default=True,
    help="Where the code is sent.",
)
@click.pass_context
def invite(ctx: click.Context, channel: str) -> None:
    """Make a code to hand out: whoever sends it to the bot privately within the hour is in."""
    from agent.durable.owner.pairing_codes import shown

    settings = ctx.obj["load"](ctx)
    code = _with_pairings(settings, lambda p: p.invite(channel))
    click.echo(
        f"Invite code {shown(code.code)} ({channel}), valid for an hour: whoever sends it to "
        "the bot in a private chat first is in."
    )


@pairing.command()
@click.argument("channel", type=click.Choice(channel_names()))
@click.argument("member_id", metavar="ID")
@click.pass_context
def revoke(ctx: click.Context, channel: str, member_id: str) -> None:
    """Take a person or group let in by pairing out again (their user or chat ID)."""
    settings = ctx.obj["load"](ctx)
    if not _with_pairings(settings, lambda p: p.revoke(channel, member_id)):
        _fail(f"Nobody with id {member_id} was let in on {channel}.")
    click.echo(f"{channel} {member_id} is no longer let in (a running daemon: within 30 s).")
