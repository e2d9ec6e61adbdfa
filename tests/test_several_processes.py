"""Several `agent run` processes, one bot, one PostgreSQL store (issue 42): each in a home of
its own (as on machines of their own), with the same settings, state URL and a shared
workspace, against the Telegram and model doubles and a real PostgreSQL 15.

The scale test: 1,000 messages in 50 chats over three processes; the process holding
Telegram's intake is killed -9 at a random moment, then a second one in the middle of its
turns. Every message is answered exactly once, each chat's replies come in order, the
schedules set beforehand fire once each, and the intake is taken over within 10 s. A kill
lands when every part marked as being sent has reached the double (held there after Telegram
took it): a send killed between its mark and Telegram cannot be told from one that did, and
pinclaw never sends such a part twice — the at-most-once contract, not this test's subject.
"""

from __future__ import annotations

import asyncio
import functools
import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess, agent, env_of, rows, wait_until
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, Outcome, delay, text, tool_calls
from fakes.tcp_serial import TcpSerial
from fakes.telegram_server import FakeTelegram
from hardware_calls import call
from postgres_cluster import PostgresCluster

from agent.durable.postgres.pg_claims import SharedClaims
from agent.durable.schedules import NewSchedule, Schedules
from agent.durable.store import open_store
from channels.base import ChatRef
from tools.board.board import Board
from tools.config import HardwareSettings

OWNER = 42
ASKED = re.compile(r"chat (\d+) message (\d+)")
TAKEN_OVER = "took the intake over"
STANDBY = "on standby"
PINS = {"led": {"pin": 13, "mode": "output"}}


@pytest.fixture
def processes() -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.ensure_stopped()


def start(
    started: list[DaemonProcess], tmp_path: Path, url: str, n: int, **env: str
) -> DaemonProcess:
    settings = {
        "PINCLAW_HOME": str(tmp_path / f"home-{n}"),
        "PINCLAW_STATE__URL": url,
        "PINCLAW_WORKSPACE__PATH": str(tmp_path / "shared-workspace"),
        "PINCLAW_LLM__NUM_RETRIES": "0",
        **env,
    }
    daemon = DaemonProcess(env_of(**settings), tmp_path / f"daemon-{n}.log").start()
    started.append(daemon)
    return daemon


def answered(fake: FakeTelegram) -> list[tuple[int, int, int]]:
    """(chat id, chat number, message number) of each answer Telegram took."""
    found = []
    for sent in fake.sent:
        asked = ASKED.search(sent.plain or "") if sent.method == "sendMessage" else None
        if asked:
            found.append((int(sent.chat_id), int(asked.group(1)), int(asked.group(2))))
    return found


CLAIM = (  # who holds a claim (agent/durable/postgres/pg_claims.py): its kind, its key
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
    " AND l.classid = (hashtext(%s)::int8 & 4294967295)::oid"
    " AND l.objid = (hashtext(%s)::int8 & 4294967295)::oid"
)


def claim_holder(url: str, kind: str, key: str) -> str:
    """The application_name ("pinclaw host:pid ...") of the process holding the claim."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(CLAIM, (kind, key)).fetchall()
    return str(found[0][0]) if found else ""


def holds(daemon: DaemonProcess, holder: str) -> bool:
    assert daemon.proc is not None
    return f":{daemon.proc.pid} " in f"{holder} "


def holder(daemons: list[DaemonProcess]) -> DaemonProcess:
    """The living process taking Telegram's messages."""
    alive = [d for d in daemons if d.proc is not None and d.proc.poll() is None]
    taking = [d for d in alive if STANDBY not in d.log or TAKEN_OVER in d.log]
    assert len(taking) == 1, [d.log[-2000:] for d in taking]
    return taking[0]


def kill_between_sends(fake: FakeTelegram, daemon: DaemonProcess, url: str) -> None:
    """kill -9 at a moment when every part marked as being sent has reached Telegram (held
    there after Telegram took it): the process is frozen (SIGSTOP) and the store compared
    with the double, and let run a little more while a send it began has not gone out."""
    gate = fake.gate("sendMessage", 3.0, times=1_000_000)
    assert daemon.proc is not None
    for _ in range(100):
        daemon.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)
        taken = {(c, n) for _, c, n in answered(fake)}
        if sending(url) <= taken:
            break
        daemon.proc.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    daemon.kill9()
    gate.times = gate.held  # no more holds


def sending(url: str) -> set[tuple[int, int]]:
    """(chat, message) of each reply part marked as being sent, not yet done."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINCLAW_STATE__URL", url)
        found = rows(
            Path("unused.db"),
            "SELECT o.parts FROM outbox_parts p JOIN outbox o ON o.id = p.outbox_id"
            " WHERE p.status = 'sending'",
        )
    asked = (ASKED.search(parts) for (parts,) in found)
    return {(int(m.group(1)), int(m.group(2))) for m in asked if m}


async def set_schedules(home: Path, url: str, due: list[float]) -> None:
    store = await open_store(home / "state.db", url=url)
    chat = ChatRef("telegram", str(OWNER))
    try:
        for n, at in enumerate(due):
            new = NewSchedule("once", "once", f"scheduled task {n}", chat, str(OWNER), at)
            await Schedules(store.db).add(new)
    finally:
        await store.close()


@pytest.mark.timeout(300)  # a minute and more: 1,000 turns on two cores
def test_three_processes_answer_1000_messages_once_each_in_order_through_two_kills(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    chats, per_chat = 50, 20
    url = postgres.new_database()
    due = [time.time() + s for s in (8, 12, 16)]
    asyncio.run(set_schedules(tmp_path / "setup", url, due))
    # What each turn does beside the store — recall, reactions — is left out: this test is
    # about the processes' coordination, and the suite's time (other tests cover those).
    lean = {"PINCLAW_MEMORY__AUTO_RECALL": "false"}
    first = start(processes, tmp_path, url, 0, **lean)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    for n in (1, 2):
        start(processes, tmp_path, url, n, **lean)
    for daemon in processes[1:]:
        wait_until(lambda d=daemon: STANDBY in d.log, 60, "standby", daemon)  # type: ignore[misc]
    rng = random.Random(42)
    order = [(chat, n) for n in range(per_chat) for chat in range(chats)]
    for count, (chat, n) in enumerate(order):
        fake_telegram.inject_message(1000 + chat, OWNER, f"chat {chat} message {n}")
        if count == 300:  # the intake's holder, at a moment the seed picks
            time.sleep(rng.uniform(0.0, 1.0))
            victim = holder(processes)
            kill_between_sends(fake_telegram, victim, url)
            killed_at = time.monotonic()
            others = [d for d in processes if d is not victim]
            wait_until(
                lambda: any(TAKEN_OVER in d.log for d in others),  # noqa: B023
                10,
                "the intake taken over within 10 s",
            )
            took_s = time.monotonic() - killed_at
        if count == 600:  # a second process, in the middle of its turns
            busy = [d for d in processes if d.proc is not None and d.proc.poll() is None]
            kill_between_sends(fake_telegram, busy[0], url)
    total = chats * per_chat
    last = processes[-1]
    wait_until(lambda: len(answered(fake_telegram)) >= total, 240, "every answer", last)
    time.sleep(2.0)  # nothing more comes

    got = answered(fake_telegram)
    assert len(got) == total, f"{len(got) - len(set(got))} duplicates"
    for chat in range(chats):
        numbers = [n for chat_id, c, n in got if chat_id == 1000 + chat and c == chat]
        assert numbers == list(range(per_chat)), (chat, numbers)
    assert took_s <= 10
    db = tmp_path / "unused.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINCLAW_STATE__URL", url)
        fired = rows(db, "SELECT message_id FROM inbox WHERE message_id LIKE 'schedule:%'")
        runs = rows(db, "SELECT runs, status FROM schedules ORDER BY id")
    assert len(fired) == 3 and len(set(fired)) == 3
    assert runs == [(1, "done")] * 3
    told = [m.plain or "" for m in fake_telegram.sent if m.chat_id == OWNER]
    for n in range(3):  # each scheduled turn's reply reached the owner once
        assert sum(f"scheduled task {n}" in text for text in told) == 1, told


def test_doctor_lists_the_processes_and_the_intake_moves_when_its_holder_dies(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    url = postgres.new_database().replace("pinclaw@", "pinclaw:hunter2@")  # trust: any works
    first = start(processes, tmp_path, url, 0)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    second = start(processes, tmp_path, url, 1)
    wait_until(lambda: STANDBY in second.log, 60, "standby", second)
    env = {"PINCLAW_HOME": str(tmp_path / "home-1"), "PINCLAW_STATE__URL": url}
    said = agent("doctor", env=env).stdout
    line = next(x for x in said.splitlines() if "processes:" in x)
    assert "2 share the store" in line
    assert f":{first.proc.pid} (intake:telegram)" in line  # type: ignore[union-attr]
    assert f":{second.proc.pid} (no role)" in line  # type: ignore[union-attr]
    assert "hunter2" not in said + first.log + second.log  # the password is never shown

    first.kill9()
    wait_until(lambda: TAKEN_OVER in second.log, 10, "the takeover", second)
    fake_telegram.inject_message(1000, OWNER, "chat 0 message 0")
    wait_until(lambda: len(answered(fake_telegram)) == 1, 20, "the answer", second)
    line = next(x for x in agent("doctor", env=env).stdout.splitlines() if "processes:" in x)
    assert "1 share the store" in line and f":{second.proc.pid} (intake:telegram)" in line  # type: ignore[union-attr]


def test_a_process_with_a_workspace_of_its_own_or_a_local_board_is_refused(
    telegram_env: dict[str, str], postgres: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres.new_database()
    shared = tmp_path / "shared-workspace"
    shared.mkdir()

    async def first_start() -> None:  # as the first process did
        store = await open_store(tmp_path / "home-0" / "state.db", url=url, workspace=shared)
        await store.close()

    asyncio.run(first_start())
    base = {"PINCLAW_STATE__URL": url, "PINCLAW_HOME": str(tmp_path / "home-1")}
    apart = agent("run", env={**base, "PINCLAW_WORKSPACE__PATH": str(tmp_path / "own")})
    assert apart.returncode == 2
    assert "is not the one the other processes on this store use" in apart.stderr
    assert len(apart.stderr.strip().splitlines()) == 1, apart.stderr

    local_board = {
        **base,
        "PINCLAW_WORKSPACE__PATH": str(shared),
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": "/dev/ttyACM0",
    }
    refused = agent("run", env=local_board)
    assert refused.returncode == 2
    assert "is a serial device of this machine" in refused.stderr
    assert "rfc2217://" in refused.stderr


def test_a_process_that_loses_its_claims_connection_stands_by_then_takes_the_intake_again(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    import psycopg

    url = postgres.new_database()
    only = start(processes, tmp_path, url, 0)
    wait_until(lambda: "telegram started" in only.log, 60, "the process", only)
    with psycopg.connect(url, autocommit=True) as conn:  # the server drops its claims
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name LIKE 'pinclaw %' AND datname = current_database()"
        )
    wait_until(lambda: "lost the intake" in only.log, 10, "standby", only)
    wait_until(lambda: TAKEN_OVER in only.log, 10, "the intake again", only)
    fake_telegram.inject_message(1000, OWNER, "chat 0 message 0")
    wait_until(lambda: len(answered(fake_telegram)) == 1, 20, "the answer", only)
    assert "Conflict" not in only.log  # never two getUpdates at once


def test_stop_reaches_a_turn_running_in_another_process(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    url = postgres.new_database()
    one_slot = {"PINCLAW_AGENT__MAX_CONCURRENT_TURNS": "1"}  # two chats: one on each process
    first = start(processes, tmp_path, url, 0, **one_slot)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    second = start(processes, tmp_path, url, 1, **one_slot)
    wait_until(lambda: STANDBY in second.log, 60, "standby", second)
    fake_llm.latency_s = 8.0
    for chat in (0, 1):
        fake_telegram.inject_message(1000 + chat, OWNER, f"chat {chat} message 0")
    # one slot each and both turns running: one in each process
    wait_until(lambda: len(fake_llm.requests) == 2, 20, "both turns running", second)
    for chat in (0, 1):  # the intake's holder runs one of them; the other runs elsewhere
        fake_telegram.inject_message(1000 + chat, OWNER, "/stop")
    said = lambda chat: [m.plain for m in fake_telegram.sent if m.chat_id == 1000 + chat]  # noqa: E731
    for chat in (0, 1):
        wait_until(lambda c=chat: "Stopped." in said(c), 6, f"chat {chat} stopped", second)  # type: ignore[misc]
        assert said(chat)[0] == "Stopping."
    time.sleep(1.0)
    assert answered(fake_telegram) == []  # neither turn's answer went out


@pytest.mark.timeout(180)
def test_new_taken_by_one_process_stores_nothing_of_the_turn_it_stops_in_another(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    """Two chats, two processes with one turn slot each: one chat's turn runs in each. The
    person whose turn runs in the process that does not take Telegram's messages sends /new
    while the answer is being worked on: that turn stores nothing, as alone on a store
    (RunningTurns.forgotten, told by a FORGET announcement), and the fresh conversation
    starts empty. Before, it heard only "stop" and its question was stored in the session
    /new had just begun (and a tainted turn would have tainted it)."""
    import psycopg

    url = postgres.new_database()
    one_slot = {"PINCLAW_AGENT__MAX_CONCURRENT_TURNS": "1"}

    def respond(body: dict[str, Any]) -> Outcome:
        asked = str([m for m in body["messages"] if m.get("role") == "user"][-1]["content"])
        if asked.endswith("the old question"):
            return delay(20, text("the old answer"))
        return text("echo: " + asked.splitlines()[-1])

    fake_llm.responder = respond
    first = start(processes, tmp_path, url, 0, **one_slot)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    second = start(processes, tmp_path, url, 1, **one_slot)
    wait_until(lambda: STANDBY in second.log, 60, "standby", second)
    chats = (1000, 1001)
    for chat in chats:
        fake_telegram.inject_message(chat, 42, "the old question")
    wait_until(lambda: len(fake_llm.requests) == 2, 30, "both turns running", second)
    (chat,) = [c for c in chats if holds(second, claim_holder(url, "turns", f"telegram:{c}:"))]
    said = lambda: [m.plain or "" for m in fake_telegram.sent if m.chat_id == chat]  # noqa: E731
    # The stopped turn reads the chat's /voice choice before its commit: held here until
    # /new has been taken (a few round trips; far below the store's 5 s lock timeout). Else
    # the process that stops its turn on the announcement may store the question before
    # /new's fresh session begins, and the test would pass by that race alone.
    with psycopg.connect(url) as holding:
        holding.execute("LOCK TABLE chat_voices IN ACCESS EXCLUSIVE MODE")
        fake_telegram.inject_message(chat, 42, "/new")  # taken by the first process
        wait_until(lambda: "Started a fresh conversation." in said(), 20, "/new's answer")
        holding.commit()
    wait_until(lambda: "Stopped." in said(), 20, "the turn stopped", second)
    fake_telegram.inject_message(chat, 42, "a fresh start")
    wait_until(lambda: "echo: a fresh start" in said(), 30, "the fresh answer", second)
    (fresh,) = [body for body in fake_llm.requests if "a fresh start" in str(body["messages"])]
    history = "\n".join(str(m.get("content")) for m in fresh["messages"][1:])
    assert "the old question" not in history, history


@pytest.mark.timeout(180)
def test_stop_reaches_a_job_running_in_another_process(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    """Each chat's turn hands a task to a sub-agent and ends, so only the jobs run, one in
    each process. /stop, taken by the intake's holder for both chats, stops both at once:
    its own, and the other process's by an announcement (and a mark in the store). Before,
    that chat was told "Nothing is running." and its job ran on to its end."""
    url = postgres.new_database()
    env = {"PINCLAW_AGENT__MAX_CONCURRENT_TURNS": "1", "PINCLAW_AGENT__SUB_AGENTS": "true"}
    first = start(processes, tmp_path, url, 0, **env)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    second = start(processes, tmp_path, url, 1, **env)
    wait_until(lambda: STANDBY in second.log, 60, "standby", second)

    def is_job(body: dict[str, Any]) -> bool:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        return bool(users) and str(users[-1].get("content")).startswith("[Job #")

    def respond(body: dict[str, Any]) -> Outcome:
        if is_job(body):
            return delay(30, text("what the job found"))
        if body["messages"][-1].get("role") == "tool":
            return text("handed over")
        return delay(4, tool_calls(("delegate", {"task": "look around"})))  # both turns at once

    fake_llm.responder = respond
    for chat in (0, 1):
        fake_telegram.inject_message(1000 + chat, OWNER, f"chat {chat} message 0")
    jobs = lambda: [r for r in fake_llm.requests if is_job(r)]  # noqa: E731
    wait_until(lambda: len(jobs()) == 2, 30, "both jobs running", second)
    for chat in (0, 1):
        fake_telegram.inject_message(1000 + chat, OWNER, "/stop")
    said = lambda chat: [m.plain or "" for m in fake_telegram.sent if m.chat_id == 1000 + chat]  # noqa: E731

    def stopped(chat: int) -> bool:  # the other process's notice may come before "Stopping."
        return any("was cancelled" in line for line in said(chat)) and "Stopping." in said(chat)

    for chat in (0, 1):
        wait_until(
            functools.partial(stopped, chat),
            8,
            f"chat {chat}'s job stopped, /stop answered",
            second,
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINCLAW_STATE__URL", url)
        assert rows(Path("unused.db"), "SELECT state FROM jobs") == [("cancelled",)] * 2


@pytest.mark.timeout(180)
def test_a_job_whose_process_dies_is_taken_over_by_a_process_still_running(
    processes: list[DaemonProcess],
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    postgres: PostgresCluster,
    tmp_path: Path,
) -> None:
    """Two processes share the store. A chat's turn hands a task to a sub-agent ("its
    result will come to this chat"); the process running the job is killed -9 (its machine
    died) and is not started again. The other process takes the job over within seconds
    (its jobs' sweep finds it unfinished, its claim free) and its result comes once. Before,
    its row stayed `running` and the result never came: a runner took up unfinished jobs
    only at its own start."""
    url = postgres.new_database()
    slow = {"job": True}

    def is_job(body: dict[str, Any]) -> bool:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        return bool(users) and str(users[-1].get("content")).startswith("[Job #")

    def respond(body: dict[str, Any]) -> Outcome:
        if is_job(body):
            return delay(60 if slow["job"] else 0, text("12 apples"))
        if body["messages"][-1].get("role") == "tool":
            return text("A helper is counting.")
        return tool_calls(("delegate", {"task": "count the apples"}))

    fake_llm.responder = respond
    env = {"PINCLAW_AGENT__SUB_AGENTS": "true"}
    first = start(processes, tmp_path, url, 0, **env)
    wait_until(lambda: "telegram started" in first.log, 60, "the first process", first)
    second = start(processes, tmp_path, url, 1, **env)
    wait_until(lambda: STANDBY in second.log, 60, "standby", second)

    fake_telegram.inject_message(1000, 42, "count the apples")
    said = lambda: [m.plain or "" for m in fake_telegram.sent if m.chat_id == 1000]  # noqa: E731
    wait_until(lambda: "A helper is counting." in said(), 30, "the turn's reply", second)
    wait_until(lambda: claim_holder(url, "jobs", "1") != "", 30, "the job running")
    holder = claim_holder(url, "jobs", "1")
    (victim,) = [d for d in processes if holds(d, holder)]
    (survivor,) = [d for d in processes if d is not victim]
    slow["job"] = False
    victim.kill9()  # and never started again

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINCLAW_STATE__URL", url)
        jobs = lambda: rows(tmp_path / "unused.db", "SELECT state, delivered FROM jobs")  # noqa: E731
        try:
            wait_until(
                lambda: any(line.startswith("Job #1 (count the apples)") for line in said()),
                45,
                "the job's result, from the process still running",
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; the jobs' rows: {jobs()}; {survivor.log[-1500:]}"
            ) from None
        assert said().count("Job #1 (count the apples) finished:\n12 apples") == 1
        assert jobs() == [("done", "message")]


async def test_one_process_at_a_time_drives_a_board_and_another_takes_it_when_it_stops(
    emulator: FirmataBoard, postgres: PostgresCluster
) -> None:
    """Two processes' boards (and claims) on one network board: the first to connect drives
    it; the other's calls are refused with a line that says so, and succeed once the first
    process is gone (its claims' connection closed, as at its death)."""
    url = postgres.new_database()
    values = {"enabled": True, "port": "", "connect_timeout_s": 2.0, "pins": PINS}
    with TcpSerial(emulator.path) as served:
        settings = HardwareSettings.model_validate(values | {"port": served.url})
        first_claims, second_claims = SharedClaims(url), SharedClaims(url)
        await first_claims.open()
        await second_claims.open()
        first, second = Board(settings, name="board"), Board(settings, name="board")
        first.claim = functools.partial(first_claims.take, "role", "board:board")
        second.claim = functools.partial(second_claims.take, "role", "board:board")
        try:
            assert (await call(first, "gpio_write", pin="led", value=1)).ok
            refused = await call(second, "gpio_write", pin="led", value=0)
            assert not refused.ok and "driven by another pinclaw process" in refused.output
            assert emulator.level(13) == 1  # the refused call changed nothing
            await first.close()
            await first_claims.close()  # the first process is gone
            assert (await call(second, "gpio_write", pin="led", value=0)).ok
            assert emulator.level(13) == 0
            assert second_claims.holds() == ["role board:board"]
        finally:
            await second.close()
            await second_claims.close()
