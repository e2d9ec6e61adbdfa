"""Schedules across wall-clock steps: `agent run` as a real process under libfaketime
(`faketime`, a Debian package), its wall clock stepped back an hour and then forward two
while it runs, its monotonic clocks left alone (FAKETIME_DONT_FAKE_MONOTONIC). After the
step back the every-minute schedule and the heartbeat go on (today they stopped for the
hour); after the step forward a reminder that came due in the jump runs, late, with no
claim that pinclaw was not running. Unit tests: the scheduler's own clocks, injected.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.llm_server import FakeLLM, Reply, text
from fakes.telegram_server import FakeTelegram

from agent.app import open_store
from agent.config import Settings
from agent.durable.schedules import NewSchedule, Schedules
from agent.durable.store import Store
from agent.proactive.scheduler import Scheduler
from agent.runtime.channel_runtime import ChannelRuntime
from channels.base import ChatRef
from tools.proactive.schedule_times import next_cron

OWNER = 42
TICK, REMINDER = "Say tick.", "Water the tomatoes."


def _libfaketime() -> str | None:
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob(
        "/usr/lib/faketime/libfaketime.so.1"
    )
    return found[0] if found else None


@pytest.fixture(scope="module")
def libfaketime() -> str:
    """libfaketime, installed with apt-get when missing and we are root; skipped otherwise,
    or when Python's clocks do not behave under it here."""
    if _libfaketime() is None and os.geteuid() == 0 and shutil.which("apt-get"):
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        install = ["apt-get", "install", "-y", "-qq", "faketime"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(install, env=env, **quiet).returncode:  # type: ignore[call-overload]
            subprocess.run(["apt-get", "update", "-qq"], env=env, **quiet)  # type: ignore[call-overload]
            subprocess.run(install, env=env, **quiet)  # type: ignore[call-overload]
    lib = _libfaketime()
    if lib is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    return lib


def faked(lib: str, offset_file: Path) -> dict[str, str]:
    return {
        "LD_PRELOAD": lib,
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",  # the file is read again at each call: steps while running
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # asyncio's timers and CLOCK_BOOTTIME stay real
    }


def step_to(offset_file: Path, offset_s: int) -> None:
    """Step the faked clock at once: libfaketime reads the file at every call, and one read
    between write_text's truncation and its write saw no offset (the real time) for a call."""
    staged = offset_file.with_suffix(".staged")
    staged.write_text(f"{offset_s:+d}\n")
    os.replace(staged, offset_file)


def test_libfaketime_steps_the_wall_clock_only(libfaketime: str, tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    step_to(offset, -3600)
    code = (
        "import asyncio, json, time\nasyncio.run(asyncio.sleep(0.01))\n"
        "print(json.dumps([time.time(), time.clock_gettime(time.CLOCK_BOOTTIME)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env_of(**faked(libfaketime, offset)),
        check=True,
    )
    wall, boottime = json.loads(out.stdout)
    assert abs(wall - (time.time() - 3600)) < 5
    assert abs(boottime - time.clock_gettime(time.CLOCK_BOOTTIME)) < 5


def plant(home: Path, kind: str, spec: str, task: str, due: float) -> None:
    async def add() -> None:
        store = await open_store(home / "state.db")
        try:
            chat = ChatRef("telegram", str(OWNER))
            new = NewSchedule(kind, spec, task, chat, str(OWNER), due, sender_name="owner")  # type: ignore[arg-type]
            await Schedules(store.db).add(new)
        finally:
            await store.close()

    asyncio.run(add())


def task_of(body: dict[str, Any]) -> str:
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    said = user if isinstance(user, str) else json.dumps(user)
    for task in (TICK, REMINDER):
        if task in said:
            return task
    return "heartbeat" if "HEARTBEAT.md" in said else "other"


@pytest.fixture
def stepped(
    telegram_env: dict[str, str], fake_llm: FakeLLM, libfaketime: str, home: Path, tmp_path: Path
) -> Iterator[tuple[DaemonProcess, Path, list[tuple[float, str]]]]:
    """`agent run` under libfaketime with a 3 s heartbeat, an every-minute schedule and a
    reminder due in 30 minutes; the turns it asked the model for, with when."""
    offset = tmp_path / "offset"
    step_to(offset, 0)
    now = time.time()
    plant(home, "cron", "* * * * *", TICK, next_cron("* * * * *", ZoneInfo("UTC"), now))
    plant(home, "once", "in 30 minutes", REMINDER, now + 1800)
    (home / "workspace").mkdir(exist_ok=True)
    (home / "workspace" / "HEARTBEAT.md").write_text("# Heartbeat\n\n- Nothing to check.\n")
    turns: list[tuple[float, str]] = []

    def answer(body: dict[str, Any]) -> Reply:
        task = task_of(body)
        turns.append((time.monotonic(), task))
        return text({TICK: "tick", REMINDER: "Time to water the tomatoes!"}.get(task, "NO_REPLY"))

    fake_llm.responder = answer
    env = env_of(
        **telegram_env,
        **faked(libfaketime, offset),
        PINCLAW_AGENT__TIMEZONE="UTC",
        PINCLAW_HEARTBEAT__ENABLED="true",
        PINCLAW_HEARTBEAT__INTERVAL_MINUTES="0.05",
        PINCLAW_PEOPLE=json.dumps({"me": {"telegram": str(OWNER), "owner": True}}),
        PINCLAW_STATE__BACKUPS_KEPT="0",
    )
    daemon = DaemonProcess(env, tmp_path / "daemon.log").start()
    try:
        daemon.wait_ready()
        yield daemon, offset, turns
    finally:
        daemon.ensure_stopped()


def test_schedules_go_on_after_the_clock_steps_back_and_run_late_after_it_jumps(
    stepped: tuple[DaemonProcess, Path, list[tuple[float, str]]],
    fake_telegram: FakeTelegram,
    home: Path,
) -> None:
    daemon, offset, turns = stepped

    def count(task: str, since: float = 0.0) -> int:
        return sum(1 for at, t in list(turns) if t == task and at >= since)

    wait_until(lambda: count("heartbeat") >= 1, 30, "a first heartbeat", daemon)
    # Back an hour, landing 4 s before a minute of the stepped clock: the every-minute
    # schedule is due then, not in an hour (or, when it ran just before, a minute after
    # that run: never twice within a minute).
    ticks = [at for at, task in list(turns) if task == TICK]
    lead = max(4.0, ticks[-1] + 57 - time.monotonic()) if ticks else 4.0
    back = time.time() - 3600
    adjust = int((60 - lead - back % 60) % 60)
    step_to(offset, -3600 + adjust)
    stepped_at = time.monotonic()
    wait_until(lambda: count("heartbeat", stepped_at) >= 2, 45, "heartbeats after the step", daemon)
    wait_until(lambda: count(TICK, stepped_at) >= 1, 20 + lead, "the every-minute run", daemon)
    assert "the clock stepped back" in daemon.log
    [(due,)] = rows(home / "state.db", "SELECT next_due FROM schedules WHERE kind = 'cron'")
    assert due < time.time() - 3000  # on the stepped clock now

    step_to(offset, 7200)  # two hours ahead: the reminder came due in the jump
    jumped_at = time.monotonic()
    wait_until(lambda: count(REMINDER, jumped_at) == 1, 20, "the reminder, late", daemon)
    fake_telegram.wait_for(lambda m: m.plain == "Time to water the tomatoes!", timeout=10)
    assert "the clock stepped forward" in daemon.log
    assert not [m.plain for m in fake_telegram.sent if "not running" in (m.plain or "")]
    assert rows(home / "state.db", "SELECT status, runs FROM schedules WHERE kind = 'once'") == [
        ("done", 1)
    ]
    heartbeats = count("heartbeat", jumped_at)
    wait_until(lambda: count("heartbeat", jumped_at) > heartbeats, 45, "heartbeats go on", daemon)
    assert daemon.terminate() == 0


# -- the scheduler's clocks, injected --------------------------------------------------------


class Clocks:
    """A wall clock that steps and a steady one that does not."""

    def __init__(self) -> None:
        self.wall = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC).timestamp()
        self.steady = 1000.0

    def advance(self, seconds: float, *, wall_step: float = 0.0) -> None:
        self.steady += seconds
        self.wall += seconds + wall_step


async def scheduler_on(
    tmp_path: Path, url: str | None, clocks: Clocks
) -> tuple[Scheduler, Schedules, Store]:
    store = await open_store(tmp_path / "state.db", url=url)
    schedules = Schedules(store.db)
    runtimes = cast(dict[str, ChannelRuntime], {"telegram": None})  # nothing comes due here
    settings = Settings(heartbeat={"enabled": True, "interval_minutes": 30})  # type: ignore[arg-type]
    scheduler = Scheduler(
        schedules,
        runtimes,
        settings,
        ZoneInfo("UTC"),
        clock=lambda: clocks.wall,
        steady=lambda: clocks.steady,
    )
    return scheduler, schedules, store


@pytest.mark.both_stores
async def test_a_step_back_moves_cron_and_heartbeat_rows_to_their_next_time(
    tmp_path: Path, home: Path, state_store: str | None
) -> None:
    clocks = Clocks()
    scheduler, schedules, store = await scheduler_on(tmp_path, state_store, clocks)
    chat = ChatRef("telegram", "42")
    hourly = await schedules.add(
        NewSchedule("cron", "0 * * * *", "t", chat, "42", clocks.wall + 3570)
    )
    beat = await schedules.add(
        NewSchedule("heartbeat", "every 30 minutes", "b", chat, "42", clocks.wall + 1200)
    )
    once = await schedules.add(NewSchedule("once", "x", "o", chat, "42", clocks.wall + 600))
    await scheduler.run_due()  # the first look: nothing to move
    assert [(await schedules.get(s.id)).next_due for s in (hourly, beat, once)] == [  # type: ignore[union-attr]
        hourly.next_due,
        beat.next_due,
        once.next_due,
    ]
    clocks.advance(10, wall_step=-3600)
    await scheduler.run_due()
    moved = {s.id: s.next_due for s in await schedules.active()}
    assert moved[hourly.id] == next_cron("0 * * * *", ZoneInfo("UTC"), clocks.wall)
    assert moved[hourly.id] == hourly.next_due - 3600  # type: ignore[operator]
    assert moved[beat.id] == clocks.wall + 1800
    assert moved[once.id] == once.next_due  # a time of day: it stays
    await store.close()


@pytest.mark.both_stores
async def test_a_jump_while_running_is_not_downtime_but_a_long_gap_is(
    tmp_path: Path, home: Path, state_store: str | None
) -> None:
    clocks = Clocks()
    scheduler, _, store = await scheduler_on(tmp_path, state_store, clocks)
    started = clocks.wall
    await scheduler.run_due()
    clocks.advance(30, wall_step=7200)  # stepped forward while running
    await scheduler.run_due()
    assert scheduler._running_since == started  # what came due in the jump runs, late
    clocks.advance(8 * 3600)  # steady time passed with no look: asleep, or stopped
    await scheduler.run_due()
    assert scheduler._running_since == clocks.wall  # what came due meanwhile was missed
    await store.close()


class Fired:
    """The chat side of the scheduler: each run stored (its row advanced), with the steady
    time it came."""

    def __init__(self, schedules: Schedules, clocks: Clocks) -> None:
        self._schedules, self._clocks = schedules, clocks
        self.at: list[float] = []

    def is_allowed_sender(self, sender_id: str, username: str = "") -> bool:
        return True

    async def enqueue_triggered(self, msg: object, trigger: object, *, alongside: Any) -> None:
        await self._schedules.db.write(alongside)
        self.at.append(self._clocks.steady)


@pytest.mark.both_stores
async def test_an_every_minute_schedule_never_runs_twice_within_a_minute_across_steps(
    tmp_path: Path, home: Path, state_store: str | None
) -> None:
    clocks = Clocks()  # 12:00:30
    store = await open_store(tmp_path / "state.db", url=state_store)
    schedules = Schedules(store.db)
    fired = Fired(schedules, clocks)
    settings = Settings()
    zone = ZoneInfo("UTC")
    runtimes = cast(dict[str, ChannelRuntime], {"telegram": fired})
    scheduler = Scheduler(
        schedules, runtimes, settings, zone, clock=lambda: clocks.wall, steady=lambda: clocks.steady
    )
    chat = ChatRef("telegram", "42")
    row = await schedules.add(
        NewSchedule("cron", "* * * * *", TICK, chat, "42", clocks.wall + 30, sender_name="me")
    )

    async def tick(seconds: float, *, wall_step: float = 0.0) -> None:
        clocks.advance(seconds, wall_step=wall_step)
        await scheduler.run_due()

    await tick(0)
    await tick(30)  # 12:01:00: the first run
    await tick(1, wall_step=-30)  # back to 12:00:31: 12:01:00 is due again in 29 s
    await tick(29)
    await tick(60)  # 12:02:00
    await tick(1, wall_step=90)  # forward to 12:03:31: 12:03:00 came due in the jump
    for _ in range(8):
        await tick(15)
    assert len(fired.at) == 3
    gaps = [b - a for a, b in zip(fired.at, fired.at[1:], strict=False)]
    assert min(gaps) >= 55, gaps
    current = await schedules.get(row.id)
    assert current is not None and current.status == "active" and current.runs == 3
    await store.close()
