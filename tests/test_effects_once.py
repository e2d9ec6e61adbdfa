"""Tool effects at most once: a turn run again after kill -9 does not act a second time.

`agent run` as a subprocess against the fake Telegram, the fake LLM and the Firmata emulator,
killed at each point of a turn with effects (a shell append, then a pin write): its intent
journalled, its tool acted, its outcomes recorded, its turn committed. After the restart the
same message runs again; each test asserts the file's lines, the pin writes the emulator saw
and what the replayed turn's model was told. Below them, in-process: the journal's table
(agent/durable/tool_journal.py) and how the loop matches a replayed turn's calls to it.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.firmata_board import SET_DIGITAL_PIN_VALUE, FirmataBoard
from fakes.llm_server import FakeLLM, Reply, text, tool_calls
from fakes.telegram_server import FakeTelegram
from hardware_calls import board_env

from agent.app import open_store
from agent.config import LLMSettings
from agent.durable.tool_journal import ToolJournal
from agent.model.client import LLMClient
from agent.security import Scrubber
from agent.turns.loop import LoopOptions, run_tool_call_loop
from channels.base import ChatRef, IncomingMessage
from tools.base import (
    CallJournal,
    FunctionTool,
    JournalEntry,
    ToolCallContext,
    ToolRegistry,
    ToolResult,
)

OWNER = 42
PINS = {"relay": {"pin": 13, "mode": "output", "description": "fish feeder relay"}}
ALLOWED = '["echo", "sleep", "cat"]'
RECORDED = "[Not run again: this call already ran before pinclaw restarted. Its result then:]"
UNKNOWN = "was running when pinclaw stopped; its outcome is unknown — check before repeating it."
CHECKED = "was running when pinclaw stopped and its outcome was not recorded. Checked now:"
PIN_SET = "relay (pin 13) is now high."


class CountingBoard(FirmataBoard):
    """The emulator, counting every digital write a pin receives: its events list only the
    changes of level, and a second "high" to a high pin changes nothing there."""

    def __init__(self, path: Path) -> None:
        self.writes: Counter[int] = Counter()
        super().__init__(path)

    def _maybe_dispatch(self) -> None:
        if self._command == SET_DIGITAL_PIN_VALUE and len(self._args) == 2:
            self.writes[self._args[0]] += 1
        super()._maybe_dispatch()


@pytest.fixture
def board(tmp_path: Path) -> Iterator[CountingBoard]:
    with CountingBoard(tmp_path / "ttyACM0") as emulated:
        yield emulated


@pytest.fixture
def daemons(
    telegram_env: dict[str, str],
    owner_is_42: None,
    board: CountingBoard,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[list[DaemonProcess]]:
    board_env(monkeypatch, board.path, PINS)
    monkeypatch.setenv("PINCLAW_SECURITY__ALLOWED_COMMANDS", ALLOWED)
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.ensure_stopped()


def start(started: list[DaemonProcess], tmp_path: Path, **env: str) -> DaemonProcess:
    log = tmp_path / f"daemon-{len(started)}.log"  # its own: "started" is its own start
    daemon = DaemonProcess(env_of(**env), log).start()
    started.append(daemon)
    wait_until(lambda: "telegram started" in daemon.log, 60, "polling", daemon)
    return daemon


def journal(home: Path) -> list[tuple[str, bool]]:
    """The journal's rows: tool, and whether an outcome was recorded."""
    sql = "SELECT tool, finished_at IS NOT NULL FROM tool_journal ORDER BY id"
    return [(tool, bool(done)) for tool, done in rows(home / "state.db", sql)]


def lines(home: Path, name: str = "feed.log") -> int:
    path = home / "workspace" / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def answered(home: Path, messages: int) -> bool:
    """Whether that many messages are answered: their turns committed."""
    done = "SELECT COUNT(*) FROM inbox WHERE status = 'done'"
    return rows(home / "state.db", done) == [(messages,)]


def replies(fake: FakeTelegram, chat: int) -> list[str]:
    sent = fake.sent
    return [m.plain or "" for m in sent if m.method == "sendMessage" and m.chat_id == chat]


def told(fake: FakeLLM) -> list[str]:
    """What the model was told its tools did, in the last request it got."""
    return [str(m["content"]) for m in fake.requests[-1]["messages"] if m["role"] == "tool"]


def shell(command: str) -> Reply:
    return tool_calls(("shell", {"command": command}))


def relay_on() -> Reply:
    return tool_calls(("gpio_write", {"pin": "relay", "value": 1}))


def read_log(name: str = "feed.log") -> Reply:
    return tool_calls(("file_read", {"path": name}))


@dataclass(frozen=True)
class KillPoint:
    """Where in the turn the kill lands, and what the world holds once the replay ended."""

    name: str
    command: str  # the turn's shell call
    answer_s: float  # how long the model takes over the answer that follows the tools
    ready: Callable[[Path], bool]  # true when the daemon is where the kill belongs
    replay: tuple[Reply, ...]  # what the model does when the message runs again
    told: tuple[str, ...]  # what the replayed turn hears of its calls (in order)
    lines: int = 1  # feed.log's lines in the end
    writes: int = 1  # pin 13's writes in the end


SLOW_BEFORE = "sleep 4 && echo fed >> feed.log"
SLOW_AFTER = "echo fed >> feed.log && sleep 4"
FAST = "echo fed >> feed.log"
POINTS = [
    # The shell's intent is journalled; it is sleeping and has not appended. Told "unknown",
    # the model looks, finds no file, and appends itself: one line.
    KillPoint("intent journalled", SLOW_BEFORE, 0, lambda home: journal(home) == [("shell", False)],
              (shell(SLOW_BEFORE), read_log(), shell(SLOW_BEFORE), relay_on(), text("Fed.")),
              (UNKNOWN, "No such file", "exit code: 0", PIN_SET)),
    # The shell appended and sleeps on, its outcome not recorded. Told "unknown", the model
    # reads the file, sees the line and does not append again.
    KillPoint("tool acted", SLOW_AFTER, 0, lambda home: lines(home) == 1,
              (shell(SLOW_AFTER), read_log(), relay_on(), text("Fed.")),
              (UNKNOWN, "fed", PIN_SET)),
    # Both calls ran and their outcomes are journalled; the model is writing its answer.
    KillPoint("outcomes recorded", FAST, 30,
              lambda home: journal(home) == [("shell", True), ("gpio_write", True)],
              (shell(FAST), relay_on(), text("Fed.")),
              (f"{RECORDED}\nexit code: 0 (no output)", f"{RECORDED}\n{PIN_SET}")),
    # The turn committed: nothing runs again.
    KillPoint("turn committed", FAST, 0, lambda home: answered(home, 1),
              (shell(FAST), relay_on(), text("Fed.")), ()),
]  # fmt: skip


@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_kill_9_at_each_point_of_a_turn_acts_once(
    point: KillPoint,
    daemons: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    board: CountingBoard,
    home: Path,
    tmp_path: Path,
) -> None:
    first = start(daemons, tmp_path)
    fake_llm.script(shell(point.command), relay_on(), text("Fed.", delay_s=point.answer_s))
    fake_telegram.inject_message(7, OWNER, "feed the fish")
    wait_until(lambda: point.ready(home), 30, point.name, first)
    first.kill9()

    fake_llm.reset()
    fake_llm.script(*point.replay)
    again = start(daemons, tmp_path)
    wait_until(lambda: answered(home, 1), 30, "the message answered", again)
    if point.told:  # (a reply cut off by the kill after the commit may be lost: its promise)
        wait_until(lambda: "Fed." in replies(fake_telegram, 7), 30, "the answer", again)
    time.sleep(0.5)  # nothing more comes
    assert again.terminate() == 0
    if point.told:
        said = told(fake_llm)
        assert len(said) == len(point.told), said
        for heard, expected in zip(said, point.told, strict=True):
            assert expected in heard, (expected, heard)
    else:
        assert fake_llm.requests == []  # the committed turn did not run again
    assert lines(home) == point.lines
    assert board.writes[13] == point.writes
    assert board.level(13) == 1
    assert rows(home / "state.db", "SELECT COUNT(*) FROM tool_journal") == [(0,)]


def test_a_pin_write_cut_off_after_it_acted_is_read_back_not_written_again(
    daemons: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    board: CountingBoard,
    home: Path,
    tmp_path: Path,
) -> None:
    """The write reached the board and the crash came before its outcome was committed: the
    state such a crash leaves is made by erasing the recorded outcome before the restart."""
    first = start(daemons, tmp_path)
    fake_llm.script(relay_on(), text("On.", delay_s=30))
    fake_telegram.inject_message(8, OWNER, "relay on")
    wait_until(lambda: journal(home) == [("gpio_write", True)], 30, "the write", first)
    first.kill9()
    erase = "UPDATE tool_journal SET ok = NULL, result = NULL, finished_at = NULL"
    rows(home / "state.db", erase)

    fake_llm.reset()
    fake_llm.script(relay_on(), text("On."))
    again = start(daemons, tmp_path)
    wait_until(lambda: "On." in replies(fake_telegram, 8), 30, "the answer", again)
    assert again.terminate() == 0
    assert board.writes[13] == 1
    [said] = told(fake_llm)
    assert said == (
        "Not run again: this call (gpio_write) was running when pinclaw stopped and its "
        "outcome was not recorded. Checked now: relay (pin 13) reads high (mode output), as "
        "this call sets it."
    )


def test_a_pin_write_journalled_but_not_sent_is_read_back_and_found_undone(
    daemons: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    board: CountingBoard,
    home: Path,
    tmp_path: Path,
) -> None:
    """Killed while the write waits for the owner's yes: journalled, never sent. The replay
    does not ask again nor write; the model hears the pin is still low, and decides."""
    env = {"PINCLAW_HARDWARE__REQUIRE_APPROVAL": "true"}
    first = start(daemons, tmp_path, **env)
    fake_llm.script(relay_on(), text("On."))
    fake_telegram.inject_message(9, OWNER, "relay on")
    wait_until(lambda: journal(home) == [("gpio_write", False)], 30, "the intent", first)
    wait_until(lambda: len(replies(fake_telegram, 9)) == 1, 30, "the approval asked", first)
    first.kill9()

    fake_llm.reset()
    fake_llm.script(relay_on(), text("Not on: the owner did not answer."))
    again = start(daemons, tmp_path, **env)
    wait_until(lambda: len(replies(fake_telegram, 9)) == 2, 30, "the answer", again)
    assert again.terminate() == 0
    assert board.writes[13] == 0 and board.level(13) == 0
    assert replies(fake_telegram, 9)[1] == "Not on: the owner did not answer."  # nothing asked
    [said] = told(fake_llm)
    assert said.endswith("Checked now: relay (pin 13) reads low (mode output), not high as "
                         "this call would set it.")  # fmt: skip


CRASHES = int(os.environ.get("EFFECTS_CRASHES", "3"))  # docs/operations.md: EFFECTS_CRASHES=30


@pytest.mark.timeout(60 + 15 * CRASHES)
def test_crashes_in_a_loop_replay_no_effect(
    daemons: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    board: CountingBoard,
    home: Path,
    tmp_path: Path,
) -> None:
    """kill -9 over and over, at each kill point in turn and at random moments of the turn;
    each time the restarted daemon replays the message (the model making the same calls).
    Effects replayed: appends past the first, pin writes past the first."""
    crashes = CRASHES
    rig = Rig(daemons, fake_telegram, fake_llm, board, home, tmp_path, random.Random(24))
    rig.daemon = start(daemons, tmp_path)
    replayed, undone, seen = 0, 0, Counter[str]()
    for n in range(crashes):
        appended, written = rig.crash_round(n)
        replayed += max(appended - 1, 0) + max(written - 1, 0)
        undone += (appended == 0) + (written == 0)
        seen[f"{appended} line(s), {written} write(s)"] += 1
    assert rig.daemon.terminate() == 0
    print(
        f"\n{crashes} crashes: {replayed} effects replayed ({100 * replayed / crashes:g} per 100"
        f" crashes); {undone} cut off and left to the model; rounds: {dict(seen)}"
    )
    assert replayed == 0


@dataclass
class Rig:
    """The crash loop's world; `daemon` is the one running now."""

    daemons: list[DaemonProcess]
    telegram: FakeTelegram
    llm: FakeLLM
    board: CountingBoard
    home: Path
    tmp_path: Path
    rng: random.Random
    daemon: DaemonProcess | None = None

    def crash_round(self, n: int) -> tuple[int, int]:
        """Round `n`: a message, kill -9 at the round's point, a restart that replays it.
        The lines its append left, and the pin writes the board saw."""
        assert self.daemon is not None
        name, chat = f"feed-{n}.log", 100 + n
        kill_when: list[Callable[[], bool]] = [
            lambda: bool(journal(self.home)),  # the first intent journalled
            lambda: lines(self.home, name) == 1,  # the append done
            lambda: journal(self.home) == [("shell", True), ("gpio_write", True)],
            lambda: answered(self.home, n + 1),  # the turn committed
        ]
        calls = (shell(f"echo fed {n} >> {name}"), relay_on())
        writes_before = self.board.writes[13]
        self.llm.reset()
        self.llm.script(*calls, text(f"Fed {n}.", delay_s=0.3))
        self.telegram.inject_message(chat, OWNER, f"feed the fish, round {n}")
        kind = n % (len(kill_when) + 1)
        if kind < len(kill_when):
            wait_until(kill_when[kind], 30, f"kill point {kind}", self.daemon)
        else:  # anywhere in the turn
            time.sleep(self.rng.uniform(0.0, 1.5))
        self.daemon.kill9()
        self.llm.reset()
        self.llm.script(*calls, text(f"Fed {n}."))
        self.daemon = start(self.daemons, self.tmp_path)
        wait_until(lambda: answered(self.home, n + 1), 30, f"round {n} answered", self.daemon)
        return lines(self.home, name), self.board.writes[13] - writes_before


# -- in-process: the journal's table, and how a replayed turn's calls are matched to it --------


def message(message_id: str) -> IncomingMessage:
    return IncomingMessage(ChatRef("telegram", "7"), "42", "A", "feed", message_id=message_id)


@pytest.mark.both_stores
async def test_the_journal_keeps_intent_and_outcome_until_the_turn_commits(
    tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    msg = message("m1")
    inbox_id = await store.inbox.add(msg)
    journal = ToolJournal(store.db, msg)
    appended = await journal.start("shell", "call_1", '{"command": "echo fed >> feed.log"}')
    pinned = await journal.start("gpio_write", "call_2", '{"pin": 13, "value": 1}')
    assert appended is not None and pinned is not None
    await journal.finish(appended, ToolResult.success("exit code: 0 (no output)"))
    sql = "SELECT inbox_id, call_id, tool, ok, result, started_at > 0, finished_at > 0"
    sql += " FROM tool_journal ORDER BY id"
    assert await store.db.fetchall(sql) == [
        (inbox_id, "call_1", "shell", 1, "exit code: 0 (no output)", 1, 1),
        (inbox_id, "call_2", "gpio_write", None, None, 1, None),
    ]
    # The same message run again, as after a restart: both calls, in order.
    again = await ToolJournal(store.db, msg).entries()
    assert [(e.tool, e.result) for e in again] == [
        ("shell", ToolResult.success("exit code: 0 (no output)")),
        ("gpio_write", None),
    ]
    count = "SELECT COUNT(*) FROM tool_journal"

    def commit_that_fails(conn: sqlite3.Connection) -> None:
        store.inbox.finish(conn, inbox_id, "done")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        await store.db.write(commit_that_fails)
    await store.inbox.defer(inbox_id, retry_at=0.0, failing_since=0.0, notified=True)
    assert await store.db.fetchall(count) == [(2,)]  # still pending: kept for the next run
    await store.db.write(lambda conn: store.inbox.finish(conn, inbox_id, "done"))
    assert await store.db.fetchall(count) == [(0,)]  # gone as the message was finished
    await store.close()


@pytest.mark.both_stores
async def test_nothing_is_journalled_without_a_pending_inbox_row(
    tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    one_shot, done = message(""), message("m2")  # `agent run -m` has no inbox row
    await store.inbox.add(done, status="done")
    for msg in (one_shot, done):
        journal = ToolJournal(store.db, msg)
        assert await journal.start("shell", "call_1", "{}") is None
        assert await journal.entries() == []
    await store.close()


class World:
    """Tools with effects, each run counted: an append (not safe to repeat), a fact
    (repeat-safe), a switch (repeat-safe, and checked after a crash), and a read."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    def registry(self) -> ToolRegistry:
        return ToolRegistry([
            FunctionTool(self.append, writes=True),
            FunctionTool(self.remember, writes=True, repeat_safe=True),
            FunctionTool(self.switch, writes=True, repeat_safe=True, recheck=self.look),
            FunctionTool(self.peek),
        ])  # fmt: skip

    async def append(self, call: ToolCallContext, line: str) -> ToolResult:
        self.runs[f"append {line}"] += 1
        return ToolResult.success(f"appended {line}")

    async def remember(self, call: ToolCallContext, fact: str) -> ToolResult:
        self.runs["remember"] += 1
        return ToolResult.success(f"remembered {fact}")

    async def switch(self, call: ToolCallContext, on: bool) -> ToolResult:
        self.runs["switch"] += 1
        return ToolResult.success("switched")

    async def look(self, call: ToolCallContext, on: bool) -> ToolResult:
        return ToolResult.success("the switch is on, as this call sets it")

    async def peek(self, call: ToolCallContext) -> ToolResult:
        self.runs["peek"] += 1
        return ToolResult.success("nothing to see")


async def run_loop(fake_llm: FakeLLM, world: World, journal: CallJournal) -> list[str]:
    """The loop over `world`'s tools with `journal`; what the model was told at the end."""
    llm = LLMClient(LLMSettings(model="openai/m", api_base=fake_llm.base_url, num_retries=0))
    context = ToolCallContext(Path("."), journal=journal)
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    options, registry = LoopOptions(10, 5), world.registry()
    result = await run_tool_call_loop(
        history, registry, llm, context=context, options=options, scrub=Scrubber()
    )
    assert result.text == "done"
    return [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]


@pytest.fixture
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real-0000")


@pytest.mark.both_stores
@pytest.mark.usefixtures("_key")
async def test_a_replayed_turn_gets_recorded_results_and_runs_only_what_is_new(
    tmp_path: Path, fake_llm: FakeLLM, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    msg = message("m3")
    await store.inbox.add(msg)
    before = ToolJournal(store.db, msg)  # what the run cut off by the crash left
    for tool, args, result in [
        ("append", '{"line": "a"}', ToolResult.success("appended a")),
        ("append", '{"line": "b"}', None),
        ("remember", '{"fact": "x"}', None),
        ("switch", '{"on": true}', None),
    ]:
        entry = await before.start(tool, "old", args)
        if entry is not None and result is not None:
            await before.finish(entry, result)
    world = World()
    first = [("append", '{ "line":"a" }'), ("append", {"line": "b"}), ("remember", {"fact": "x"})]
    fake_llm.script(
        tool_calls(*first, ("switch", {"on": True}), ("peek", {})),
        tool_calls(("append", {"line": "a"}), ("append", {"line": "c"})),
        text("done"),
    )
    said = await run_loop(fake_llm, world, ToolJournal(store.db, msg))
    assert said == [
        f"{RECORDED}\nappended a",
        "Error: Not run again: this call (append) " + UNKNOWN,
        "[This call (remember) was running when pinclaw stopped and its outcome was not "
        "recorded; it is safe to repeat, so it ran again:]\nremembered x",
        f"Not run again: this call (switch) {CHECKED} the switch is on, as this call sets it",
        "nothing to see",
        "appended a",  # asked again in the same turn: the model's choice, run
        "appended c",
    ]
    assert world.runs == Counter({"append a": 1, "append c": 1, "remember": 1, "peek": 1})
    journalled = await ToolJournal(store.db, msg).entries()
    assert [(e.tool, e.arguments, e.result is not None) for e in journalled] == [
        ("append", '{"line": "a"}', True), ("append", '{"line": "b"}', False),
        ("remember", '{"fact": "x"}', True), ("switch", '{"on": true}', False),
        ("append", '{"line": "a"}', True), ("append", '{"line": "c"}', True),
    ]  # fmt: skip
    await store.close()


class FullDisk:
    """A journal that cannot write: state.db's disk is full."""

    async def entries(self) -> list[JournalEntry]:
        return []

    async def start(self, tool: str, call_id: str, arguments: str) -> JournalEntry | None:
        raise sqlite3.OperationalError("database or disk is full")

    async def finish(
        self, entry: JournalEntry, result: ToolResult, tainted_by: Sequence[str] = ()
    ) -> None:
        raise AssertionError("nothing started")


@pytest.mark.usefixtures("_key")
async def test_a_call_whose_intent_cannot_be_journalled_does_not_run(fake_llm: FakeLLM) -> None:
    world = World()
    fake_llm.script(tool_calls(("append", {"line": "a"}), ("peek", {})), text("done"))
    assert await run_loop(fake_llm, world, FullDisk()) == [
        "Error: Not run: pinclaw could not record the call first, so nothing was done "
        "(OperationalError: database or disk is full)",
        "nothing to see",
    ]
    assert world.runs == Counter({"peek": 1})
