"""The warm start (agent/warm): a cold one-shot leaves a process that has done the imports,
and the next one-shots — other homes, other settings — run in forks of it, with their own
environment, folder, standard streams and exit status. As a person runs `agent run -m`,
against the fake provider, each test with a warm-start folder of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_world import SANDBOXES
from daemon_process import wait_until
from fakes.llm_server import FakeLLM, text
from test_local_daemon import REPO
from test_local_daemon import agent as one_shot

from agent.warm.place import paths
from agent.warm.server import changed
from agent.warm.spawn import running
from tools.base import ToolCallContext
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool

# A one-shot sent to the warm start's socket by hand: with a token given, else a guess, and
# without the import-time variables a one-shot sends.
GUESS = """
import socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.connect(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else "guess"
    request = ('{"token": "%s", "argv": ["run", "-m", "hi"], "env": {}, "cwd": "/"}\\n' % token)
    socket.send_fds(sock, [request.encode()], [0, 1, 2])
    print(sock.recv(4096).decode())
"""


class Warm:
    """A warm-start folder of this test's, and the shell environment that uses it."""

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        self.tmp, self.llm = tmp, llm
        runtime = tmp / "run"
        runtime.mkdir(mode=0o700)
        base = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
        self.env = {
            **base,
            "XDG_RUNTIME_DIR": str(runtime),
            "PINCLAW_LLM__MODEL": "openai/test-model",
            "PINCLAW_LLM__API_BASE": llm.base_url,
            "OPENAI_API_KEY": "sk-test-key-not-real-0000",
            "PINCLAW_AGENT__WARM_START_S": "60",
        }
        found = paths(self.env)
        assert found is not None
        self.socket, self.token, self.lock = found

    def home(self, name: str, **settings: str) -> dict[str, str]:
        """The environment of a fresh home NAME, with PINCLAW_ `settings` of its own."""
        return {**self.env, "PINCLAW_HOME": str(self.tmp / name), **settings}

    def started(self) -> None:
        wait_until(lambda: running(self.lock) and os.path.exists(self.socket), 60, "the warm start")
        wait_until(lambda: self.pid() is not None, 10, "the warm start's pid in its lock")

    def pid(self) -> int | None:
        """The live warm start's pid in the lock: empty, or the one before, for a moment as one
        starts."""
        written = Path(self.lock).read_text().split()[:1]
        return int(written[0]) if written and alive(int(written[0])) else None

    def stop(self) -> None:
        """Every warm start of this test's folder ended."""
        for lock in Path(self.lock).parent.glob("*.lock"):
            pid = lock.read_text().split()[:1]  # empty for a moment as one starts
            if running(str(lock)) and pid:
                os.kill(int(pid[0]), signal.SIGTERM)


def alive(pid: int) -> bool:
    """A process that has not ended (a zombie a subreaper has yet to reap has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture
def warm(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[Warm]:
    state = Warm(tmp_path, fake_llm)
    yield state
    state.stop()


def test_a_one_shot_leaves_a_warm_start_that_answers_the_next_ones(warm: Warm) -> None:
    first, loaded = one_shot(warm.home("a"), "run", "-m", "first words", "--no-daemon")
    assert first.returncode == 0 and first.stdout.endswith("first words\n"), first.stderr
    assert "pydantic" in loaded  # cold: this process imported what a one-shot needs
    warm.started()
    # Another home with other settings: answered by a fork that became that one-shot.
    other = warm.home("b", PINCLAW_LLM__MODEL="openai/other-model")
    second, loaded = one_shot(other, "run", "-m", "second words", "--no-daemon")
    assert second.returncode == 0 and second.stdout.endswith("second words\n"), second.stderr
    assert not {"pydantic", "click", "httpx", "asyncio"} & set(loaded)
    assert warm.llm.requests[-1]["model"] == "other-model"
    assert (warm.tmp / "b" / "workspace" / "AGENTS.md").is_file()
    # Its standard input (-m -), and a config error's line and exit status, as cold.
    piped = subprocess.run(
        [sys.executable, "-m", "agent", "run", "-m", "-"], input="typed words", env=other,
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert piped.returncode == 0 and piped.stdout.endswith("typed words\n"), piped.stderr
    wrong = warm.home("c", PINCLAW_LLM__TEMPERATURE="hot")
    refused, loaded = one_shot(wrong, "run", "-m", "third words")
    assert refused.returncode == 2 and "pydantic" not in loaded
    assert "llm.temperature" in refused.stderr and refused.stdout == ""
    assert len(warm.llm.requests) == 3


def test_it_takes_only_its_own_one_shots(warm: Warm) -> None:
    one_shot(warm.home("a"), "run", "-m", "first words")
    warm.started()
    # A connection without the token it wrote: refused, nothing run.
    guess = subprocess.run([sys.executable, "-c", GUESS, warm.socket], capture_output=True)
    assert b"no token" in guess.stdout, guess.stderr
    # Started with other import-time variables: its own warm start, so this one runs cold.
    other = warm.home("b", LC_PAPER="C")
    cold, loaded = one_shot(other, "run", "-m", "second words")
    assert cold.returncode == 0 and "pydantic" in loaded
    said = [r["messages"][-1]["content"] for r in warm.llm.requests]
    assert len(said) == 2 and said[0].endswith("first words") and said[1].endswith("second words")
    # The first warm start still serves its own.
    again, loaded = one_shot(warm.home("c"), "run", "-m", "third words")
    assert again.returncode == 0 and "pydantic" not in loaded


def test_ctrl_c_reaches_the_fork(warm: Warm) -> None:
    one_shot(warm.home("a"), "run", "-m", "first words")
    warm.started()
    warm.llm.script(text("too late", delay_s=30))
    client = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "-m", "take your time"], env=warm.home("b"),
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: len(warm.llm.requests) == 2, 30, "the turn began")
        started = time.monotonic()
        client.send_signal(signal.SIGINT)
        out, _ = client.communicate(timeout=20)
    finally:
        client.kill()
    assert time.monotonic() - started < 20 and "too late" not in out
    assert client.returncode != 0


def test_it_ends_when_unused_and_none_starts_when_off(warm: Warm) -> None:
    brief = warm.home("a", PINCLAW_AGENT__WARM_START_S="1")
    one_shot(brief, "run", "-m", "first words")
    warm.started()
    wait_until(lambda: not running(warm.lock), 30, "the warm start's end")
    assert not os.path.exists(warm.socket) and not os.path.exists(warm.token)
    off = warm.home("b", PINCLAW_AGENT__WARM_START_S="0")
    result, loaded = one_shot(off, "run", "-m", "second words")
    assert result.returncode == 0 and "pydantic" in loaded
    time.sleep(2)
    assert not running(warm.lock) and not os.path.exists(warm.socket)


# What a steered model's command would try: read the warm start's token, hand it a one-shot
# of its own making (full autonomy, a message of its own), and print what comes back.
HIJACK = """
import json, socket
try:
    token = open({token!r}).read().strip()
except OSError as exc:
    token = "unread: " + exc.strerror
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.connect({socket!r})
    env = {{"PINCLAW_SECURITY__AUTONOMY": "full", "PINCLAW_HOME": {home!r}}}
    request = {{"token": token, "argv": ["run", "-m", "hijacked-canary"], "env": env, "cwd": "/"}}
    socket.send_fds(sock, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
    print("answered:", sock.recv(4096).decode())
"""


@pytest.mark.skipif(not SANDBOXES, reason="no OS sandbox here")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_sandboxed_command_cannot_use_the_warm_start(warm: Warm, sandbox: str) -> None:
    one_shot(warm.home("a"), "run", "-m", "first words")
    warm.started()
    workspace = warm.tmp / "a" / "workspace"
    policy = SecurityPolicy.from_settings(SecuritySettings(autonomy="full"), workspace)
    tool = ShellTool(policy, ShellSettings(timeout_s=20), choose_sandbox(sandbox))  # type: ignore[arg-type]
    attack = HIJACK.format(token=warm.token, socket=warm.socket, home=str(warm.tmp / "x"))
    (workspace / "hijack.py").write_text(attack)
    result = await tool.run({"command": "python3 hijack.py"}, ToolCallContext(workspace))
    # bubblewrap: neither file is there; Landlock: the socket is (a path), the token not.
    said = result.output
    assert "No such file" in said or '"error": "no token of this warm start"' in said, said
    assert all("hijacked-canary" not in str(r) for r in warm.llm.requests)
    assert not (warm.tmp / "x").exists()


def test_what_it_declines_runs_cold_and_a_killed_one_is_replaced(
    warm: Warm, tmp_path: Path
) -> None:
    """A request with other import-time variables is declined, nothing run; so is any once
    a file of pinclaw it loaded has changed (an upgrade: `_changed`, tried on a file of this
    test's own, as a checkout's are shared by the tests running at once). A warm start
    killed -9 (its socket left behind): the next one-shot runs cold and leaves a new one."""
    loaded_file = tmp_path / "module.py"
    loaded_file.write_text("")
    stamps = {str(loaded_file): loaded_file.stat().st_mtime}
    assert not changed(stamps)
    os.utime(loaded_file, (0, loaded_file.stat().st_mtime + 60))
    assert changed(stamps) and changed({str(tmp_path / "gone.py"): 0.0})
    one_shot(warm.home("a"), "run", "-m", "first words")
    warm.started()
    token = Path(warm.token).read_text().strip()
    other = subprocess.run([sys.executable, "-c", GUESS, warm.socket, token], capture_output=True)
    assert b'"declined"' in other.stdout, other.stderr
    assert len(warm.llm.requests) == 1
    one_shot(warm.home("c"), "run", "-m", "third words")  # cold: leaves one
    warm.started()
    pid = warm.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not running(warm.lock), 30, "the killed warm start gone")
    assert os.path.exists(warm.socket)  # left behind: nobody listens on it
    again, loaded = one_shot(warm.home("d"), "run", "-m", "fourth words")
    assert again.returncode == 0 and again.stdout.endswith("fourth words\n")
    assert "pydantic" in loaded
    warm.started()
    assert warm.pid() not in (None, pid)
