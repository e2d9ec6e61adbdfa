"""Replies at most once, never a silent duplicate, and no chat that stops: `agent run` as a
subprocess against the fake Telegram (and Discord) and the fake LLM, killed with SIGKILL at
each point of a send, answered late, refused, starved of state.db's write lock, and asked
for a 1 MB reply. Each test asserts what the users received and what state.db holds.

The kill rounds print their figures (duplicate and lost parts per kill, also appended to
the file PINCLAW_DELIVERY_FIGURES names, if set); PINCLAW_CRASH_PASSES=N runs each kill point
N times.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.discord_delivery import Stage
from fakes.discord_server import FakeDiscord
from fakes.llm_server import FakeLLM, text
from fakes.llm_server import Reply as ModelReply
from fakes.telegram_server import FakeTelegram
from pydantic import SecretStr

import channels.telegram.channel as telegram_channel
from agent.app import open_store
from agent.durable.file.state_db import StateDB
from agent.runtime.queues.courier import AFTER_NO_ANSWER, Courier
from agent.runtime.queues.keyed_worker import KeyedWorker
from channels.base import ChatRef, Reply
from channels.config import TelegramSettings

OWNER = 42
CHAT = 4242
ROUND = re.compile(r"round (\d+)")
PASSES = int(os.environ.get("PINCLAW_CRASH_PASSES", "1"))
FIGURES = os.environ.get("PINCLAW_DELIVERY_FIGURES")  # read now: the home fixture clears them
# Where the kill lands in the send of part X of a three-part reply:
#   before_call  X was answered 429 (not taken); pinclaw waits to send it again
#   never_got    X's request was written; Telegram had not handled it yet
#   accepted     Telegram recorded X; its answer had not come back (no mark yet)
#   marked       every part sent and marked
POINTS = [(point, part) for part in "ABC" for point in ("before_call", "never_got", "accepted")]
POINTS.append(("marked", "C"))
RESENT = "(sent again"
ROUNDS_TIMEOUT = pytest.mark.timeout(60 + 120 * PASSES)  # a restart per kill: ~6 s each


def parts_reply(size: int) -> Callable[[dict[str, Any]], ModelReply]:
    """The fake model's answer to "round N": three paragraphs, PART-A-N, PART-B-N, PART-C-N,
    each `size` characters, so the platform takes each as one message of its own."""

    def respond(body: dict[str, Any]) -> ModelReply:
        said = str([m.get("content") for m in body["messages"] if m.get("role") == "user"][-1:])
        found = ROUND.search(said)
        n = found.group(1) if found else "?"
        filler = ("word " * (size // 5)).strip()
        return text("\n\n".join(f"PART-{x}-{n} {filler}" for x in "ABC"))

    return respond


class Daemons:
    """`agent run` started again and again in one home, each with its own log."""

    def __init__(self, tmp_path: Path, env: dict[str, str], started: str) -> None:
        self._tmp, self._env, self._started = tmp_path, env, started
        self.all: list[DaemonProcess] = []

    def start(self, **extra: str) -> DaemonProcess:
        log = self._tmp / f"daemon-{len(self.all)}.log"
        daemon = DaemonProcess(env_of(**{**self._env, **extra}), log).start()
        self.all.append(daemon)
        wait_until(lambda: self._started in daemon.log, 60, self._started, daemon)
        return daemon

    def stop_all(self) -> None:
        for daemon in self.all:
            daemon.ensure_stopped()


@pytest.fixture
def telegram_daemons(telegram_env: dict[str, str], tmp_path: Path) -> Iterator[Daemons]:
    settings = {"PINCLAW_LLM__NUM_RETRIES": "0", "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "1"}
    daemons = Daemons(tmp_path, settings, "telegram started")
    yield daemons
    daemons.stop_all()


def db_of(home: Path) -> Path:
    return home / "state.db"


def finished(db: Path) -> int:
    """Replies no longer pending (sent, refused or expired)."""
    if not db.exists():
        return 0
    return int(rows(db, "SELECT COUNT(*) FROM outbox WHERE status != 'pending'")[0][0])


def reached(db: Path, n: int) -> Callable[[], bool]:
    return lambda: finished(db) >= n


def sent_texts(fake: FakeTelegram, chat: int = CHAT) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat]


class Tally:
    """Per kill: how many copies of each part the user got, and which were marked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kills = self.duplicates = self.silent_duplicates = self.lost = 0

    def add(self, copies: dict[str, list[str]]) -> None:
        self.kills += 1
        for texts in copies.values():
            self.lost += not texts
            self.duplicates += max(0, len(texts) - 1)
            self.silent_duplicates += sum(RESENT not in t for t in texts[1:])

    def report(self) -> str:
        per = 100 / max(1, self.kills)
        line = (
            f"{self.name}: {self.kills} kills: {self.duplicates} duplicate part(s) "
            f"({self.duplicates * per:.0f} per 100 crashes; {self.silent_duplicates} unmarked), "
            f"{self.lost} part(s) lost ({self.lost * per:.0f} per 100 crashes)"
        )
        print(line)
        if FIGURES:
            with Path(FIGURES).open("a") as out:
                out.write(line + "\n")
        return line


def tag(part: str, n: int) -> str:
    return f"PART-{part}-{n} "  # the space: PART-A-1 is not PART-A-10


def copies_in(texts: list[str], n: int) -> dict[str, list[str]]:
    return {x: [t for t in texts if tag(x, n) in t] for x in "ABC"}


def expected(point: str, part: str, mode: str) -> dict[str, int]:
    """Copies of each part the user gets (see POINTS); a resend carries the marker."""
    counts = dict.fromkeys("ABC", 1)
    if mode == "at_most_once" and point == "never_got":
        counts[part] = 0  # possibly lost: Telegram cannot be asked
    if mode == "at_least_once" and point == "accepted":
        counts[part] = 2  # sent again, marked
    return counts


# -- Telegram: kill -9 at each point of a send ------------------------------------------------


@ROUNDS_TIMEOUT
@pytest.mark.parametrize("mode", ["at_most_once", "at_least_once"])
def test_kill_9_at_each_point_of_a_telegram_send(
    mode: str,
    telegram_daemons: Daemons,
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
) -> None:
    fake_llm.responder = parts_reply(3000)
    db, tally = db_of(home), Tally(f"telegram {mode}")
    extra = {"PINCLAW_CHANNELS__DELIVERY": mode}
    daemon = telegram_daemons.start(**extra)
    for n, (point, part) in enumerate(POINTS * PASSES, start=1):
        strike_telegram(fake_telegram, daemon, db, n, point, part)
        daemon = telegram_daemons.start(**extra)
        wait_until(reached(db, n), 60, f"round {n} finished", daemon)
        copies = copies_in(sent_texts(fake_telegram), n)
        tally.add(copies)
        counts = {x: len(texts) for x, texts in copies.items()}
        assert counts == expected(point, part, mode), (n, point, part, copies)
        for texts in copies.values():  # the first copy plain, any later one marked
            assert all(RESENT not in t for t in texts[:1]) or point == "never_got"
            assert all(RESENT in t for t in texts[1:])
        if point == "never_got" and mode == "at_least_once":
            assert RESENT in copies[part][0]
    assert daemon.terminate() == 0
    tally.report()
    assert tally.silent_duplicates == 0
    if mode == "at_most_once":
        assert tally.duplicates == 0
        unknown = rows(db, "SELECT COUNT(*) FROM outbox_parts WHERE status = 'unknown'")
        assert unknown[0][0] == 2 * 3 * PASSES  # never_got and accepted, for each part
    sent = rows(db, "SELECT COUNT(*) FROM outbox_parts WHERE status = 'sent' AND message_id = ''")
    assert sent == [(0,)]  # every part sent has Telegram's message id


def strike_telegram(
    fake: FakeTelegram, daemon: DaemonProcess, db: Path, n: int, point: str, part: str
) -> None:
    """Ask for round `n` and kill -9 the daemon at `point` of part `part`'s send."""
    at = tag(part, n)
    gate = None
    if point == "before_call":
        gate = fake.gate("sendMessage", 0, stage="before", text=at, refuse=429, retry_after=30)
    elif point == "never_got":
        gate = fake.gate("sendMessage", 5, stage="before", text=at)
    elif point == "accepted":
        gate = fake.gate("sendMessage", 5, stage="after", text=at)
    fake.inject_message(CHAT, OWNER, f"round {n}")
    if gate is None:
        wait_until(reached(db, n), 30, f"round {n} sent", daemon)
    else:
        wait_until(gate.reached.is_set, 30, f"{point} of {at}", daemon)
        time.sleep(0.3)  # the 429 answered, the request in flight
    daemon.kill9()


# -- Telegram: slow, refusing, and a reply too long -------------------------------------------


def test_telegram_answering_a_send_after_8_s_is_delivered_once(
    telegram_daemons: Daemons, fake_telegram: FakeTelegram, home: Path
) -> None:
    daemon = telegram_daemons.start()
    slow = fake_telegram.gate("sendMessage", 8, stage="after", text="round 1")
    fake_telegram.inject_message(CHAT, OWNER, "round 1")
    wait_until(lambda: finished(db_of(home)) >= 1, 30, "the reply marked", daemon)
    time.sleep(3)  # nothing is sent again
    assert daemon.terminate() == 0
    assert slow.held == 1
    assert len([t for t in sent_texts(fake_telegram) if "round 1" in t]) == 1
    (answer,) = [m for m in fake_telegram.sent if m.method == "sendMessage"]
    stored = rows(db_of(home), "SELECT status, message_id FROM outbox_parts")
    assert stored == [("sent", str(answer.message_id))]
    assert "got no answer" not in daemon.log


def test_a_reply_the_user_blocked_is_stored_refused_not_retried_and_doctor_counts_it(
    telegram_daemons: Daemons, fake_telegram: FakeTelegram, home: Path
) -> None:
    daemon = telegram_daemons.start()
    blocked = "Forbidden: bot was blocked by the user"
    fake_telegram.fail_for("sendMessage", 60, status=403, description=blocked)
    fake_telegram.inject_message(CHAT, OWNER, "round 1")
    wait_until(lambda: finished(db_of(home)) >= 1, 30, "the reply given up", daemon)
    time.sleep(2)
    assert daemon.terminate() == 0
    assert fake_telegram.rejected_calls == {"sendMessage": 1}  # no retry, no plain-text copy
    db = db_of(home)
    assert rows(db, "SELECT status FROM outbox") == [("refused",)]
    (part,) = rows(db, "SELECT status, reason FROM outbox_parts")
    assert part[0] == "refused" and "blocked by the user" in part[1]
    doctor = subprocess.run(
        [sys.executable, "-m", "agent", "doctor"],
        env=env_of(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "1 part(s) refused by the platform" in doctor.stdout, doctor.stdout


def test_a_1_mb_reply_arrives_as_one_document_and_a_summary(
    telegram_daemons: Daemons, fake_telegram: FakeTelegram, fake_llm: FakeLLM, home: Path
) -> None:
    whole = "".join(
        f"line {i:06d} of a very long answer, padded out to fifty.\n" for i in range(18_000)
    )
    assert len(whole) > 1_000_000
    fake_llm.script(text(whole))
    daemon = telegram_daemons.start()
    fake_telegram.inject_message(CHAT, OWNER, "write me a megabyte")
    wait_until(lambda: finished(db_of(home)) >= 1, 60, "the reply sent", daemon)
    assert daemon.terminate() == 0
    sent = [m for m in fake_telegram.sent if m.chat_id == CHAT]
    assert [m.method for m in sent] == ["sendMessage", "sendDocument"]
    summary, document = sent
    assert (summary.plain or "").startswith("line 000000 of a very long answer")
    assert "reply.md" in (summary.plain or "") and len(summary.plain or "") < 1000
    assert document.filename == "reply.md" and document.data is not None
    assert document.data.decode().strip() == whole.strip()
    assert not list((home / "workspace").rglob("reply.md"))  # made in memory


# -- state.db locked by another process while a chat works -------------------------------------


def hold_write_lock(db: Path, seconds: float) -> threading.Thread:
    """Another process's write transaction on state.db for `seconds` (past pinclaw's 5 s
    busy timeout, so its writes fail meanwhile)."""
    taken = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, timeout=30, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        taken.set()
        time.sleep(seconds)
        conn.execute("ROLLBACK")
        conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert taken.wait(30)
    return thread


def test_a_turn_whose_commit_met_a_locked_state_db_is_answered_when_the_lock_goes(
    telegram_daemons: Daemons, fake_telegram: FakeTelegram, fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.latency_s = 2.0
    daemon = telegram_daemons.start()
    fake_telegram.inject_message(CHAT, OWNER, "round 1")
    wait_until(lambda: len(fake_llm.requests) == 1, 20, "the turn began", daemon)
    # Longer than two busy timeouts (5 s): the call's usage row gives up first, then the
    # turn's commit meets the lock too.
    holder = hold_write_lock(db_of(home), 14)
    holder.join()
    wait_until(lambda: finished(db_of(home)) >= 1, 60, "the answer", daemon)  # nobody wrote
    assert daemon.terminate() == 0
    assert len(fake_llm.requests) == 1  # committed from memory: the turn did not run again
    assert len([t for t in sent_texts(fake_telegram) if "round 1" in t]) == 1
    assert "the chat's queue failed; trying again" in daemon.log
    assert rows(db_of(home), "SELECT status FROM inbox") == [("done",)]


def test_a_sent_mark_that_met_a_locked_state_db_is_written_later_never_the_part_again(
    telegram_daemons: Daemons, fake_telegram: FakeTelegram, home: Path
) -> None:
    daemon = telegram_daemons.start()
    gate = fake_telegram.gate("sendMessage", 1.5, stage="after", text="round 1")
    fake_telegram.inject_message(CHAT, OWNER, "round 1")
    wait_until(gate.reached.is_set, 20, "the send accepted", daemon)
    holder = hold_write_lock(db_of(home), 9)  # the mark comes while it is held
    holder.join()
    wait_until(lambda: finished(db_of(home)) >= 1, 60, "the mark", daemon)
    time.sleep(2)
    assert daemon.terminate() == 0
    assert len([t for t in sent_texts(fake_telegram) if "round 1" in t]) == 1
    assert "delivery failed; trying again" in daemon.log
    assert rows(db_of(home), "SELECT status FROM outbox_parts") == [("sent",)]


# -- Discord: kill -9 at each point of a send --------------------------------------------------

DISCORD_OWNER = "111"


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    with FakeDiscord(bot_id="1000") as server:
        yield server


@pytest.fixture
def discord_daemons(
    llm_env: dict[str, str], fake_discord: FakeDiscord, tmp_path: Path
) -> Iterator[Daemons]:
    settings = {
        "PINCLAW_CHANNELS__DISCORD__ENABLED": "true",
        "PINCLAW_CHANNELS__DISCORD__BOT_TOKEN": fake_discord.token,
        "PINCLAW_CHANNELS__DISCORD__ALLOWED_USERS": f'["{DISCORD_OWNER}"]',
        "PINCLAW_CHANNELS__DISCORD__API_BASE": fake_discord.api_base,
        "PINCLAW_CHANNELS__DISCORD__GATEWAY_URL": fake_discord.gateway_url,
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "1",
        "PINCLAW_LLM__NUM_RETRIES": "0",
    }
    daemons = Daemons(tmp_path, settings, "discord started")
    yield daemons
    daemons.stop_all()


@ROUNDS_TIMEOUT
def test_kill_9_at_each_point_of_a_discord_send_sends_each_part_once(
    discord_daemons: Daemons, fake_discord: FakeDiscord, fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.responder = parts_reply(1500)
    db, tally = db_of(home), Tally("discord")
    dm = fake_discord.dm_channel_id(DISCORD_OWNER)
    points = [p for p in POINTS if p[0] != "before_call"]  # discord.py waits out a 429 itself
    daemon = discord_daemons.start()
    for n, (point, part) in enumerate(points * PASSES, start=1):
        at = tag(part, n)
        gate = None
        if point != "marked":
            stage: Stage = "before" if point == "never_got" else "after"
            gate = fake_discord.gate(5, stage=stage, text=at)
        fake_discord.inject_dm(DISCORD_OWNER, f"round {n}")
        if gate is None:
            wait_until(reached(db, n), 30, f"round {n}", daemon)
        else:
            wait_until(gate.reached.is_set, 30, f"{point} of {at}", daemon)
            time.sleep(0.3)
        daemon.kill9()
        daemon = discord_daemons.start()
        wait_until(reached(db, n), 60, f"round {n} finished", daemon)
        texts = [m.content for m in fake_discord.messages if m.channel_id == dm]
        copies = copies_in(texts, n)
        tally.add(copies)
        assert {x: len(t) for x, t in copies.items()} == dict.fromkeys("ABC", 1), (n, point)
    assert daemon.terminate() == 0
    tally.report()
    assert tally.duplicates == tally.lost == 0
    resent = sum(1 for point, _ in points * PASSES if point == "accepted")
    assert fake_discord.deduplicated == resent  # Discord dropped each resend by its nonce


# -- the pieces, without a daemon ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["at_most_once", "at_least_once"])
async def test_a_telegram_send_that_got_no_answer_is_never_sent_again_silently(
    mode: str, fake_telegram: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telegram answers after the read timeout (1 s here, 30 s in use): the part may have
    arrived. By default it is stored as possibly lost and not sent again; with
    at_least_once it is sent again, marked."""
    monkeypatch.setattr(telegram_channel, "SEND_READ_TIMEOUT_S", 1.0)
    settings = TelegramSettings(
        bot_token=SecretStr(fake_telegram.token),
        api_base=fake_telegram.api_base,
        file_api_base=fake_telegram.file_api_base,
    )
    channel = telegram_channel.TelegramChannel(settings)
    await channel.bot.initialize()
    store = await open_store(tmp_path / "state.db")
    courier = Courier(channel, store.outbox, backoff_s=0.05, delivery=mode)
    chat = ChatRef("telegram", str(CHAT))
    late = fake_telegram.gate("sendMessage", 3, stage="after")
    parts = channel.parts(Reply("the answer"))
    await store.db.write(
        lambda conn: store.outbox.insert(conn, chat, parts, inbox_id=None, deliver_within_s=60)
    )
    courier.wake(chat.key)
    for _ in range(200):
        if not courier.busy:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(3)  # the late answer came and went
    texts = sent_texts(fake_telegram)
    fates = await store.db.fetchall("SELECT status, sends FROM outbox_parts")
    await store.db.close()
    await channel.bot.shutdown()
    assert late.held == 1
    if mode == "at_most_once":
        assert texts == ["the answer"]
        assert fates == [("unknown", 1)]
    else:
        assert texts == ["the answer", f"{AFTER_NO_ANSWER}\nthe answer"]
        assert fates == [("sent", 2)]


async def test_a_commit_that_fails_rolls_back_and_the_connection_goes_on(tmp_path: Path) -> None:
    schema = """
    CREATE TABLE parent (id INTEGER PRIMARY KEY);
    CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
    """
    db = await StateDB(tmp_path / "state.db").open(schema)
    await db.read(lambda conn: conn.execute("PRAGMA foreign_keys = ON"))
    with pytest.raises(sqlite3.IntegrityError):  # raised by COMMIT, not by the INSERT
        await db.write(lambda conn: conn.execute("INSERT INTO child VALUES (7)"))
    assert not await db.read(lambda conn: conn.in_transaction)
    await db.write(lambda conn: conn.execute("INSERT INTO parent VALUES (1)"))
    assert await db.fetchall("SELECT id FROM parent") == [(1,)]
    assert await db.fetchall("SELECT * FROM child") == []
    await db.close()


async def test_a_keyed_worker_outlives_its_errors_and_misses_no_wake() -> None:
    runs: list[str] = []

    async def work(key: str) -> None:
        runs.append(key)
        if len(runs) <= 2:
            raise sqlite3.OperationalError("database is locked")

    worker = KeyedWorker(work, what="test", backoff_s=0.01)
    worker.wake("a")
    for _ in range(200):
        if not worker.busy:
            break
        await asyncio.sleep(0.01)
    assert runs == ["a", "a", "a"]  # two failures, then done: not stopped
    worker.wake("a")
    await asyncio.sleep(0.05)
    assert runs == ["a"] * 4
    await worker.drain(1)
    worker.wake("a")  # after drain: nothing starts
    await asyncio.sleep(0.05)
    assert runs == ["a"] * 4
