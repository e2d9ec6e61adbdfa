"""Pin watches without a daemon: when a reading fires a watch (the hysteresis, the minimum
interval, digital changes), what watch_pin refuses before anything is kept, what the model
reads when one fires, and where watches cannot run (a one-shot alone, read_only)."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.app import build_tools, open_store
from agent.config import load_settings
from agent.durable.schedules import NewSchedule, Schedules
from agent.durable.triggers import Trigger, decode_trigger, encode_trigger, trigger_text
from agent.proactive.hardware import make_boards
from agent.proactive.pin_watcher import Crossing, PinWatcher, reading_text
from agent.proactive.watch_book import ChatWatches
from channels.base import ChatRef
from tools.base import Speaker, ToolCallContext
from tools.board.pin_names import PinNames
from tools.config import HardwareSettings, PinSettings
from tools.policy import SecurityPolicy
from tools.proactive.watch_tools import (
    WatchDefaults,
    WatchRefused,
    WatchSpec,
    WatchTools,
    plan_watch,
)

HARDWARE = HardwareSettings(
    enabled=True,
    allowed_pins=[13, "A1"],
    pins={
        "light": PinSettings(pin="A0", mode="analog"),
        "button": PinSettings(pin=7, mode="input_pullup"),
        "fan": PinSettings(pin=9, mode="pwm"),
    },
)
POLICY = PinNames({"board": HARDWARE})
DEFAULTS = WatchDefaults(min_interval_s=60.0, hysteresis=20.0)


def above(threshold: float, hysteresis: float = 20.0, interval: float = 0.0) -> Crossing:
    return Crossing(WatchSpec("A0", "A0", "analog", above=threshold, hysteresis=hysteresis,
                              min_interval_s=interval))  # fmt: skip


def fired(crossing: Crossing, readings: list[float], start: float = 0.0) -> list[float]:
    """The readings that fired, one reading a second from `start`."""
    return [v for i, v in enumerate(readings) if crossing.update(v, start + i)]


def test_above_fires_on_crossing_and_again_only_after_falling_past_the_hysteresis() -> None:
    watch = above(700)
    readings = [650, 800, 810, 760, 690, 800, 701, 600, 800]
    assert fired(watch, readings) == [800, 800]  # the 2nd and the last: 690 is within 20
    assert [i for i, v in enumerate(readings) if v == 800] == [1, 5, 8]


def test_a_reading_already_past_the_threshold_fires_when_listening_starts() -> None:
    assert fired(above(700), [900, 900]) == [900]


def test_below_is_the_mirror_image() -> None:
    watch = Crossing(WatchSpec("A0", "A0", "analog", below=300, hysteresis=50,
                                min_interval_s=0))  # fmt: skip
    assert fired(watch, [400, 200, 100, 340, 250, 360, 299]) == [200, 299]


def test_a_crossing_within_the_minimum_interval_waits_and_fires_once_it_is_over() -> None:
    watch = above(700, interval=10)
    assert fired(watch, [800, 600, 800, 800, 800]) == [800]  # t=2..4: too soon, still armed
    assert watch.update(800, 10.5) and not watch.update(800, 11)  # after 10 s: fires, once


def test_changes_fires_on_each_new_level_but_not_the_first_nor_too_soon() -> None:
    watch = Crossing(WatchSpec(7, "pin 7", "input", changes=True, min_interval_s=5))
    assert not watch.update(1, 0)  # where it starts
    assert not watch.update(1, 1)
    assert watch.update(0, 2)
    assert not watch.update(1, 3)  # within 5 s of the last: dropped
    assert watch.update(0, 8)


def refused(**args: object) -> str:
    with pytest.raises(WatchRefused) as caught:
        plan_watch(POLICY, DEFAULTS, **args)  # type: ignore[arg-type]
    return str(caught.value)


def test_watch_pin_refuses_what_it_cannot_watch_saying_what_would_work() -> None:
    assert refused(pin="A0").startswith("give exactly one condition: above or below")
    assert refused(pin="A0", above=700, below=100).startswith("give exactly one condition")
    assert refused(pin="A3", above=700) == "A3 is not allowed. Allowed pins: pin 13, A1, " \
        "light (A0), button (pin 7), fan (pin 9)."  # fmt: skip
    assert refused(pin=13, above=700).startswith("pin 13 is not an analog input: above/below")
    assert refused(pin="fan", changes=True) == (
        "fan (pin 9) is wired as pwm: changes watches a digital input"
    )
    assert refused(pin="light", changes=True) == (
        "light (A0) is an analog input: watch it with above or below"
    )
    assert "readings run 0-1023" in refused(pin="light", above=1023)
    assert refused(pin="light", below=0).startswith("below 0 is out of range")
    assert "must be 0 or more and under 100" in refused(pin="light", above=100, hysteresis=100)
    assert "hysteresis is for above/below" in refused(pin="button", changes=True, hysteresis=5)
    assert "give 60 ([watches] min_interval_s)" in refused(pin="A1", above=5, min_interval_s=1)


def test_watch_pin_fills_in_the_defaults_and_the_pin_as_configured() -> None:
    spec = plan_watch(POLICY, DEFAULTS, "light", above=700)
    assert spec == WatchSpec("A0", "light (A0)", "analog", 700, None, False, 20.0, 60.0)
    assert spec.summary() == "light (A0) above 700 (again once below 680), at most every 60 s"
    low = plan_watch(POLICY, DEFAULTS, "a1", above=10, min_interval_s=120)
    assert (low.hysteresis, low.min_interval_s) == (5.0, 120)  # room to fall back into
    button = plan_watch(POLICY, DEFAULTS, 7, changes=True)
    assert (button.pin, button.mode, button.label) == (7, "input_pullup", "button (pin 7)")
    assert WatchSpec.from_json(spec.to_json()) == spec


def test_the_model_reads_the_reading_in_the_trigger() -> None:
    spec = plan_watch(POLICY, DEFAULTS, "light", above=700)
    reading = reading_text(spec, 800)
    assert reading == "light (A0) read 800/1023 (3.91 V), above 700"
    assert (
        reading_text(plan_watch(POLICY, DEFAULTS, 7, changes=True), 0) == "button (pin 7) went low"
    )
    trigger = decode_trigger(encode_trigger(Trigger("pin", 4, "Ann", 0.0, "", 3600.0, reading)))
    assert trigger is not None
    text = trigger_text(trigger, "Tell Ann the light is on.", ZoneInfo("UTC"))
    assert text.startswith(
        "Pin watch #4 (set Thu 1970-01-01 00:00 by Ann): light (A0) read 800/1023 (3.91 V), "
        "above 700 at 01:00:00.\nTask: Tell Ann the light is on.\n(Nobody is waiting"
    )


@pytest.fixture
def settings_env(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINCLAW_HARDWARE__ENABLED", "true")
    monkeypatch.setenv("PINCLAW_HARDWARE__ALLOWED_PINS", '["A0"]')


@pytest.mark.both_stores
async def test_cancelling_a_watch_by_an_id_too_large_for_sql_says_there_is_none(
    settings_env: None, home: Path
) -> None:
    """cancel_watch(id=2**63): past SQL's integers, the store raised OverflowError and the
    model read "cancel_watch failed: OverflowError" instead of the line a missing id gets."""
    settings = load_settings()
    store = await open_store(settings.state_db, url=settings.state_url)
    try:
        book = ChatWatches(Schedules(store.db), settings)
        [_, _, cancel] = WatchTools(book, PinNames({"board": settings.hardware}), "UTC").tools()
        call = ToolCallContext(home, chat_key="telegram:42:", speaker=Speaker("42", "Ann"))
        for missing in (12, 2**63, -(2**63) - 1):
            result = await cancel.run({"id": missing}, call)
            assert (result.ok, result.output) == (
                False,
                f"no pin watch #{missing} in this chat; list_watches shows them",
            )
    finally:
        await store.close()


@pytest.mark.both_stores
async def test_a_one_shot_in_its_own_process_refuses_to_watch_and_keeps_nothing(
    settings_env: None, home: Path
) -> None:
    settings = load_settings()
    store = await open_store(settings.state_db, url=settings.state_url)
    try:
        book = ChatWatches(Schedules(store.db), settings)  # no watcher: nobody listens
        [watch_pin, _, _] = WatchTools(book, PinNames({"board": settings.hardware}), "UTC").tools()
        call = ToolCallContext(home, chat_key="telegram:42:", speaker=Speaker("42", "Ann"))
        result = await watch_pin.run({"pin": "A0", "above": 700, "task": "say so"}, call)
        assert not result.ok
        assert result.output.startswith("Not watching: pin watches run in the daemon")
        assert await store.db.fetchall("SELECT * FROM schedules") == []
    finally:
        await store.close()


def test_read_only_autonomy_refuses_setting_and_cancelling_watches(
    settings_env: None, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_SECURITY__AUTONOMY", "read_only")
    settings = load_settings()
    policy = SecurityPolicy.from_settings(settings.security, home / "workspace")
    tools = build_tools(settings, policy, make_boards(settings))
    for name, writes in (("watch_pin", True), ("cancel_watch", True), ("list_watches", False)):
        tool = tools.get(name)
        assert tool is not None and (type(tool).__name__ == "ReadOnlyRefusal") == writes


@pytest.mark.both_stores
async def test_a_watch_on_a_pin_the_config_no_longer_allows_is_cancelled_at_start(
    settings_env: None, home: Path
) -> None:
    settings = load_settings()
    store = await open_store(settings.state_db, url=settings.state_url)
    keeper = make_boards(settings)
    assert keeper is not None
    board = keeper.boards
    try:
        schedules = Schedules(store.db)
        spec = WatchSpec("A2", "A2", "analog", above=700, hysteresis=20)  # allowed back then
        row = await schedules.add(
            NewSchedule("pin", spec.to_json(), "say so", ChatRef("telegram", "42"), "42", None)
        )
        watcher = PinWatcher(schedules, {"telegram": None}, board, settings)  # type: ignore[dict-item]
        await watcher.sync()
        found = await schedules.get(row.id)
        assert found is not None and found.status == "cancelled"
        assert found.note == ("A2 is not allowed. Allowed pins: A0. ([hardware] in config.toml)")
        assert board["board"].last_error is None  # the board was not even opened
    finally:
        await board.close()
        await store.close()
