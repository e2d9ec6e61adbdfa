"""Attacks on the pinclaw home from outside the agent: another local user reading the chats,
memories and keys in it, and the key a provider echoes back in an error. Each case asserts
the world: the modes on disk, what another uid can read, what doctor printed.

(A sibling of tests/test_attacks.py, which holds the attacks through the tools.)
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import daemon_process
import pytest
from fakes.llm_server import FakeLLM, error, text

NOBODY = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")
TIGHTENED = "pinclaw: tightened the modes of"


def agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real `agent` command under the usual umask (022), so modes come from the code."""
    return daemon_process.agent(*args, env=env, umask=0o022)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def loosen(home: Path) -> None:
    """The home as an older pinclaw (or a 022 umask) left it: open to every local user."""
    for path in (home, home / "workspace", home / "logs"):
        path.mkdir(exist_ok=True)
        path.chmod(0o755)
    for name in ("config.toml", "state.db", "agent.env", "logs/agent-1.log"):
        (home / name).touch()
        (home / name).chmod(0o644)


def test_init_makes_the_home_the_owners_alone(home: Path) -> None:
    result = agent("init", env={})
    assert result.returncode == 0, result.stderr
    assert TIGHTENED not in result.stderr  # a new home has nothing to fix
    assert mode(home) == 0o700
    assert mode(home / "config.toml") == 0o600
    assert mode(home / "state.db") == 0o600
    assert mode(home / "workspace") == 0o700
    # The workspace's own files keep the modes programs give them.
    assert mode(home / "workspace" / "SOUL.md") == 0o644


def test_the_first_one_shot_makes_the_home_the_owners_alone(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(text("Hello."))
    result = agent("run", "-m", "hi", env=llm_env)
    assert result.returncode == 0, result.stderr
    assert TIGHTENED not in result.stderr
    assert mode(home) == 0o700 and mode(home / "workspace") == 0o700
    assert mode(home / "state.db") == 0o600
    for name in ("state.db-wal", "state.db-shm"):  # gone again when the last connection closed
        assert not (home / name).exists() or mode(home / name) == 0o600


async def test_state_db_its_wal_and_shm_are_0600_from_their_first_moment(tmp_path: Path) -> None:
    from agent.durable.file.state_db import StateDB

    previous = os.umask(0o022)
    try:
        db = await StateDB(tmp_path / "home" / "state.db").open("CREATE TABLE t (x);")
        await db.write(lambda conn: conn.execute("INSERT INTO t VALUES (1)"))
        modes = {p.name: mode(p) for p in (tmp_path / "home").iterdir()}
        await db.close()
    finally:
        os.umask(previous)
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}
    assert mode(tmp_path / "home") == 0o700


@pytest.mark.parametrize("command", [("init",), ("doctor",), ("run", "-m", "hi")])
def test_an_older_home_is_tightened_at_start_and_said_once(
    command: tuple[str, ...], llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    agent("init", env=llm_env)
    loosen(home)
    fake_llm.script(text("Hello."), text("Hello."))
    first = agent(*command, env=llm_env)
    said = [line for line in first.stderr.splitlines() if line.startswith(TIGHTENED)]
    assert said == [
        f"{TIGHTENED} {home} (was 0755): logs (was 0755), config.toml (was 0644), state.db "
        "(was 0644), agent.env (was 0644), logs/agent-1.log (was 0644), workspace (was 0755); "
        "now only its owner can read them"
    ], first.stderr
    assert mode(home) == mode(home / "workspace") == mode(home / "logs") == 0o700
    for name in ("config.toml", "state.db", "agent.env", "logs/agent-1.log"):
        assert mode(home / name) == 0o600, name
    again = agent(*command, env=llm_env)
    assert TIGHTENED not in again.stderr  # said once: nothing is left to fix


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can walk into (pytest's own tmp is 0700, which would hide the
    home whatever its modes): only the home's own modes stand between it and that user."""
    base = Path(tempfile.mkdtemp(prefix="pinclaw-home-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOBODY, *argv], capture_output=True, text=True, errors="replace", timeout=30
    )


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user",
)
def test_another_user_cannot_read_the_home(
    llm_env: dict[str, str], fake_llm: FakeLLM, shared_tmp: Path
) -> None:
    home = shared_tmp / "home"
    env = {**llm_env, "PINCLAW_HOME": str(home)}
    fake_llm.script(text("Noted: the door code is 4711."), text("Hello."))
    assert agent("run", "-m", "remember: door code 4711", env=env).returncode == 0
    loosen(home)  # as an older pinclaw left it: the attack works ...
    assert "door code 4711" in as_nobody("cat", str(home / "state.db")).stdout
    assert as_nobody("ls", str(home)).returncode == 0

    assert agent("run", "-m", "hi", env=env).returncode == 0  # ... until pinclaw starts
    for argv in (("cat", f"{home}/state.db"), ("ls", str(home)), ("cat", f"{home}/config.toml")):
        seen = as_nobody(*argv)
        assert seen.returncode != 0 and seen.stdout == "", argv
        assert "Permission denied" in seen.stderr, seen.stderr
    control = shared_tmp / "control.txt"  # the same user reads a plain file next to it
    control.write_text("readable")
    control.chmod(0o644)
    assert as_nobody("cat", str(control)).stdout == "readable"


def test_doctor_never_prints_the_key_a_provider_echoes(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    key = "pc-live-Hq7Zr2Wx9Lm4Tb8Kd"  # no well-known key format: the configured value counts
    fake_llm.script(error(401, f"Incorrect API key provided: {key}. Find yours at example."))
    env = {**llm_env, "PINCLAW_LLM__API_KEY": key, "PINCLAW_LLM__NUM_RETRIES": "0"}
    result = agent("-vv", "doctor", "--check-model", env=env)
    assert result.returncode == 1
    assert "FAIL model call" in result.stdout and "[REDACTED]" in result.stdout, result.stdout
    assert key not in result.stdout + result.stderr
    assert key[:12] not in result.stdout + result.stderr  # nor a piece of it


def test_scrubbed_lines_hold_an_unfinished_line_until_it_ends() -> None:
    import io

    from agent.cli.doctor.checks import ScrubbedLines
    from agent.security import Scrubber

    out = io.StringIO()
    lines = ScrubbedLines(out, Scrubber(["secret-value-123"]))
    lines.write("FAIL model call: secret-")  # the key arrives in two writes
    assert out.getvalue() == ""
    lines.write("value-123 was refused\nlast")
    lines.finish()
    assert out.getvalue() == "FAIL model call: [REDACTED] was refused\nlast"
