"""The budget: what the model may cost a day and a month, and what the heartbeat, schedules
and pin watches may cost a day, in US dollars at LiteLLM's prices (`[budget]`, or what the
owner set by hand: agent/durable/owner/budget_limits.py). Days and months are agent.timezone's.

Where a limit is reached, proactive turns stop first: a per-trigger limit stops only its own
kind of turn (the heartbeat stops, chats go on), the daily or monthly one stops every
proactive turn and answers chat turns with one line that says which limit and when it resets,
without calling the model. The owner is told once at 80 % and once at 100 % of each limit
(their private chat, and the log). Calls to a model with no price count no dollars: for
them `max_tokens_per_turn` bounds a turn (agent/runtime/owner/metering.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from agent.config import BudgetSettings
from agent.durable.file.state_db import StateDB
from agent.durable.owner.budget_limits import BudgetLimits, Overrides
from agent.durable.owner.usage import StartedBy

log = logging.getLogger(__name__)

# The limits by the names the owner uses (/budget NAME AMOUNT).
LIMITS = ("daily", "monthly", "heartbeat", "schedules", "watches", "jobs", "tokens")
OWN_LIMIT: dict[StartedBy, str] = {
    "heartbeat": "heartbeat",
    "schedule": "schedules",
    "watch": "watches",
    "job": "jobs",
}
_OWN_KIND = {limit: kind for kind, limit in OWN_LIMIT.items()}
_WHAT = {"heartbeat": "heartbeats", "schedules": "scheduled tasks", "watches": "pin watches"}
WARN_AT = 0.8
Tell = Callable[[str], Awaitable[None]]  # a line to the owner's private chat


@dataclass(frozen=True)
class Periods:
    """The day and the month `now` falls in, in the budget's zone."""

    zone: ZoneInfo
    now: datetime
    day_start: datetime
    next_day: datetime
    month_start: datetime
    next_month: datetime

    @classmethod
    def at(cls, epoch: float, zone: ZoneInfo) -> Periods:
        now = datetime.fromtimestamp(epoch, zone)
        day = datetime(now.year, now.month, now.day, tzinfo=zone)
        following = day.date() + timedelta(days=1)
        month = datetime(now.year, now.month, 1, tzinfo=zone)
        year, next_month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
        return cls(
            zone,
            now,
            day,
            datetime(following.year, following.month, following.day, tzinfo=zone),
            month,
            datetime(year, next_month, 1, tzinfo=zone),
        )

    def resets(self, name: str) -> str:
        """When a limit starts again, as people read it."""
        if name == "monthly":
            when = self.next_month
            return f"on {when:%a} {when.day} {when:%b} at 00:00 {self.zone.key}"
        left = int((self.next_day - self.now).total_seconds() // 60)
        return f"at midnight (00:00 {self.zone.key}, in {left // 60} h {left % 60:02d} min)"

    def period(self, name: str) -> str:
        return f"{self.month_start:%Y-%m}" if name == "monthly" else f"{self.day_start:%Y-%m-%d}"


@dataclass(frozen=True)
class Standing:
    """The limits in force and what was spent against them, read in one trip."""

    limits: dict[str, float]
    overridden: frozenset[str]
    periods: Periods
    day: dict[str, float] = field(default_factory=dict)  # started_by -> dollars today
    month: dict[str, float] = field(default_factory=dict)  # ... this month

    def spent(self, name: str) -> float:
        if name == "monthly":
            return sum(self.month.values())
        if name == "daily":
            return sum(self.day.values())
        return self.day.get(_OWN_KIND.get(name, ""), 0.0)

    def reached(self, name: str) -> bool:
        limit = self.limits.get(name, 0.0)
        return limit > 0 and self.spent(name) >= limit

    def refusal(self, started_by: StartedBy) -> str | None:
        """The line that stops a turn of this kind, or None: the monthly and daily limits
        stop every turn, a per-trigger limit its own kind."""
        for name in ("monthly", "daily", OWN_LIMIT.get(started_by)):
            if name is not None and self.reached(name):
                return self.spent_line(name)
        return None

    def spent_line(self, name: str) -> str:
        what = {"daily": "daily budget", "monthly": "monthly budget"}.get(
            name, f"daily budget for {_WHAT.get(name, name)}"
        )
        return (
            f"The {what} ({usd(self.limits[name])}) is spent; it resets "
            f"{self.periods.resets(name)}. The owner can raise it with /budget {name} AMOUNT."
        )


class Budget:
    """The limits of one home, as every channel's turns read them. `settings`: `[budget]` as
    it is now (read at each check, so a reloaded file counts at once); `tell`: how the owner's
    private chat is reached (set by the daemon once the channels run; else only the log)."""

    def __init__(
        self,
        settings: Callable[[], BudgetSettings],
        db: StateDB,
        zone: ZoneInfo,
    ) -> None:
        self.settings = settings
        self.limits = BudgetLimits(db)
        self.zone = zone
        self.tell: Tell | None = None

    def configured(self, name: str) -> float:
        return self.configured_limits()[name]

    def configured_limits(self) -> dict[str, float]:
        """Every limit as `[budget]` sets it now (the settings read once)."""
        now = self.settings()
        return {
            "daily": now.daily_usd,
            "monthly": now.monthly_usd,
            "heartbeat": now.heartbeat_daily_usd,
            "schedules": now.schedules_daily_usd,
            "watches": now.watches_daily_usd,
            "jobs": now.jobs_daily_usd,
            "tokens": float(now.max_tokens_per_turn),
        }

    def in_force(self, found: Overrides) -> tuple[dict[str, float], frozenset[str]]:
        """Each limit: the owner's own value while config.toml still says what it said when
        they set it, else the configured one."""
        limits, overridden, configured_now = {}, set(), self.configured_limits()
        for name in LIMITS:
            value, configured = found.get(name, (0.0, float("nan")))
            if configured == configured_now[name]:
                limits[name] = value
                overridden.add(name)
            else:
                limits[name] = configured_now[name]
        return limits, frozenset(overridden)

    async def standing(self) -> Standing:
        periods = Periods.at(time.time(), self.zone)
        start, month_start = periods.day_start.timestamp(), periods.month_start.timestamp()
        found, sums = await self.limits.with_spent(start, month_start)
        limits, overridden = self.in_force(found)
        day = {kind: pair[0] for kind, pair in sums.items()}
        month = {kind: pair[1] for kind, pair in sums.items()}
        return Standing(limits, overridden, periods, day, month)

    async def refusal(self, started_by: StartedBy) -> str | None:
        return (await self.standing()).refusal(started_by)

    async def after_call(self) -> None:
        """Tell the owner, once each, that a limit is at 80 % or spent."""
        standing = await self.standing()
        for name in ("daily", "monthly", "heartbeat", "schedules", "watches", "jobs"):
            limit = standing.limits[name]
            if limit <= 0 or standing.spent(name) < WARN_AT * limit:
                continue
            level = 100 if standing.reached(name) else 80
            period = standing.periods.period(name)
            if await self.limits.first_notice(name, period, level, limit):
                await self._notify(notice(standing, name, level))

    async def _notify(self, text: str) -> None:
        log.warning("budget: %s", text)
        if self.tell is None:
            return
        try:
            await self.tell(text)
        except Exception as exc:  # the log has it; the turn goes on
            log.warning("budget: the owner could not be told: %s", exc)

    async def set(self, name: str, amount: float) -> str:
        """The owner's own value for a limit (0: none), kept until config.toml changes
        that limit; what it is now, in a line."""
        await self.limits.set(name, amount, self.configured(name))
        shown = _amount(name, amount)
        return (
            f"The {name} limit is now {shown} (config.toml says "
            f"{_amount(name, self.configured(name))}; yours holds until that changes)."
        )

    async def reset(self) -> str:
        cleared = await self.limits.clear()
        return f"Back to the limits of config.toml ({cleared} of yours dropped)."


def notice(standing: Standing, name: str, level: int) -> str:
    """What the owner is told when a limit reaches 80 % or is spent."""
    limit, spent_now = standing.limits[name], standing.spent(name)
    what = f"{name} budget" if name in ("daily", "monthly") else f"daily budget for {_WHAT[name]}"
    figures = f"{usd(spent_now)} of {usd(limit)}"
    if level == 80:
        return f"80 % of the {what} is spent ({figures}). Raise it with /budget {name} AMOUNT."
    stops = (
        "proactive turns stop and chats are answered with one line"
        if name in ("daily", "monthly")
        else f"{_WHAT[name]} stop (chats go on)"
    )
    return (
        f"The {what} is spent ({figures}): {stops} until it resets "
        f"{standing.periods.resets(name)}. Raise it with /budget {name} AMOUNT."
    )


def _amount(name: str, value: float) -> str:
    if value <= 0:
        return "no limit"
    return f"{int(value):,} tokens a turn" if name == "tokens" else usd(value)


def usd(value: float) -> str:
    """Dollars as people read them: cents, unless that would show a small amount as $0.00."""
    if value >= 1 or round(value, 2) == value:
        return f"${value:,.2f}"
    return "$" + f"{value:.6f}".rstrip("0")


def parse_amount(name: str, text: str) -> float:
    """`AMOUNT` of `/budget NAME AMOUNT` ("5", "$5", "0.50"); ValueError saying what is
    wrong."""
    if name not in LIMITS:
        raise ValueError(f"no limit named {name!r}: one of {', '.join(LIMITS)}")
    try:
        value = float(text.strip().lstrip("$").replace(",", ""))
    except ValueError:
        raise ValueError(f"{text!r} is not an amount: write e.g. 5 or 0.50") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{text!r}: the amount must be 0 (no limit) or more")
    if name == "tokens" and value != int(value):
        raise ValueError(f"{text!r}: tokens are a whole number")
    return value
