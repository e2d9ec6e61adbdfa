"""`when` as the model writes it, read in the configured zone, and a cron expression's next
and latest times (croniter underneath), across a daylight-saving change."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tools.proactive.schedule_times import (
    WhenError,
    format_time,
    latest_cron,
    next_cron,
    parse_when,
    zone_named,
)

BERLIN = ZoneInfo("Europe/Berlin")
# Fri 2030-03-29 12:00 in Berlin (UTC+1); the clocks go forward on Sunday the 31st.
NOW = datetime(2030, 3, 29, 12, 0, tzinfo=BERLIN).timestamp()


def at(*fields: int, zone: ZoneInfo = BERLIN) -> float:
    return datetime(*fields, tzinfo=zone).timestamp()


@pytest.mark.parametrize(
    ("when", "seconds"),
    [
        ("in 30 seconds", 30),
        ("in 10 minutes", 600),
        ("In 2 Hours", 7200),
        ("in an hour", 3600),
        ("in 1h30m", 5400),
        ("in 2 hours and 15 minutes", 8100),
        ("in 1.5 days", 129_600),
        ("in 5 secs", 5),
    ],
)
def test_a_delay_is_counted_from_now(when: str, seconds: int) -> None:
    parsed = parse_when(when, BERLIN, NOW)
    assert parsed.kind == "once"
    assert parsed.first_due == NOW + seconds
    assert datetime.fromisoformat(parsed.spec).timestamp() == NOW + seconds


def test_an_iso_time_without_a_zone_is_in_the_configured_one_with_a_zone_as_given() -> None:
    local = parse_when("2030-06-01T08:30", BERLIN, NOW)
    assert local.first_due == at(2030, 6, 1, 8, 30)  # summer time: UTC+2
    assert local.spec == "2030-06-01T08:30:00+02:00"
    utc = parse_when("2030-06-01T08:30Z", BERLIN, NOW)
    assert utc.first_due == at(2030, 6, 1, 8, 30, zone=ZoneInfo("UTC"))
    assert utc.spec == "2030-06-01T10:30:00+02:00"  # shown in the configured zone
    offset = parse_when("2030-06-01 08:30+09:00", BERLIN, NOW)
    assert offset.first_due == at(2030, 6, 1, 8, 30, zone=ZoneInfo("Asia/Tokyo"))


def test_a_cron_expression_is_due_at_its_next_time_in_the_configured_zone() -> None:
    parsed = parse_when("0 8 * * 1-5", BERLIN, NOW)
    assert parsed.kind == "cron" and parsed.spec == "0 8 * * 1-5"
    assert parsed.first_due == at(2030, 4, 1, 8, 0)  # Friday noon: the next weekday is Monday


def test_next_cron_times_step_over_the_daylight_saving_change() -> None:
    times, after = [], NOW
    for _ in range(3):
        after = next_cron("30 8 * * *", BERLIN, after)
        times.append(after)
    assert times == [at(2030, 3, 30, 8, 30), at(2030, 3, 31, 8, 30), at(2030, 4, 1, 8, 30)]
    # 08:30 local is 07:30 UTC before the change and 06:30 UTC after it.
    assert [datetime.fromtimestamp(t, ZoneInfo("UTC")).hour for t in times] == [7, 6, 6]
    every_15 = next_cron("*/15 * * * *", BERLIN, at(2030, 3, 29, 12, 7))
    assert every_15 == at(2030, 3, 29, 12, 15)


def test_latest_cron_includes_a_time_exactly_due() -> None:
    assert latest_cron("0 8 * * *", BERLIN, at(2030, 3, 29, 8, 0)) == at(2030, 3, 29, 8, 0)
    assert latest_cron("0 8 * * *", BERLIN, at(2030, 3, 29, 7, 59)) == at(2030, 3, 28, 8, 0)
    assert latest_cron("0 8 * * *", BERLIN, NOW) == at(2030, 3, 29, 8, 0)


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("2020-01-01T00:00", "is in the past (it is now Fri 2030-03-29 12:00 CET)"),
        ("2030-06-01", "has no time of day; give one, e.g. 2030-06-01T09:00"),
        ("tomorrow morning", "cannot read 'tomorrow morning'; give an ISO-8601 time such as"),
        ("in ten minutes", 'write it as "in 30 seconds", "in 10 minutes"'),
        ("in 2 fortnights", "unknown unit 'fortnights'"),
        ("in 0 seconds", "is not in the future"),
        ("in 1000 weeks", "too far off"),
        ("61 * * * *", "cron field 1 (minute) '61' of '61 * * * *' is not valid"),
        ("0 8 * 13 *", "cron field 4 (month) '13'"),
        ("0 8 * * 9", "cron field 5 (day of week) '9'"),
        ("0 0 8 * * *", "exactly 5 fields (minute, hour, day of month, month, day of week)"),
        ("0 0 31 2 *", "names no time that ever comes"),
        ("  ", "when is empty"),
    ],
)
def test_a_when_that_cannot_be_used_says_why_and_what_would_do(when: str, says: str) -> None:
    with pytest.raises(WhenError) as caught:
        parse_when(when, BERLIN, NOW)
    assert says in str(caught.value)


def test_an_unknown_zone_falls_back_to_utc_and_times_read_as_people_read_them() -> None:
    assert zone_named("Mars/Olympus") == ZoneInfo("UTC") and zone_named("") == ZoneInfo("UTC")
    assert format_time(NOW, BERLIN) == "Fri 2030-03-29 12:00 CET"


def test_a_cron_expression_edited_by_hand_is_refused_not_crashed_on() -> None:
    for compute in (next_cron, latest_cron):
        with pytest.raises(WhenError, match="'99 8 \\* \\* \\*' is not a valid cron expression"):
            compute("99 8 * * *", BERLIN, NOW)
