"""What a person meets in the first hour, as they meet it: each mistake they can make runs the
real `agent` command, and the whole of stderr is asserted — one line starting `error:` that
names the thing and what to do, exit status 2 for a setup problem (1 for a turn that failed),
no traceback (that comes only with -v).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, agent, without_pyserial, without_system_programs
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, error

from agent.config import LLMSettings
from agent.model.client import LLMClient
from agent.model.openai_wire_call import NO_KEY
from agent.model.responses import LLMError

CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
FIX_HOME = "set PINCLAW_HOME to a folder you can write"


def one_line(result: subprocess.CompletedProcess[str], code: int, line: str) -> None:
    assert (result.returncode, result.stderr) == (code, line + "\n"), result.stdout


def unreachable(base: str) -> str:
    return (
        f"error: no model answered: openai/test-model could not be reached at {base} "
        "(Connection error.); check that its server runs and llm.api_base is right"
    )


def refused(base: str) -> str:
    return (
        f"error: no model answered: openai/test-model at {base} refused the API key "
        f"({REFUSAL}); check OPENAI_API_KEY (or PINCLAW_LLM__API_KEY)"
    )


REFUSAL = "Incorrect API key provided: sk-test-****0000."


@contextlib.contextmanager
def serving(env: dict[str, str], tmp_path: Path) -> Iterator[None]:
    """`agent run` in the background, so a one-shot's stderr is the client's alone."""
    daemon = DaemonProcess(env, tmp_path / "daemon.log").start()
    try:
        daemon.wait_ready()
        yield
    finally:
        daemon.terminate()


def test_an_unreachable_model_is_one_line_with_its_address_and_its_words_once(
    llm_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**llm_env, "PINCLAW_LLM__API_BASE": CLOSED}  # retried twice, as a person's would be
    with serving(env, tmp_path):
        one_line(agent("run", "-m", "hello?", env=env), 1, unreachable(CLOSED))


def test_a_refused_key_is_asked_once_and_said_in_one_line(
    llm_env: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    with serving(llm_env, tmp_path):
        fake_llm.script(*[error(401, REFUSAL, type="invalid_request_error")] * 3)
        one_line(agent("run", "-m", "hello?", env=llm_env), 1, refused(fake_llm.base_url))
    assert len(fake_llm.requests) == 1  # a key does not mend itself: not tried again


def test_a_cold_one_shot_says_an_unreachable_model_in_one_line(llm_env: dict[str, str]) -> None:
    env = {**llm_env, "PINCLAW_LLM__API_BASE": CLOSED}
    one_line(agent("run", "-m", "hello?", env=env), 1, unreachable(CLOSED))


def test_a_cold_one_shot_says_a_refused_key_in_one_line(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    fake_llm.script(*[error(401, REFUSAL, type="invalid_request_error")] * 3)
    one_line(agent("run", "-m", "hello?", env=llm_env), 1, refused(fake_llm.base_url))


async def test_a_key_litellm_finds_missing_itself_is_not_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenAI's client refuses to send without a key; LiteLLM raises that as a 500, which
    used to be retried with backoff although it can never succeed."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    client = LLMClient(LLMSettings(model="openai/gpt-4o-mini", num_retries=2), sleep=sleep)
    with pytest.raises(LLMError) as caught:
        await client.complete([{"role": "user", "content": "hello?"}])
    assert waits == []
    assert str(caught.value).startswith(
        "no model answered: openai/gpt-4o-mini at https://api.openai.com/v1 needs an API key "
        "(Missing credentials."
    )
    assert str(caught.value).endswith("; check OPENAI_API_KEY (or PINCLAW_LLM__API_KEY)")


@pytest.mark.parametrize("command", [("run", "-m", "hello?"), ("run",)])
def test_a_missing_key_stops_before_the_first_call(
    command: tuple[str, ...], llm_env: dict[str, str], home: Path
) -> None:
    env = {**llm_env, "PINCLAW_LLM__MODEL": "anthropic/claude-x", "ANTHROPIC_API_KEY": ""}
    one_line(
        agent(*command, env=env),
        2,
        "error: anthropic/claude-x: no API key: set ANTHROPIC_API_KEY (or "
        f"PINCLAW_LLM__API_KEY) in your shell or in {home / 'agent.env'}",
    )


def test_a_local_openai_compatible_server_needs_no_key(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    """Called directly (the OpenAI SDK), a server of one's own gets a stand-in key; through
    LiteLLM (llm.client = "litellm") the missing key is said before the first call."""
    fake_llm.script("hello back")
    env = {**llm_env, "OPENAI_API_KEY": ""}
    answered = agent("run", "-m", "hello?", env=env)
    assert (answered.returncode, answered.stdout) == (0, "hello back\n"), answered.stderr
    [sent] = fake_llm.request_headers
    assert sent["authorization"] == f"Bearer {NO_KEY}"
    one_line(
        agent("run", "-m", "hello?", env={**env, "PINCLAW_LLM__CLIENT": "litellm"}),
        2,
        f"error: openai/test-model: the OpenAI client sends a key even to {fake_llm.base_url}: "
        "set PINCLAW_LLM__API_KEY to its key, or to any text (e.g. dummy) if that server "
        "checks none",
    )
    assert len(fake_llm.requests) == 1


def test_a_model_name_without_a_provider_is_refused_at_start(llm_env: dict[str, str]) -> None:
    """(At a server of one's own a bare name is the server's name for its model.)"""
    hosted = {**llm_env, "PINCLAW_LLM__API_BASE": ""}
    one_line(
        agent("run", "-m", "hello?", env={**hosted, "PINCLAW_LLM__MODEL": "gpt4o"}),
        2,
        "error: llm.model 'gpt4o' names no provider LiteLLM knows: write it as provider/model, "
        "e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 or ollama_chat/llama3.1",
    )


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """An empty folder this user cannot write in, and why pinclaw should say it cannot: a
    read-only mount as root (who may write anywhere else), mode 0500 otherwise."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir(mode=0o500)
        yield folder, f"permission denied; make it yours and writable, or {FIX_HOME}"
        folder.chmod(0o700)
        return
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o700)
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m,ro,mode=0700", "tmpfs", str(folder)]
    if subprocess.run(mount, capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder, f"the file system is read-only; {FIX_HOME}"
    finally:
        subprocess.run(["umount", "-l", str(folder)])


WRITES_FIRST = {  # what each command writes first in an empty home
    ("run", "-m", "hello?"): "workspace",
    ("run",): "workspace",
    ("init",): "config.toml",
    ("memory", "list"): "state.db",
}


@pytest.mark.parametrize("command", WRITES_FIRST)
def test_a_home_that_cannot_be_written_is_one_line_from_each_command(
    command: tuple[str, ...], llm_env: dict[str, str], unwritable: tuple[Path, str]
) -> None:
    home, why = unwritable
    result = agent(*command, env={**llm_env, "PINCLAW_HOME": str(home)})
    one_line(result, 2, f"error: cannot write {home / WRITES_FIRST[command]}: {why}")


def test_doctor_says_the_home_cannot_be_written_and_exits_2(
    llm_env: dict[str, str], unwritable: tuple[Path, str]
) -> None:
    home, why = unwritable
    result = agent("doctor", env={**llm_env, "PINCLAW_HOME": str(home)})
    assert (result.returncode, result.stderr) == (2, "")
    assert f"FAIL home: cannot write {home / 'state.db'}: {why}\n" in result.stdout


def test_a_home_that_cannot_be_made_is_one_line(
    llm_env: dict[str, str], unwritable: tuple[Path, str]
) -> None:
    folder, why = unwritable
    home = folder / "nested" / "home"
    result = agent("doctor", env={**llm_env, "PINCLAW_HOME": str(home)})
    one_line(result, 2, f"error: cannot write {folder / 'nested'}: {why}")


def test_the_traceback_comes_only_with_v(
    llm_env: dict[str, str], unwritable: tuple[Path, str]
) -> None:
    home, why = unwritable
    result = agent("-v", "memory", "list", env={**llm_env, "PINCLAW_HOME": str(home)})
    assert result.returncode == 2
    assert result.stderr.startswith("Traceback (most recent call last):\n"), result.stderr
    assert result.stderr.endswith(f"\nerror: cannot write {home / 'state.db'}: {why}\n")


def test_a_state_db_that_cannot_be_opened_stops_memory_with_its_line(
    llm_env: dict[str, str], home: Path
) -> None:
    home.mkdir(mode=0o700)
    db = home / "state.db"
    db.mkdir(mode=0o700)
    one_line(
        agent("memory", "search", "anything", env=llm_env),
        2,
        f"state.db error: {db}: it is a folder, not a database file; move it aside (mv {db} "
        f"{db}.aside) and start again, or restore a backup from {home / 'backups'}",
    )


def test_a_daemon_already_serving_the_home_is_one_line(llm_env: dict[str, str], home: Path) -> None:
    home.mkdir(mode=0o700)
    fd = os.open(home / "agent.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as lock:  # as a running daemon holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()} token\n")
        lock.flush()
        result = agent("run", env=llm_env)
    pid = os.getpid()
    one_line(
        result,
        2,
        f"error: another pinclaw daemon runs for this home (pid {pid}); stop it first "
        f"(`kill {pid}`) or set PINCLAW_HOME to another folder",
    )


def test_a_sandbox_required_but_missing_is_one_line(
    llm_env: dict[str, str], tmp_path: Path
) -> None:
    no_bwrap = {"PYTHONPATH": without_system_programs(tmp_path)}
    env = {**llm_env, "PINCLAW_SECURITY__SANDBOX": "bubblewrap", **no_bwrap}
    one_line(
        agent("run", "-m", "hello?", env=env),
        2,
        'error: sandbox is "bubblewrap" but no bwrap in the system folders (install bubblewrap), '
        'or set sandbox = "auto" under [security] in config.toml',
    )


def test_a_missing_package_of_a_feature_is_one_line(
    llm_env: dict[str, str], emulator: FirmataBoard, tmp_path: Path
) -> None:
    """pyserial as if it were not installed: its import fails when the board connects."""
    env = {
        **llm_env,
        "PYTHONPATH": without_pyserial(tmp_path),
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(emulator.path),
        "PINCLAW_HARDWARE__CONNECT_ON_START": "true",
    }
    one_line(
        agent("-q", "run", env=env),
        2,
        "error: the Arduino board needs the Python package pyserial, which is not installed "
        f"here; install it: {sys.executable} -m pip install pyserial",
    )


def test_a_board_port_held_by_another_program_is_named_with_the_holder(
    llm_env: dict[str, str], emulator: FirmataBoard
) -> None:
    env = {
        **llm_env,
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(emulator.path),
    }
    with open(emulator.path, "rb") as port:  # as a serial monitor holds it
        fcntl.flock(port, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = agent("doctor", env=env)
    assert result.stderr == ""
    [line] = [line for line in result.stdout.splitlines() if "board:" in line]
    assert line == (
        f"FAIL board: The board's port {emulator.path} is in use by another program (pid "
        f"{os.getpid()} {Path('/proc/self/comm').read_text().strip()}); close it (the Arduino "
        "IDE's serial monitor, another `agent run`) and try again."
    )


def test_memories_exported_to_a_folder_that_is_not_there_is_one_line(
    llm_env: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "no-such-folder" / "memories.jsonl"
    one_line(
        agent("memory", "export", "-o", str(target), env=llm_env),
        1,
        f"error: cannot write {target}: no such file or directory; nothing exported",
    )


@pytest.mark.parametrize(
    "command", [("run", "-m", "hello", "--no-daemon"), ("init", "--defaults", "--skip-check")]
)
def test_a_workspace_path_that_names_a_file_is_one_line(
    llm_env: dict[str, str], tmp_path: Path, command: tuple[str, ...]
) -> None:
    """[workspace] path pointing at a file (notes.md instead of the folder holding it):
    mkdir(exist_ok=True) raised FileExistsError (EEXIST), which user_errors.py does not
    count among the errors a person can fix; `agent run` and `agent init` ended in a
    traceback with exit status 1."""
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\npath = "{notes}"\n')
    result = agent("--config", str(config), *command)
    why = "a file stands where a folder should be; move it aside, or choose another"
    one_line(result, 2, f"error: cannot write {notes}: {why}")
    assert notes.read_text() == "my notes\n"
