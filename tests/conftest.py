"""Shared fixtures: an isolated home folder, a workspace, the fake LLM, settings pointed at
it, Telegram and Discord on their fakes, the daemon in this event loop, the simulated board
running the real StandardFirmata; and `eventually`, to wait for a condition instead of a
fixed time."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest
from fakes.discord_server import FakeDiscord
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM
from fakes.model_double import ScriptedModel
from fakes.telegram_server import FakeTelegram
from postgres_cluster import PostgresCluster, start_or_skip

if TYPE_CHECKING:
    from injection_world import Attacker
    from simavr.sim_board import SimBoard

# LiteLLM reads its bundled price map instead of fetching one at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# No warm start (agent/warm) answers a test's one-shot or outlives its test: their folder is
# one that others may read, so none is used or started; tests/test_warm_start.py gives each
# test a folder of its own. (An environment variable would not do: most tests drop PINCLAW_.)
_NO_WARM_STARTS = Path(tempfile.mkdtemp(prefix="pinclaw-tests-"))
atexit.register(shutil.rmtree, _NO_WARM_STARTS, True)
(_NO_WARM_STARTS / "pinclaw").mkdir(mode=0o755)
(_NO_WARM_STARTS / "pinclaw").chmod(0o755)
os.environ["XDG_RUNTIME_DIR"] = str(_NO_WARM_STARTS)

TEST_MODEL = "openai/test-model"
# The longest tests (each one a minute or more of a CI run: a venv installed from the lock, a
# kill -9 at every point of a send) start first, so under `-n 4` none of them begins late and
# keeps the run waiting on it alone at the end.
LONGEST = (
    "test_install_pythons.py::",
    "test_newcomer_walkthrough.py::",
    "test_delivery_faults.py::test_kill_9_at_each_point",
    "test_several_processes.py::test_three_processes",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not any(part in item.nodeid for part in LONGEST))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `both_stores` runs twice: on state.db and on PostgreSQL."""
    if metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("state_store", ["sqlite", "postgres"], indirect=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One throw-away PostgreSQL cluster for this test process (tests/postgres_cluster.py)."""
    cluster = start_or_skip()
    yield cluster
    cluster.stop()


@pytest.fixture
def state_store(request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL URL of a new database when the test runs on that store, else None."""
    if getattr(request, "param", "sqlite") != "postgres":
        return None
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.new_database()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state_store: str | None) -> Path:
    """PINCLAW_HOME in a temporary folder, and no PINCLAW_* from the developer's shell; with
    PINCLAW_STATE__URL set to a database of its own when the test runs on PostgreSQL."""
    for name in list(os.environ):
        if name.startswith("PINCLAW_"):
            monkeypatch.delenv(name)
    path = tmp_path / "home"
    monkeypatch.setenv("PINCLAW_HOME", str(path))
    if state_store is not None:
        monkeypatch.setenv("PINCLAW_STATE__URL", state_store)
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace as `agent init` makes it (test_prompt_kit.py's `fresh_workspace`). A
    module that needs another kind defines its own `workspace`."""
    from test_prompt_kit import fresh_workspace

    return fresh_workspace(tmp_path)


@pytest.fixture
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider key for LiteLLM clients made without `llm_env` (never a real one)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real-0000")


async def eventually(
    check: Callable[[], object], within: float = 3.0, what: str = "the expected state"
) -> None:
    """Wait, while the event loop runs on, until `check()` is true; fail after `within` s."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.005)


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[FirmataBoard]:
    """The Firmata board emulator on a pseudo-terminal (tests/fakes/firmata_board.py)."""
    with FirmataBoard(tmp_path / "ttyACM0") as board:
        yield board


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def llm_env(home: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment variables that point pinclaw at the fake LLM (also for subprocesses)."""
    values = {
        "PINCLAW_HOME": str(home),
        "PINCLAW_LLM__MODEL": TEST_MODEL,
        "PINCLAW_LLM__API_BASE": fake_llm.base_url,
        "PINCLAW_LLM__RETRY_BACKOFF_S": "0.01",
        "OPENAI_API_KEY": "sk-test-key-not-real-0000",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    """The in-process model double (tests/fakes/model_double.py): echo unless scripted. A
    test whose scripted answers were not all asked for fails."""
    double = ScriptedModel(model=TEST_MODEL)
    yield double
    assert double.pending == 0, f"{double.pending} scripted answer(s) never asked for"


@pytest.fixture
def model_env(home: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Settings as `llm_env` makes them, but the daemon run in this process (`daemon`) calls
    `model` instead of LiteLLM. The provider address is a closed port: a call that goes
    around the double fails. Not for subprocesses: they cannot reach the double."""
    values = {
        "PINCLAW_HOME": str(home),
        "PINCLAW_LLM__MODEL": TEST_MODEL,
        "PINCLAW_LLM__API_BASE": "http://127.0.0.1:9/v1",
        "PINCLAW_LLM__NUM_RETRIES": "0",
        "OPENAI_API_KEY": "sk-test-key-not-real-0000",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    from agent.app import build_app
    from agent.daemon import serve

    monkeypatch.setattr(serve, "build_app", partial(build_app, model=model))
    return values


@pytest.fixture
def fake_telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def enable_telegram(fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An enabled Telegram channel on the fake Bot API; users 42 and @carol allowed."""
    values = {
        "PINCLAW_CHANNELS__TELEGRAM__ENABLED": "true",
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": fake.token,
        "PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS": '["42", "@carol"]',
        "PINCLAW_CHANNELS__TELEGRAM__API_BASE": fake.api_base,
        "PINCLAW_CHANNELS__TELEGRAM__FILE_API_BASE": fake.file_api_base,
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "2",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def owner_is_42(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # after home's clean-up
    """Telegram user 42 (Discord user 111) is the owner: their DMs are owner-private turns.
    Under Landlock a turn that is not (another person's, a group's) masks MEMORY.md and
    USER.md in the workspace root, which leaves the root list-only; bubblewrap masks them by
    mounting over them."""
    monkeypatch.setenv("PINCLAW_PEOPLE__OWNER__TELEGRAM", "42")
    monkeypatch.setenv("PINCLAW_PEOPLE__OWNER__DISCORD", "111")
    monkeypatch.setenv("PINCLAW_PEOPLE__OWNER__OWNER", "true")


@pytest.fixture
def telegram_env(
    llm_env: dict[str, str], fake_telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The fake LLM plus an enabled Telegram channel on the fake Bot API; user 42 allowed."""
    return {**llm_env, **enable_telegram(fake_telegram, monkeypatch)}


@pytest.fixture
def telegram_model_env(
    model_env: dict[str, str], fake_telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """`telegram_env` with the in-process model double (`model`) instead of the fake LLM."""
    return {**model_env, **enable_telegram(fake_telegram, monkeypatch)}


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    """Bot 1000 in guild 5000 with one text channel, 5001 ("general"). A module that needs
    another layout defines its own `fake_discord`; the env fixtures below use that one."""
    with FakeDiscord(bot_id="1000") as server:
        server.add_guild("5000", "test-guild", channels=[{"id": "5001", "name": "general"}])
        yield server


def enable_discord(fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An enabled Discord channel on the fake; user 111 allowed."""
    values = {
        "PINCLAW_CHANNELS__DISCORD__ENABLED": "true",
        "PINCLAW_CHANNELS__DISCORD__BOT_TOKEN": fake.token,
        "PINCLAW_CHANNELS__DISCORD__ALLOWED_USERS": '["111"]',
        "PINCLAW_CHANNELS__DISCORD__API_BASE": fake.api_base,
        "PINCLAW_CHANNELS__DISCORD__GATEWAY_URL": fake.gateway_url,
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "2",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def discord_model_env(
    model_env: dict[str, str], fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The in-process model double (`model`) plus Discord on the fake."""
    return {**model_env, **enable_discord(fake_discord, monkeypatch)}


@pytest.fixture
def discord_env(
    llm_env: dict[str, str], fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The fake LLM (through LiteLLM) plus Discord on the fake."""
    return {**llm_env, **enable_discord(fake_discord, monkeypatch)}


class _Stop(asyncio.Event):
    """The daemon's stop event. serve() waits on it once everything has started (the local
    socket, the board, the channels, the scheduler, the watcher): `serving` is set then."""

    def __init__(self) -> None:
        super().__init__()
        self.serving = asyncio.Event()

    async def wait(self) -> Literal[True]:
        self.serving.set()
        return await super().wait()


class Daemon:
    """`agent run` in this event loop: start it, talk to it through the fakes, stop it."""

    START_S = 30.0  # a board to connect and every channel to start, on a slow machine

    def __init__(self) -> None:
        self.stop = _Stop()
        self.task: asyncio.Task[int] | None = None

    async def __aenter__(self) -> Daemon:
        from agent.config import load_settings
        from agent.daemon.serve import serve
        from agent.home import secure_home

        settings = load_settings()
        secure_home(settings.home, settings.workspace_dir)  # as `agent run` does first
        self.task = asyncio.create_task(serve(settings, stop=self.stop))
        serving = asyncio.create_task(self.stop.serving.wait())
        first = asyncio.FIRST_COMPLETED
        await asyncio.wait({self.task, serving}, timeout=self.START_S, return_when=first)
        serving.cancel()
        if self.task.done():
            raise RuntimeError(f"daemon ended at start with {self.task.result()}")
        if not self.stop.serving.is_set():
            await self.__aexit__()
            raise TimeoutError(f"the daemon was not serving within {self.START_S} s")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        self.exit_code = await asyncio.wait_for(self.task, 15)


@pytest.fixture
def daemon() -> Callable[[], Daemon]:
    return Daemon


@pytest.fixture(scope="module")
def simboard() -> Iterator[SimBoard]:
    """The simavr rig (tests/simavr): the real StandardFirmata on a simulated Uno, one per
    module (it costs about half a core while it runs). Skipped when it cannot be built here,
    unless PINCLAW_REALBOARD=require (as .ci/run sets), which makes that a failure."""
    from simavr.sim_board import SimBoard, ensure_built

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("NO_APT", "1")  # build.sh installs packages only when run by hand
            ensure_built()
        sim = SimBoard(max_lifetime=600).start()
    except (OSError, RuntimeError) as exc:
        why = f"the simavr rig cannot run here ({exc}); `bash tests/simavr/build.sh` builds it"
        if os.environ.get("PINCLAW_REALBOARD") == "require":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def attacker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Attacker]:
    """The attacker's HTTP server on 127.0.0.1, keeping every path asked of it, which web_fetch
    may reach: what a steered turn would send out shows there."""
    from injection_world import Attacker  # here: it imports this file

    server = Attacker()
    hosts = [f"127.0.0.1:{server.port}", f"localhost:{server.port}"]
    monkeypatch.setenv("PINCLAW_WEB__ALLOW_HOSTS", json.dumps(hosts))
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "5")
    yield server
    server.close()
