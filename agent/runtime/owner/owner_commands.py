"""The owner's chat commands over the model, answered without it: `/usage` (today and this
month), `/budget` (show, `NAME AMOUNT`, `reset`) in the owner's private chat or the terminal,
and `/model` (list, `NAME`, `reset`) for whoever may talk in the chat — strangers never reach
a command (ChannelRuntime.submit answers them first)."""

from __future__ import annotations

from agent.durable.owner.usage import Call, Totals, total
from agent.runtime.owner.budget import LIMITS, Standing, parse_amount, usd
from agent.runtime.owner.metering import OwnerControls

OWNER_ONLY = "Only the owner can use /{name}, in their private chat with me."


async def usage_text(controls: OwnerControls) -> str:
    """Today's and this month's calls, tokens and cost, and the budget where one is set."""
    budget = controls.budget
    standing = await budget.standing()
    periods = standing.periods
    month = await controls.usage.since(periods.month_start.timestamp())
    start = periods.day_start.timestamp()
    today = [call for call in month if call.at >= start]
    lines = [
        _line(f"Today ({periods.now:%a} {periods.now.day} {periods.now:%b})", today),
        _line(f"This month ({periods.now:%B %Y})", month),
    ]
    limits = [
        f"{name} {usd(standing.spent(name))} of {usd(standing.limits[name])}"
        for name in ("daily", "monthly", "heartbeat", "schedules", "watches", "jobs")
        if standing.limits[name] > 0
    ]
    if limits:
        lines.append("Budget: " + " · ".join(limits))
    lines.append(f"(days in {periods.zone.key}; `agent usage` shows more)")
    return "\n".join(lines)


def _line(when: str, calls: list[Call]) -> str:
    summed = total(calls)
    if not summed.calls:
        return f"{when}: no model calls"
    return f"{when}: {cost_text(summed)} — {tokens_text(summed)}"


def cost_text(summed: Totals) -> str:
    if summed.unpriced == summed.calls:
        return "cost unknown"
    unknown = f" (+{summed.unpriced} calls without a price)" if summed.unpriced else ""
    return f"${summed.cost_usd:.4f}{unknown}"


def tokens_text(summed: Totals) -> str:
    cached = f" ({summed.cached_tokens:,} cached)" if summed.cached_tokens else ""
    return (
        f"{summed.calls} calls, {summed.input_tokens:,} tokens in{cached}, "
        f"{summed.output_tokens:,} out"
    )


async def budget_text(controls: OwnerControls, args: list[str]) -> str:
    """`/budget`: the limits; `/budget NAME AMOUNT`: the owner's own value; `/budget reset`."""
    budget = controls.budget
    if args == ["reset"]:
        return await budget.reset()
    if len(args) == 2:
        try:
            amount = parse_amount(args[0].lower(), args[1])
        except ValueError as exc:
            return f"Not changed: {exc}."
        return await budget.set(args[0].lower(), amount)
    if args:
        return f"Write /budget, /budget NAME AMOUNT ({', '.join(LIMITS)}) or /budget reset."
    return limits_text(await budget.standing())


def limits_text(standing: Standing, change: str = "/budget NAME AMOUNT") -> str:
    """Each limit, what was spent against it, and whose value it is; `change`: how the
    owner changes one where they read this."""
    lines = [f"Budget (days and months in {standing.periods.zone.key}):"]
    for name in LIMITS:
        value = standing.limits[name]
        if name == "tokens":
            shown = f"{int(value):,} tokens a turn to models without a price" if value else "none"
        else:
            shown = usd(value) if value else "none"
            shown += f", spent {usd(standing.spent(name))}"
        mine = " (set by hand)" if name in standing.overridden else ""
        lines.append(f"  {name}: {shown}{mine}")
    reset = change.replace("NAME AMOUNT", "reset").replace(" set ", " ")
    lines.append(f"Change one with {change} (0: no limit); {reset}: config.toml's again.")
    return "\n".join(lines)


async def model_text(
    controls: OwnerControls, chat_key: str, default: str, args: list[str], by: str
) -> str:
    """`/model`: the configured models, this chat's marked; `/model NAME` switches this chat;
    `/model reset` goes back to llm.model."""
    configured = controls.configured()
    if args == ["reset"]:
        await controls.models.reset(chat_key)
        return f"This chat uses {default} again."
    if args:
        chosen = _named(configured, args[0])
        if chosen is None:
            return f"Not a configured model: {args[0]}. Configured: {', '.join(configured)}."
        await controls.models.choose(chat_key, chosen, by)
        return f"This chat now uses {chosen}."
    current = await controls.model_of(chat_key, default)
    lines = ["Models (/model NAME switches this chat, /model reset goes back):"]
    for name in configured:
        marks = [
            m for m, on in (("this chat", name == current), ("default", name == default)) if on
        ]
        lines.append(f"  {name}" + (f"  ← {', '.join(marks)}" if marks else ""))
    return "\n".join(lines)


def _named(configured: list[str], name: str) -> str | None:
    """The configured model `name` means: itself, or the one whose name after the provider
    is `name` ("gpt-4o-mini" for "openai/gpt-4o-mini") when only one is."""
    if name in configured:
        return name
    found = [model for model in configured if model.split("/", 1)[-1] == name]
    return found[0] if len(found) == 1 else None
