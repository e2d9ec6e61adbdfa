"""A full disk is a state, not a storm: `agent run` as a real process with its home on a
2 MiB tmpfs, filled while messages arrive, then freed. While full, nothing is taken (Telegram
keeps the updates: no offset moves past them), the log says so once (and once a minute
after), the owner is told in their private chat by a message sent directly, and `agent
doctor` shows it; when space is back, every message is answered once, by itself.
Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from daemon_process import REPO, DaemonProcess, env_of, rows, wait_until
from fakes.llm_server import FakeLLM
from fakes.telegram_server import FakeTelegram, SentMessage

from agent.durable.file.storage_health import BACK_TEXT

OWNER = 42


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs for the home."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)])
    if made.returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)])


def answer_to(said: str) -> Callable[[SentMessage], bool]:
    """The fake model's echo of a message (its envelope, then the text)."""
    return lambda m: (m.plain or "").startswith("echo: ") and (m.plain or "").endswith(f"\n{said}")


def fill(disk: Path) -> Path:
    """Write a file until the disk has no room left; the file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_stops_intake_tells_the_owner_once_and_everything_resumes(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    small_disk: Path,
    tmp_path: Path,
) -> None:
    home = small_disk / "home"
    env = env_of(
        **{**telegram_env, "PINCLAW_HOME": str(home)},
        PINCLAW_PEOPLE=json.dumps({"me": {"telegram": str(OWNER), "owner": True}}),
        PINCLAW_STATE__BACKUPS_KEPT="0",
    )
    daemon = DaemonProcess(env, tmp_path / "daemon.log").start()
    try:
        daemon.wait_ready()
        fake_telegram.inject_message(OWNER, OWNER, "before")
        fake_telegram.wait_for(answer_to("before"), timeout=15)
        settled = "SELECT COUNT(*) FROM outbox WHERE status = 'pending'"  # marked sent: idle
        wait_until(lambda: rows(home / "state.db", settled) == [(0,)], 10, "idle", daemon)
        filler = fill(small_disk)
        for text in ("one", "two", "three"):
            fake_telegram.inject_message(OWNER, OWNER, text)
        told = fake_telegram.wait_for(
            lambda m: "disk that holds my state.db is full" in (m.plain or ""), timeout=15
        )
        assert told[0].chat_id == OWNER
        wait_until(lambda: len(fake_telegram.pending_updates) == 3, 10, "updates kept", daemon)
        doctor = subprocess.run(
            [sys.executable, "-m", "agent", "doctor"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "FAIL disk: " in doctor.stdout and "pinclaw takes no messages" in doctor.stdout
        assert doctor.returncode == 1
        assert len(fake_telegram.pending_updates) == 3  # still not acknowledged
        assert len(fake_llm.requests) == 1  # nothing taken, nothing answered

        filler.unlink()
        for text in ("one", "two", "three"):
            fake_telegram.wait_for(answer_to(text), timeout=20)
        fake_telegram.wait_for(lambda m: m.plain == BACK_TEXT, timeout=10)
        assert fake_telegram.pending_updates == []
        assert daemon.terminate() == 0
    finally:
        daemon.ensure_stopped()
    answers = [
        (m.plain or "").rsplit("\n", 1)[-1]
        for m in fake_telegram.sent
        if (m.plain or "").startswith("echo: ")
    ]
    assert sorted(answers) == sorted(["before", "one", "two", "three"])  # each once
    log = daemon.log
    assert log.count("the disk is full") == 1  # said once, not per message or per poll
    assert "Traceback" not in log
    assert "space is back" in log
