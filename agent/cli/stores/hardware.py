"""`agent hardware log [--board NAME] [--since 2h]`: every change of the boards' outputs, as
state.db keeps it (who asked, in which chat, through which tool or rule, the value and the
state the board confirmed).

Reads state.db read-only, so it works beside a running daemon. Nothing heavy is imported
until the command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from agent.config import Settings

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def since_epoch(text: str, *, now: float | None = None, zone: str = "") -> float:
    """`30m`, `2h`, `7d` ago, or a date (`2025-05-01`, `2025-05-01T14:00`, in `zone`), as
    epoch seconds; ValueError for anything else."""
    now = time.time() if now is None else now
    span = _SPAN.match(text.strip().lower())
    if span:
        return now - float(span.group(1)) * _UNIT_S[span.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r}: give a span back (30m, 2h, 7d) or a date (2025-05-01, 2025-05-01T14:00)"
        ) from None
    if moment.tzinfo is None and zone:
        from zoneinfo import ZoneInfo

        moment = moment.replace(tzinfo=ZoneInfo(zone))
    return moment.timestamp()


def _zone(settings: Settings) -> str:
    """agent.timezone (the settings checked it), else the host's; UTC for a $TZ that names
    no zone known here ("CET-1CEST", a POSIX rule), as the scheduler does."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from agent.prompt.source import host_timezone

    zone = settings.agent.timezone or host_timezone()
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return "UTC"
    return zone


@click.group()
def hardware() -> None:
    """Show what the boards' outputs did: the actuation log (also while `agent run` is
    running)."""


@hardware.command("log")
@click.option("--board", default=None, help="Only this board (its name; [hardware] is board).")
@click.option(
    "--since",
    default="24h",
    show_default=True,
    help="How far back: a span (30m, 2h, 7d) or a date (2025-05-01, 2025-05-01T14:00).",
)
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 100_000))
@click.pass_context
def log(ctx: click.Context, board: str | None, since: str, limit: int) -> None:
    """Print the changes of outputs, oldest first: when, which pin and board, the value asked
    and the state the board confirmed, the tool or rule, who asked and in which chat."""
    from zoneinfo import ZoneInfo

    from agent.durable.hardware_records import select_log
    from agent.durable.store import read_state
    from tools.config import DEFAULT_BOARD, configured_boards

    settings = ctx.obj["load"](ctx)
    zone = _zone(settings)
    try:
        start = since_epoch(since, zone=zone)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None
    name = board.strip().lower() if board else None
    found = read_state(settings, lambda conn: select_log(conn, name, start, limit)) or []
    several = len(configured_boards(settings.hardware, settings.boards)) > 1
    for entry in reversed(found):
        click.echo(entry.line(ZoneInfo(zone), with_board=several or entry.board != DEFAULT_BOARD))
    if not found:
        where = f" on {name}" if name else ""
        click.echo(f"No change of an output{where} since {since}.", err=True)
