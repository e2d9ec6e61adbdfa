"""`agent run` processes sharing one store, each in a home of its own with the same state URL
and workspace (as tests/test_several_processes.py starts them), against the Telegram double
and a model double each; and what they cost: each process's CPU, the PostgreSQL server's,
the statements it ran (pg_stat_statements). For bench/several_processes.py.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import psycopg  # noqa: E402
from daemon_process import DaemonProcess, wait_until  # noqa: E402
from fakes.llm_server import FakeLLM, last_user_content  # noqa: E402
from fakes.telegram_server import FakeTelegram  # noqa: E402
from postgres_cluster import PostgresCluster  # noqa: E402

ASKED = re.compile(r"(\w+) chat (\d+) message (\d+)")
CONNECTED = re.compile(r"telegram (connected as|started)")
STANDBY = "on standby"
TAKEN_OVER = "took the intake over"
AS_IN_PRODUCTION = (
    "fsync=on",
    "synchronous_commit=on",
    "full_page_writes=on",
    "shared_preload_libraries=pg_stat_statements",
)


def cpu_s(pid: int, children: bool = False) -> float:
    """User and system CPU of `pid` so far (with its ended children's, if asked)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu_s(cluster: PostgresCluster) -> float:
    """The PostgreSQL server's CPU: the postmaster, its ended backends, its living ones."""
    master = int((cluster.data / "postmaster.pid").read_text().split()[0])
    total = cpu_s(master, children=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == master:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def statement_counts(cluster: PostgresCluster, url: str) -> Counter[str]:
    """Statements the server ran for `url`'s database since the last reset, by kind."""
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        found = conn.execute(
            "SELECT s.query, s.calls FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
            (database,),
        ).fetchall()
    kinds: Counter[str] = Counter()
    for query, calls in found:
        if "advisory" in query:
            kinds["claims"] += calls
        elif "pg_notify" in query:
            kinds["NOTIFY"] += calls
        else:
            kinds[query.split(None, 1)[0].upper()] += calls
    return kinds


def reset_statements(cluster: PostgresCluster) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def answers(telegram: FakeTelegram, tag: str) -> dict[tuple[int, int], list[float]]:
    """(chat, message number) -> when each answer to it reached Telegram."""
    found: dict[tuple[int, int], list[float]] = defaultdict(list)
    for sent in telegram.sent:
        asked = ASKED.search(sent.plain or "") if sent.method == "sendMessage" else None
        if asked and asked.group(1) == tag:
            found[(int(asked.group(2)), int(asked.group(3)))].append(sent.at)
    return found


@dataclass
class Fleet:
    """`agent run` processes with homes of their own on one store (state.db: `url` None),
    each with a model double of its own: its requests are the turns that process ran."""

    root: Path
    url: str | None
    telegram: FakeTelegram
    latency_ms: float
    slots: int

    def __post_init__(self) -> None:
        self.daemons: list[DaemonProcess] = []
        self.models: list[FakeLLM] = []

    def start(self) -> DaemonProcess:
        n = len(self.daemons)
        model = FakeLLM(latency_s=self.latency_ms / 1000).start()
        self.models.append(model)
        env = {name: value for name, value in os.environ.items() if not name.startswith("PINCLAW_")}
        env.update(
            PINCLAW_HOME=str(self.root / f"home-{n}"),
            PINCLAW_WORKSPACE__PATH=str(self.root / "workspace"),
            PINCLAW_LLM__MODEL="openai/bench",
            PINCLAW_LLM__API_BASE=model.base_url,
            OPENAI_API_KEY="sk-bench-not-real",
            PINCLAW_CHANNELS__TELEGRAM__ENABLED="true",
            PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN=self.telegram.token,
            PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS='["*"]',
            PINCLAW_CHANNELS__TELEGRAM__API_BASE=self.telegram.api_base,
            PINCLAW_CHANNELS__TELEGRAM__FILE_API_BASE=self.telegram.file_api_base,
            PINCLAW_AGENT__MAX_CONCURRENT_TURNS=str(self.slots),
        )
        if self.url:
            env["PINCLAW_STATE__URL"] = self.url
        daemon = DaemonProcess(env, self.root / f"agent-{n}.log", flags=()).start()
        self.daemons.append(daemon)
        return daemon

    def start_standby(self) -> DaemonProcess:
        daemon = self.start()
        wait_until(lambda: STANDBY in daemon.log, 90, "a process on standby", daemon)
        return daemon

    def start_many(self, count: int) -> None:
        """The first takes the intake (it is alone when it connects); the rest wait."""
        first = self.start()
        wait_until(lambda: bool(CONNECTED.search(first.log)), 90, "the first process", first)
        for _ in range(count - 1):
            self.start_standby()

    def alive(self) -> list[DaemonProcess]:
        return [d for d in self.daemons if d.proc is not None and d.proc.poll() is None]

    def cpu(self) -> list[float]:
        return [cpu_s(d.proc.pid) for d in self.daemons if d.proc is not None]

    def turns(self, tag: str) -> list[int]:
        """The turns each process ran for messages tagged `tag`."""
        return [
            sum(tag in str(last_user_content(body)) for body in model.requests)
            for model in self.models
        ]

    def stop(self) -> None:
        for daemon in self.daemons:
            daemon.ensure_stopped()
        for model in self.models:
            model.stop()

    def wait_answered(self, tag: str, count: int, timeout_s: float) -> dict:  # type: ignore[type-arg]
        deadline = time.monotonic() + timeout_s
        while len(got := answers(self.telegram, tag)) < count:
            if time.monotonic() > deadline or not self.alive():
                tails = "\n".join(d.log[-1500:] for d in self.daemons)
                raise SystemExit(f"{len(got)} of {count} {tag} answers in {timeout_s} s\n{tails}")
            time.sleep(0.25)
        return got

    def warm_up(self, chats: int) -> None:
        """A message in each chat: imports, connections, the chats' first turns."""
        for chat in range(chats):
            self.telegram.inject_message(1000 + chat, 1000 + chat, f"warm chat {chat} message 0")
        self.wait_answered("warm", chats, 120)


@contextmanager
def fleet_on(root: Path, url: str | None, latency_ms: float, slots: int) -> Iterator[Fleet]:
    root.mkdir(parents=True)
    with FakeTelegram() as telegram:
        fleet = Fleet(root, url, telegram, latency_ms, slots)
        try:
            yield fleet
        finally:
            fleet.stop()
