"""When a schedule runs: the `when` a model gives — an ISO-8601 time, a delay such as "in 10
minutes", or a 5-field cron expression — read in the configured time zone, and a cron
expression's next and latest times. The only module that imports croniter.

Errors are `WhenError`s whose text says what was wrong and what would do, so the model can
try again with a better `when`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterError, croniter

CRON_FIELDS = ("minute", "hour", "day of month", "month", "day of week")
FORMATS = (
    'an ISO-8601 time such as "2030-06-01T08:30" (in the configured time zone unless it '
    'gives an offset), a delay such as "in 10 minutes" or "in 2 hours", or a 5-field cron '
    'expression such as "0 8 * * 1-5" (minute hour day-of-month month day-of-week)'
)
_UNITS = {
    **dict.fromkeys(("second", "sec", "s"), 1),
    **dict.fromkeys(("minute", "min", "m"), 60),
    **dict.fromkeys(("hour", "hr", "h"), 3600),
    **dict.fromkeys(("day", "d"), 86_400),
    **dict.fromkeys(("week", "w"), 604_800),
}
_AMOUNT = r"(?:(\d+(?:\.\d+)?)\s*|\b(an?|one)\s+)([a-z]+)(?![a-z])"
MAX_DELAY_S = 10 * 366 * 86_400
_JOINERS = re.compile(r"[\s,]+|\band\b")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


class WhenError(ValueError):
    """`when` cannot be used; the message says why and what would do."""


@dataclass(frozen=True)
class When:
    kind: Literal["once", "cron"]
    spec: str  # the time in ISO-8601 with its offset, or the cron expression
    first_due: float  # UTC epoch seconds


def parse_when(text: str, zone: ZoneInfo, now: float) -> When:
    """`when` as the model wrote it, read at `now` in `zone`."""
    cleaned = " ".join(text.strip().split())
    if not cleaned:
        raise WhenError(f"when is empty; give {FORMATS}")
    lowered = cleaned.lower()
    if lowered.startswith("in "):
        due = now + _delay_seconds(lowered[3:], cleaned)
        return When("once", _iso(due, zone), due)
    fields = cleaned.split(" ")
    if len(fields) >= 5 and not _DATE_ONLY.match(fields[0]):
        return _cron(fields, zone, now)
    return _time(cleaned, zone, now)


def _delay_seconds(amounts: str, original: str) -> float:
    pieces = re.findall(_AMOUNT, amounts)
    leftover = _JOINERS.sub("", re.sub(_AMOUNT, "", amounts))
    if not pieces or leftover:
        raise WhenError(
            f'cannot read the delay {original!r}; write it as "in 30 seconds", "in 10 minutes", '
            '"in 2 hours" or "in 1 day"'
        )
    total = 0.0
    for number, _word, unit in pieces:
        seconds = _UNITS.get(unit) or (_UNITS.get(unit[:-1]) if unit.endswith("s") else None)
        if seconds is None:
            raise WhenError(
                f"unknown unit {unit!r} in {original!r}; use seconds, minutes, hours, days or weeks"
            )
        total += (float(number) if number else 1.0) * seconds
    if total <= 0:
        raise WhenError(f"{original!r} is not in the future; give a delay of at least a second")
    if total > MAX_DELAY_S:
        raise WhenError(f"{original!r} is too far off; give a delay of at most ten years")
    return total


def _time(text: str, zone: ZoneInfo, now: float) -> When:
    if _DATE_ONLY.fullmatch(text):
        raise WhenError(f"{text!r} has no time of day; give one, e.g. {text}T09:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise WhenError(f"cannot read {text!r}; give {FORMATS}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    due = moment.timestamp()
    if due <= now:
        raise WhenError(
            f"{text} is in the past (it is now {format_time(now, zone)}); give a later time"
        )
    return When("once", _iso(due, zone), due)


def _cron(fields: list[str], zone: ZoneInfo, now: float) -> When:
    if len(fields) != 5:
        raise WhenError(
            f"a cron expression has exactly 5 fields ({', '.join(CRON_FIELDS)}); "
            f"{' '.join(fields)!r} has {len(fields)}"
        )
    expression = " ".join(fields)
    for index, name in enumerate(CRON_FIELDS):
        alone = ["*"] * 5
        alone[index] = fields[index]
        if not croniter.is_valid(" ".join(alone)):
            raise WhenError(
                f"cron field {index + 1} ({name}) {fields[index]!r} of {expression!r} is not valid"
            )
    if not croniter.is_valid(expression):
        raise WhenError(f"{expression!r} is not a valid cron expression; give {FORMATS}")
    return When("cron", expression, next_cron(expression, zone, now))


def next_cron(expression: str, zone: ZoneInfo, after: float) -> float:
    """The first time strictly after `after` that the expression names, read in `zone`."""
    try:
        found = _cron_at(expression, after, zone).get_next(datetime)
    except CroniterError:
        raise WhenError(f"{expression!r} names no time that ever comes") from None
    return float(found.timestamp())


def latest_cron(expression: str, zone: ZoneInfo, at: float) -> float:
    """The last time at or before `at` that the expression names (croniter's own `prev`
    leaves `at` out)."""
    try:
        before = _cron_at(expression, at, zone).get_prev(datetime)
    except CroniterError:
        raise WhenError(f"{expression!r} names no time that ever came") from None
    then = float(before.timestamp())
    following = next_cron(expression, zone, then)
    return following if following <= at else then


def _cron_at(expression: str, start: float, zone: ZoneInfo) -> croniter:
    try:
        return croniter(expression, datetime.fromtimestamp(start, zone))
    except CroniterBadCronError:  # not from parse_when: a row edited by hand
        raise WhenError(f"{expression!r} is not a valid cron expression") from None


def zone_named(name: str) -> ZoneInfo:
    """The configured zone; UTC when it is empty or unknown (the prompt says which)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def format_time(epoch: float, zone: ZoneInfo) -> str:
    """ "Tue 2030-01-07 08:00 CET": how people and the model read a schedule's times."""
    return datetime.fromtimestamp(epoch, zone).strftime("%a %Y-%m-%d %H:%M %Z")


def _iso(epoch: float, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(epoch, zone).isoformat(timespec="seconds")
