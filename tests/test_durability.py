"""Never lose a message: `agent run` as a subprocess against the fake Telegram and LLM, killed,
stopped, starved of its provider and flooded with 429s. Each test asserts what the users
received and what state.db holds.

Durations are scaled down from the issue's (a 60 s outage runs for a few seconds, with the
retry backoff scaled to match); what is exercised is the same code path.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.llm_server import FakeLLM
from fakes.telegram_models import SentMessage
from fakes.telegram_server import FakeTelegram

OWNER = 42
ASKED = re.compile(r"chat (\d+) message (\d+)")


@pytest.fixture
def run_daemon(telegram_env: dict[str, str], tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.ensure_stopped()


def start(started: list[DaemonProcess], tmp_path: Path, **env: str) -> DaemonProcess:
    settings = {
        "PINCLAW_AGENT__TURN_RETRY_BACKOFF_S": "0.3",
        "PINCLAW_LLM__NUM_RETRIES": "0",
        "PINCLAW_AGENT__OUTAGE_NOTICE_AFTER_S": "0.5",  # failures this long are told
        **env,
    }
    daemon = DaemonProcess(env_of(**settings), tmp_path / "daemon.log").start()
    started.append(daemon)
    return daemon


def texts(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat_id]


def answers(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.sent if m.method == "sendMessage" and ASKED.search(m.plain or "")]


def polling(daemon: DaemonProcess) -> bool:
    """The daemon started its channels (the fake records a long poll only when it ends)."""
    return "telegram started" in daemon.log


def state_db(home: Path) -> Path:
    return home / "state.db"


def test_kill_9_mid_turns_then_a_restart_answers_every_message_once_in_order(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
) -> None:
    chats, per_chat = 20, 3
    fake_llm.latency_s = 1.5
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    for n in range(per_chat):
        for chat in range(chats):
            fake_telegram.inject_message(1000 + chat, OWNER, f"chat {chat} message {n}")
    # 16 turn slots: the first wave is answered, then the kill lands in the second wave's
    # turns (1.5 s each), after the first wave's sends and long before the second's.
    wait_until(lambda: len(answers(fake_telegram)) >= 16, 30, "the first wave", daemon)
    time.sleep(0.5)
    before = len(answers(fake_telegram))
    daemon.kill9()
    assert 16 <= before < chats * per_chat
    assert fake_telegram.pending_updates == []  # every update was acknowledged: stored

    fake_llm.latency_s = 0.2
    again = start(run_daemon, tmp_path)
    wait_until(lambda: len(answers(fake_telegram)) >= chats * per_chat, 60, "all", again)
    time.sleep(1.0)  # nothing more comes
    assert again.terminate() == 0

    for chat in range(chats):
        asked = [ASKED.search(text) for text in texts(fake_telegram, 1000 + chat)]
        numbers = [(int(m.group(1)), int(m.group(2))) for m in asked if m]
        assert numbers == [(chat, n) for n in range(per_chat)], numbers
    db = state_db(home)
    assert rows(db, "SELECT status, COUNT(*) FROM inbox GROUP BY status") == [("done", 60)]
    assert rows(db, "SELECT status, COUNT(*) FROM outbox GROUP BY status") == [("sent", 60)]
    # each part's outcome is kept, with the id Telegram gave it; under load a send can still
    # be under way at the kill: that part is "unknown" (it arrived, as the answers above show,
    # but Telegram cannot say so) and is not sent twice (test_delivery_faults.py kills the
    # daemon in the middle of sends on purpose)
    parts = rows(
        db, "SELECT status, COUNT(*), MIN(CASE WHEN message_id != '' THEN 1 ELSE 0 END)"
        " FROM outbox_parts GROUP BY status"
    )
    unknown = sum(count for status, count, _ in parts if status == "unknown")
    assert [row for row in parts if row[0] != "unknown"] == [("sent", 60 - unknown, 1)]


def test_sigterm_during_a_turn_longer_than_the_grace_keeps_the_message_for_the_next_start(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
) -> None:
    fake_llm.latency_s = 8.0
    daemon = start(run_daemon, tmp_path, PINCLAW_AGENT__SHUTDOWN_GRACE_S="1")
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.inject_message(7, OWNER, "chat 7 message 0")
    wait_until(lambda: len(fake_llm.requests) == 1, 20, "the turn started", daemon)
    began = time.monotonic()
    assert daemon.terminate() == 0
    assert time.monotonic() - began < 6
    assert texts(fake_telegram, 7) == []
    db = state_db(home)
    assert rows(db, "SELECT status FROM inbox") == [("pending",)]
    assert rows(db, "SELECT COUNT(*) FROM messages") == [(0,)]  # no half-stored turn
    doctor = subprocess.run([sys.executable, "-m", "agent", "doctor"], env=env_of(),
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "1 message(s) waiting for an answer, 0 repl(ies) waiting" in doctor.stdout

    fake_llm.latency_s = 0.0
    again = start(run_daemon, tmp_path)
    wait_until(lambda: len(texts(fake_telegram, 7)) == 1, 30, "the answer", again)
    time.sleep(0.5)
    assert again.terminate() == 0
    assert len(texts(fake_telegram, 7)) == 1 and "chat 7 message 0" in texts(fake_telegram, 7)[0]
    assert rows(db, "SELECT status FROM inbox") == [("done",)]


def test_a_provider_outage_gets_one_notice_then_the_answer(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    outage = fake_llm.outage(60.0, mode="500")  # until the notice was seen
    fake_telegram.inject_message(8, OWNER, "chat 8 message 0")
    wait_until(lambda: len(texts(fake_telegram, 8)) >= 1, 20, "the notice", daemon)
    assert "unreachable" in texts(fake_telegram, 8)[0]
    outage.end()
    wait_until(lambda: len(texts(fake_telegram, 8)) >= 2, 30, "the answer", daemon)
    assert daemon.terminate() == 0
    sent = texts(fake_telegram, 8)
    assert len(sent) == 2 and "chat 8 message 0" in sent[1]
    assert outage.received >= 2  # it was tried again during the outage
    attempts = rows(state_db(home), "SELECT status, attempts FROM inbox")
    assert attempts[0][0] == "done" and attempts[0][1] >= 2


@pytest.mark.both_stores  # what the store keeps: also on PostgreSQL
def test_a_hanging_provider_holds_no_slot_for_long_and_shows_in_status(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    daemon = start(
        run_daemon,
        tmp_path,
        PINCLAW_LLM__TIMEOUT_S="1",
        PINCLAW_AGENT__MAX_CONCURRENT_TURNS="2",
    )
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    outage = fake_llm.outage(30.0, mode="hang")
    for chat in range(4):  # twice as many chats as slots
        fake_telegram.inject_message(20 + chat, OWNER, f"chat {20 + chat} message 0")
    every_chat_told = lambda: all(texts(fake_telegram, 20 + c) for c in range(4))  # noqa: E731
    wait_until(every_chat_told, 20, "a notice in every chat", daemon)
    fake_telegram.inject_message(20, OWNER, "/status")
    wait_until(lambda: len(texts(fake_telegram, 20)) >= 2, 10, "the status", daemon)
    assert "unreachable" in texts(fake_telegram, 20)[1]
    assert "waiting to be answered: 1" in texts(fake_telegram, 20)[1]
    outage.end()
    for chat in range(4):
        wait_until(lambda c=chat: any(  # type: ignore[misc]
            f"chat {20 + c} message 0" in t for t in texts(fake_telegram, 20 + c)
        ), 30, f"the answer in chat {chat}", daemon)  # fmt: skip
    assert daemon.terminate() == 0
    for chat in range(4):
        notices = [t for t in texts(fake_telegram, 20 + chat) if "unreachable right now" in t]
        assert len(notices) == 1


def test_a_hanging_provider_is_heard_after_the_first_call_not_at_the_deadline(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    """The first call hangs past its 1 s limit: the person hears at once, while the same
    turn keeps trying (its deadline is 120 s away), and hears once."""
    daemon = start(
        run_daemon,
        tmp_path,
        PINCLAW_LLM__TIMEOUT_S="1",
        PINCLAW_LLM__FIRST_TOKEN_TIMEOUT_S="1",
        PINCLAW_LLM__NUM_RETRIES="10",
        PINCLAW_LLM__RETRY_BACKOFF_S="0.2",
        PINCLAW_AGENT__TURN_DEADLINE_S="120",
    )
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    outage = fake_llm.outage(60.0, mode="hang")
    fake_telegram.inject_message(9, OWNER, "chat 9 message 0")
    wait_until(lambda: texts(fake_telegram, 9), 20, "the notice", daemon)
    assert "unreachable right now" in texts(fake_telegram, 9)[0]
    assert outage.received <= 3  # told after the first hung call, not after the turn
    outage.end()
    wait_until(lambda: len(texts(fake_telegram, 9)) >= 2, 30, "the answer", daemon)
    assert daemon.terminate() == 0
    sent = texts(fake_telegram, 9)
    assert len(sent) == 2 and "chat 9 message 0" in sent[1]


@pytest.mark.both_stores  # what the store keeps: also on PostgreSQL
def test_a_429_storm_delays_replies_but_loses_none_and_keeps_each_chats_order(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    home: Path,
    tmp_path: Path,
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    storm = fake_telegram.fail_for("sendMessage", 4.0, status=429, retry_after=1)
    for n in range(3):
        for chat in range(4):
            fake_telegram.inject_message(30 + chat, OWNER, f"chat {chat} message {n}")
    wait_until(lambda: len(answers(fake_telegram)) >= 12, 40, "all replies", daemon)
    assert daemon.terminate() == 0
    assert storm.rejected >= 4
    for chat in range(4):
        asked = [ASKED.search(t) for t in texts(fake_telegram, 30 + chat)]
        assert [int(m.group(2)) for m in asked if m] == [0, 1, 2]
    assert rows(state_db(home), "SELECT status, COUNT(*) FROM outbox GROUP BY status") == [
        ("sent", 12)
    ]


def test_an_update_the_library_cannot_read_is_skipped_and_the_rest_flow(
    run_daemon: list[DaemonProcess], fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.inject_message(40, OWNER, "chat 40 message 0")
    fake_telegram.inject_unparseable_message(40, OWNER)
    fake_telegram.inject_message(40, OWNER, "chat 40 message 1")
    wait_until(lambda: len(texts(fake_telegram, 40)) >= 2, 20, "both answers", daemon)
    polls = len(fake_telegram.poll_offsets)
    time.sleep(2.0)
    assert len(fake_telegram.poll_offsets) - polls < 10  # long polls, not a tight loop
    assert daemon.terminate() == 0
    assert daemon.log.count("could not be read and is skipped") == 1


def test_one_huge_message_is_cut_and_the_chat_goes_on(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.inject_message(50, OWNER, "chat 50 message 0 " + "x" * 1_000_000)
    wait_until(lambda: len(fake_llm.requests) >= 1, 30, "the turn", daemon)
    fake_telegram.inject_message(50, OWNER, "chat 50 message 1")
    wait_until(lambda: any("message 1" in t for t in texts(fake_telegram, 50)), 30, "next", daemon)
    assert daemon.terminate() == 0
    sizes = [sum(len(str(m.get("content"))) for m in r["messages"]) for r in fake_llm.requests]
    assert max(sizes) < 60_000  # 20,000 characters, its note, the prompt, some history
    assert "The message was cut here" in str(fake_llm.requests[0]["messages"])


def test_a_lone_surrogate_is_repaired_not_fatal(
    run_daemon: list[DaemonProcess], fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.inject_message(60, OWNER, "chat 60 message 0 \ud800 end")
    wait_until(lambda: len(texts(fake_telegram, 60)) >= 1, 20, "the answer", daemon)
    assert daemon.terminate() == 0
    assert "\ufffd end" in texts(fake_telegram, 60)[0]


def test_a_slow_download_holds_up_only_its_own_chat(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.slow_downloads(40_000)  # a 200 kB photo takes 5 s
    fake_telegram.inject_photo(70, OWNER, b"\xff\xd8" + bytes(200_000), caption="chat 70 message 0")
    wait_until(lambda: bool(fake_telegram.downloads), 10, "the download began", daemon)
    fake_telegram.inject_message(71, OWNER, "chat 71 message 0")
    wait_until(lambda: bool(texts(fake_telegram, 71)), 10, "the other chat's answer", daemon)
    assert not fake_telegram.downloads[0].done  # answered while the photo still trickles
    wait_until(lambda: bool(texts(fake_telegram, 70)), 30, "the photo's answer", daemon)
    assert daemon.terminate() == 0
    asked = str(fake_llm.requests[-1]["messages"])
    assert "[IMAGE:inbox/telegram-70/" in asked


def test_a_file_over_the_limit_is_refused_with_a_reply_and_never_downloaded(
    run_daemon: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
) -> None:
    daemon = start(run_daemon, tmp_path)
    wait_until(lambda: polling(daemon), 30, "polling", daemon)
    fake_telegram.inject_generated_document(80, OWNER, 200 * 1024 * 1024, filename="huge.iso")
    fake_telegram.inject_message(80, OWNER, "chat 80 message 1")
    wait_until(lambda: len(texts(fake_telegram, 80)) >= 2, 20, "both replies", daemon)
    sticker = {"file_id": "s1", "file_unique_id": "u1", "type": "regular", "width": 512,
               "height": 512, "is_animated": False, "is_video": False}  # fmt: skip
    fake_telegram.inject_update({"message": {
        "message_id": 999, "date": 0, "sticker": sticker, "chat": {"id": 80, "type": "private"},
        "from": {"id": OWNER, "is_bot": False, "first_name": "A"}}})  # fmt: skip
    wait_until(lambda: "nothing pinclaw reads" in daemon.log, 10, "the sticker seen", daemon)
    assert daemon.terminate() == 0
    refusal, answer = texts(fake_telegram, 80)
    assert "huge.iso" in refusal and "20 MB" in refusal
    assert "chat 80 message 1" in answer
    assert fake_telegram.downloads == []
    assert len(fake_llm.requests) == 1  # no turn for the refused file, none for the sticker
    assert not list((home / "workspace" / "inbox").rglob("*huge*"))
