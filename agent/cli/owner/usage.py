"""`agent usage [--since 7d] [--by day|chat|person|model|trigger]`: what the model calls cost,
read from state.db's usage table (read-only: also while `agent run` runs), as a table with a
total and a small bar chart of each day. Days are agent.timezone's.

Nothing heavy is imported until the command runs: rich only inside it.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from agent.durable.owner.usage import Call, Totals

BAR_WIDTH = 30
_SINCE = re.compile(r"(\d+)\s*([hdw])")
GROUPS = ("day", "chat", "person", "model", "trigger")


def since_epoch(text: str, zone: ZoneInfo, now: float | None = None) -> float:
    """`--since`: "7d" (today and the six days before, from midnight), "12h", "2w", "today",
    "month" (this calendar month) or a date, YYYY-MM-DD; click.BadParameter otherwise."""
    current = datetime.fromtimestamp(time.time() if now is None else now, zone)
    midnight = datetime(current.year, current.month, current.day, tzinfo=zone)
    text = text.strip().lower()
    if text == "today":
        return midnight.timestamp()
    if text == "month":
        return datetime(current.year, current.month, 1, tzinfo=zone).timestamp()
    found = _SINCE.fullmatch(text)
    if found:
        count, unit = int(found.group(1)), found.group(2)
        if unit == "h":
            return current.timestamp() - count * 3600
        days = count * (7 if unit == "w" else 1)
        start = midnight.date() - timedelta(days=max(days, 1) - 1)
        return datetime(start.year, start.month, start.day, tzinfo=zone).timestamp()
    try:
        day = datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: write e.g. 7d, 12h, 2w, today, month or 2030-01-31"
        ) from None
    return day.replace(tzinfo=zone).timestamp()


def days_between(start: float, zone: ZoneInfo, now: float | None = None) -> list[str]:
    """Every calendar day from `start` to now, YYYY-MM-DD, so idle days show as empty."""
    first = datetime.fromtimestamp(start, zone).date()
    last = datetime.fromtimestamp(time.time() if now is None else now, zone).date()
    return [str(first + timedelta(days=n)) for n in range((last - first).days + 1)]


def cost(summed: Totals) -> str:
    if summed.calls and summed.unpriced == summed.calls:
        return "unknown"
    return f"${summed.cost_usd:.4f}" + (f" +{summed.unpriced}?" if summed.unpriced else "")


def bars(days: list[str], by_day: dict[str, Totals]) -> list[tuple[str, str, str]]:
    """(day, bar, figure) for each day: bars of dollars, or of tokens when no call of the
    period had a price."""
    priced = any(t.cost_usd for t in by_day.values())

    def amount(summed: Totals | None) -> float:
        if summed is None:
            return 0.0
        return summed.cost_usd if priced else summed.input_tokens + summed.output_tokens

    top = max((amount(by_day.get(day)) for day in days), default=0.0) or 1.0
    rows = []
    for day in days:
        value = amount(by_day.get(day))
        bar = "█" * round(BAR_WIDTH * value / top) if value else ""
        figure = f"${value:.4f}" if priced else f"{int(value):,} tokens"
        weekday = datetime.strptime(day, "%Y-%m-%d").strftime("%a")
        rows.append((f"{weekday} {day}", bar or "·", figure))
    return rows


def render(calls: list[Call], by: str, start: float, zone: ZoneInfo) -> None:
    from rich.table import Table

    from agent.cli.verbatim import console as verbatim_console
    from agent.durable.owner.usage import GroupBy, grouped, total

    console = verbatim_console()  # a chat key, person or model name is data, never markup
    began = datetime.fromtimestamp(start, zone).strftime("%a %Y-%m-%d %H:%M")
    if not calls:
        console.print(f"No model calls since {began} ({zone.key}).")
        return
    key: GroupBy = by  # type: ignore[assignment]  # one of GROUPS, as click checked
    console.print(f"Model usage since {began} ({zone.key}), by {by}:")
    table = Table(show_footer=True)
    summed = total(calls)
    table.add_column(by, footer="total")
    for name, footer in (
        ("calls", f"{summed.calls:,}"),
        ("tokens in", f"{summed.input_tokens:,}"),
        ("cached", f"{summed.cached_tokens:,}"),
        ("tokens out", f"{summed.output_tokens:,}"),
        ("cost", cost(summed)),
    ):
        table.add_column(name, footer=footer, justify="right")
    for group in grouped(calls, key, zone):
        table.add_row(
            group.label,
            f"{group.calls:,}",
            f"{group.input_tokens:,}",
            f"{group.cached_tokens:,}",
            f"{group.output_tokens:,}",
            cost(group),
        )
    console.print(table)
    by_day = {group.label: group for group in grouped(calls, "day", zone)}
    console.print("Each day:")
    for day, bar, figure in bars(days_between(start, zone), by_day):
        console.print(f"  {day}  {bar:<{BAR_WIDTH}}  {figure}")
    if summed.unpriced:
        console.print(
            f"{summed.unpriced} of {summed.calls} calls were to models with no price (LiteLLM "
            'has none, or a server of your own; "+N?" above): their cost is not counted.'
        )


@click.command()
@click.option(
    "--since",
    default="7d",
    show_default=True,
    help="From when: 7d (today and 6 days before), 12h, 2w, today, month, or YYYY-MM-DD.",
)
@click.option("--by", type=click.Choice(GROUPS), default="day", show_default=True)
@click.pass_context
def usage(ctx: click.Context, since: str, by: str) -> None:
    """Show what the model calls used and cost: a table with totals and a bar per day."""
    from agent.durable.owner.usage import calls_since
    from agent.durable.store import read_state
    from agent.prompt.source import host_timezone
    from tools.proactive.schedule_times import zone_named

    settings = ctx.obj["load"](ctx)
    zone = zone_named(settings.agent.timezone or host_timezone())
    start = since_epoch(since, zone)
    render(read_state(settings, lambda conn: calls_since(conn, start)) or [], by, start, zone)
