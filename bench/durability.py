"""What durability costs: the state.db work the runtime does for each message, timed.

The micro-benchmark runs, on a temp state.db opened as the daemon opens it (WAL,
synchronous=FULL) and with the real classes of agent/turns/, the steps one message takes
through ChannelRuntime and Courier: the intake commit (Inbox.add, before the channel
acknowledges), the reads that start the turn (Inbox.oldest, SessionStore.recent), the turn
commit (the turn's messages, the reply in the outbox and the message done, together), the
courier's read (Outbox.oldest), the mark_sent commit once the part has gone out, and the
two reads by which the chat's worker and courier find their queues empty. Each step is
timed as the runtime sees it: the queue, the trip to the database's thread and the fsync
included. `--in-flight 16` runs 16 chats' messages at once, as 16 turn slots can.

    .venv/bin/python bench/durability.py [--messages 2000] [--chats 100] [--in-flight 1 16]

The same file holds the probe bench/turns.py starts the daemon with (`--probe-daemon FILE
ARGS...`): it wraps StateDB.write and StateDB.read to log each operation's time (queue
and BEGIN, body, COMMIT) to FILE, then runs `agent ARGS...`, so the paced runs report the
commit cost inside the real daemon. agent/ itself is not changed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.durable.file.state_db import StateDB  # noqa: E402
from agent.durable.inbox import Inbox  # noqa: E402
from agent.durable.outbox import Outbox, PartOutcome  # noqa: E402
from agent.durable.sessions import SessionStore  # noqa: E402
from channels.base import ChatRef, IncomingMessage, OutgoingPart  # noqa: E402

REPLY = "Here is what I found. " * 10  # about 220 characters, one Telegram part
# The steps between the message's arrival and its reply leaving: what the user waits for.
ON_REPLY_PATH = ("intake commit", "turn reads", "turn commit", "courier read")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


# -- the micro-benchmark ---------------------------------------------------------------------


async def open_state(path: Path, synchronous: str) -> tuple[StateDB, SessionStore, Inbox, Outbox]:
    """state.db as open_store opens it: brought to this pinclaw's schema version."""
    from functools import partial

    from agent.durable.file.migrations import migrate

    db = await StateDB(path).open(migrate=partial(migrate, path=path))
    if synchronous != "FULL":
        await db.fetchall(f"PRAGMA synchronous={synchronous}")  # a reference row only
    return db, await SessionStore.open(db), Inbox(db), Outbox(db)


async def one_message(
    state: tuple[StateDB, SessionStore, Inbox, Outbox], chat: int, n: int
) -> dict[str, float]:
    """One message's state.db work, step by step, as runtime.py and delivery.py do it."""
    db, sessions, inbox, outbox = state
    ref = ChatRef("telegram", str(chat))
    msg = IncomingMessage(ref, str(chat), "Bench", f"hello from {chat}, #{n}", message_id=str(n))
    took: dict[str, float] = {}
    started = time.perf_counter()
    await inbox.add(msg)
    took["intake commit"] = time.perf_counter() - started

    started = time.perf_counter()
    pending = await inbox.oldest(ref.key)
    await sessions.recent(ref.key)
    took["turn reads"] = time.perf_counter() - started
    assert pending is not None

    turn = [{"role": "user", "content": msg.text}, {"role": "assistant", "content": REPLY}]
    started = time.perf_counter()
    parts = [OutgoingPart(REPLY, reply_to=str(n))]

    def commit(conn: sqlite3.Connection) -> None:
        sessions.add_turn(conn, ref.key, turn, pending.id)
        inbox.finish(conn, pending.id, "done")
        outbox.insert(conn, ref, parts, inbox_id=pending.id, deliver_within_s=3600.0)

    await db.write(commit)
    took["turn commit"] = time.perf_counter() - started

    started = time.perf_counter()
    outgoing = await outbox.oldest(ref.key)
    took["courier read"] = time.perf_counter() - started
    assert outgoing is not None

    started = time.perf_counter()
    await outbox.record([PartOutcome(outgoing.id, 0, "sent", last=True)])  # as the courier
    took["mark_sent commit"] = time.perf_counter() - started

    started = time.perf_counter()  # the chat's worker and courier look again, find nothing
    assert await inbox.oldest(ref.key) is None and await outbox.oldest(ref.key) is None
    took["empty-queue reads"] = time.perf_counter() - started
    return {step: seconds * 1000 for step, seconds in took.items()}


async def micro(messages: int, chats: int, in_flight: int, synchronous: str) -> list[str]:
    """`messages` messages over `chats` chats (round robin, so histories grow), `in_flight`
    at a time; each chat's messages one after another, as the runtime runs them."""
    with tempfile.TemporaryDirectory() as home:
        state = await open_state(Path(home) / "state.db", synchronous)
        samples: dict[str, list[float]] = defaultdict(list)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(messages):
            queue.put_nowait(n)

        async def worker() -> None:
            while not queue.empty():
                n = queue.get_nowait()
                took = await one_message(state, 10_000 + n % chats, n)
                for step, ms in took.items():
                    samples[step].append(ms)
                samples["on the reply's path"].append(sum(took[s] for s in ON_REPLY_PATH))
                samples["all, per message"].append(sum(took.values()))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - started
        await state[0].close()
    rows = [
        f"{synchronous:<6} {in_flight:>9} {step:<22} {statistics.median(values):>7.2f} "
        f"{quantile(values, 0.99):>7.2f}"
        for step, values in samples.items()
    ]
    return [*rows, f"{synchronous:<6} {in_flight:>9} {'messages/s':<22} {messages / elapsed:>7.0f}"]


# -- the probe inside the daemon --------------------------------------------------------------


def _caller(depth: int) -> str:
    """The qualified name of the function that called into StateDB (Python 3.11+)."""
    frame = sys._getframe(depth)
    while frame.f_code.co_qualname.startswith("StateDB."):
        assert frame.f_back is not None
        frame = frame.f_back
    return frame.f_code.co_qualname


def install_probe(out: IO[str]) -> None:
    """Log every state.db transaction and read: `kind caller end wait body commit` (ms,
    `end` on the monotonic clock, which other processes share); and every garbage
    collection, which stops the event loop (`gc genN end pause`). A transaction's "wait" runs
    from the call to its function starting on the database's thread (the queue ahead and
    BEGIN), "commit" from the function's end to the caller resuming (COMMIT and the way
    back)."""
    write = StateDB.write
    read = StateDB.read

    def log(kind: str, caller: str, *ms: float) -> None:
        figures = " ".join(f"{value * 1000:.3f}" for value in ms)
        out.write(f"{kind} {caller} {time.monotonic():.6f} {figures}\n")

    collecting = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            log("gc", f"gen{info['generation']}", time.perf_counter() - collecting[0])

    gc.callbacks.append(on_gc)

    async def timed_write(db: StateDB, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        caller = _caller(2)
        body: list[float] = []

        def timed(conn: sqlite3.Connection) -> Any:
            body.append(time.perf_counter())
            try:
                return fn(conn)
            finally:
                body.append(time.perf_counter())

        called = time.perf_counter()
        result = await write(db, timed)
        done = time.perf_counter()
        log("txn", caller, body[0] - called, body[1] - body[0], done - body[1])
        return result

    async def timed_read(db: StateDB, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        caller = _caller(2)
        called = time.perf_counter()
        rows = await read(db, fn)
        log("read", caller, time.perf_counter() - called)
        return rows

    StateDB.write = timed_write  # type: ignore[method-assign,assignment]
    StateDB.read = timed_read  # type: ignore[method-assign,assignment]


def probe_daemon(out_path: str, args: list[str]) -> None:
    """Run `agent ARGS...` with the probe; the first line says which agent/ it imported."""
    import agent
    from agent.cli.main import main as agent_main

    with open(out_path, "w", buffering=1) as out:  # line-buffered: kept if the daemon dies
        out.write(f"agent {agent.__file__}\n")
        install_probe(out)
        agent_main(args)


def probe_summary(path: Path, since: float, messages: int) -> dict[str, tuple[float, float]]:
    """p50/p99 (ms) per kind of operation logged after `since`, state.db ms per message, and
    the garbage collector: ("gc", (full collections, longest pause ms)), ("gc per message",
    (ms, nan)).

    Transactions count from the call to the end of COMMIT (the queue included): what
    the coroutine that asked for them waits.
    """
    groups: dict[str, list[float]] = defaultdict(list)
    names = {
        "Inbox.add": "intake commit",
        "ChannelRuntime._answer_pending": "turn commit",
        "Outbox.record": "mark_sent commit",  # the courier's commit once a part has gone out
    }
    total = 0.0
    pauses: list[tuple[str, float]] = []
    for line in path.read_text().splitlines()[1:]:
        kind, caller, end, *ms = line.split()
        if float(end) < since:
            continue
        figures = [float(value) for value in ms]
        if kind == "gc":
            pauses.append((caller, figures[0]))
            continue
        total += sum(figures)
        if kind == "txn":
            groups[names.get(caller, "other commit")].append(sum(figures))
            groups["COMMIT alone"].append(figures[2])
            groups["lock wait"].append(figures[0])
        else:
            groups["reads"].append(figures[0])
    summary = {name: (statistics.median(v), quantile(v, 0.99)) for name, v in groups.items()}
    summary["state.db per message"] = (total / max(1, messages), float("nan"))
    full = sum(1 for generation, _ in pauses if generation == "gen2")
    summary["gc"] = (full, max((ms for _, ms in pauses), default=0.0))
    summary["gc per message"] = (sum(ms for _, ms in pauses) / max(1, messages), float("nan"))
    return summary


def main() -> None:
    if sys.argv[1:2] == ["--probe-daemon"]:
        probe_daemon(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--synchronous", nargs="+", default=["FULL", "NORMAL"])
    args = parser.parse_args()
    print(f"{'sync':<6} {'in flight':>9} {'step':<22} {'p50 ms':>7} {'p99 ms':>7}")
    for synchronous in args.synchronous:
        for in_flight in args.in_flight:
            for row in asyncio.run(micro(args.messages, args.chats, in_flight, synchronous)):
                print(row, flush=True)


if __name__ == "__main__":
    main()
