"""Several `agent run` processes on one PostgreSQL store (issue 42), on this machine:

1. Throughput: a burst of M messages over C chats (all put on the Telegram double at once,
   each chat's in order) answered by 1, 2 and 4 processes sharing a throw-away PostgreSQL,
   and by 1 process on state.db for reference; msg/s from the first message injected to the
   last answer Telegram took, and the ratio to one process on PostgreSQL (the issue's goal:
   two processes at least 0.9x one process's rate, i.e. the coordination costs at most 10 %).
   Beside it, CPU ms per message: every `agent run` together, the intake holder, the others
   (each), the PostgreSQL server, and this process (the doubles); and the statements the
   server ran per message (pg_stat_statements).
2. Latency: messages at a steady low rate through one process, end to end (injected to the
   answer taken, the model's latency subtracted), median and p95, on each store: what
   PostgreSQL adds against state.db.
3. Takeover: kill -9 the process holding Telegram's intake (another on standby); the time
   until a survivor logs "took the intake over", and until a message injected right after
   the kill is answered. Repeated; median and max (goal: within 10 s).

    .venv/bin/python bench/several_processes.py [--quick] [--messages 1000] [--chats 50]
        [--processes 1 2 4] [--latency-ms 0] [--paced 100] [--rate 5] [--takeovers 3]

The model double answers after --latency-ms, 0 by default: then a turn costs only CPU, so the
rate is what the processes' CPU (and PostgreSQL's) allows, and the coordination — the claims'
advisory locks, NOTIFY, the one-second sweeps — shows in it: the goal's question. A stored
message is announced to every process at once (the intake's holder gets no head start) and a
process claims a chat only while it has a free turn slot, so the turns spread over the
processes with time to spare (the "turns" column). --latency-ms 1000 shows the other limit:
16 slots / 1 s = 16 msg/s a process.

Each process has a home of its own, and the same state URL and workspace, as
tests/test_several_processes.py starts them. The cluster is tests/postgres_cluster.py's,
with fsync, synchronous_commit and full_page_writes back on (state.db fsyncs each commit too)
and pg_stat_statements loaded. The doubles run in this process and share the machine's cores
with the processes and the server: read the figures with the load average printed.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import psycopg  # noqa: E402
from daemon_process import wait_until  # noqa: E402
from fleet import (  # noqa: E402
    AS_IN_PRODUCTION,
    TAKEN_OVER,
    fleet_on,
    reset_statements,
    server_cpu_s,
    statement_counts,
)
from postgres_cluster import PostgresCluster, server_bin  # noqa: E402


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# -- 1. throughput ------------------------------------------------------------------------------


@dataclass
class Burst:
    store: str
    processes: int
    rate: float
    cpu_ms: list[float]  # each process's CPU per message of the burst
    turns: list[int]  # the turns each process ran
    server_ms: float  # PostgreSQL's CPU per message
    doubles_ms: float  # this process's
    statements: Counter[str]  # per message, by kind
    duplicates: int

    @property
    def others_ms(self) -> float:
        """Each process's but the intake holder's (the mean), per message of the burst."""
        return statistics.mean(self.cpu_ms[1:]) if self.processes > 1 else float("nan")


def burst(
    args: argparse.Namespace, root: Path, cluster: PostgresCluster | None, processes: int
) -> Burst:
    url = cluster.new_database() if cluster else None
    with fleet_on(root, url, args.latency_ms, args.slots) as fleet:
        fleet.start_many(processes)
        fleet.warm_up(args.chats)
        if cluster and url:
            reset_statements(cluster)
        agents, server = fleet.cpu(), server_cpu_s(cluster) if cluster else 0.0
        doubles, started = time.process_time(), time.monotonic()
        per_chat = args.messages // args.chats
        for n in range(per_chat):
            for chat in range(args.chats):
                text = f"burst chat {chat} message {n}"
                fleet.telegram.inject_message(1000 + chat, 1000 + chat, text)
        got = fleet.wait_answered("burst", per_chat * args.chats, 120 + args.messages * 0.5)
        doubles = time.process_time() - doubles
        used = [after - before for after, before in zip(fleet.cpu(), agents, strict=True)]
        server = server_cpu_s(cluster) - server if cluster else float("nan")
        statements = statement_counts(cluster, url) if cluster and url else Counter()
        turns = fleet.turns("burst")
    count = per_chat * args.chats
    elapsed = max(at for ats in got.values() for at in ats) - started
    return Burst(
        "postgresql" if cluster else "state.db",
        processes,
        count / elapsed,
        [cpu * 1000 / count for cpu in used],
        turns,
        server * 1000 / count,
        doubles * 1000 / count,
        Counter({kind: calls / count for kind, calls in statements.items()}),
        sum(len(ats) - 1 for ats in got.values()),
    )


def throughput(args: argparse.Namespace, root: Path, cluster: PostgresCluster) -> list[Burst]:
    print(
        f"1. throughput: {args.messages} messages over {args.chats} chats at once; the model "
        f"answers after {args.latency_ms:g} ms; {args.slots} turn slots a process; {load()}"
    )
    print(
        f"{'':>29} {'CPU ms per message':^39} {'stmts':>6}\n"
        f"{'store':<10} {'procs':>5} {'msg/s':>6} {'ratio':>5} {'agents':>7} {'holder':>7} "
        f"{'other':>7} {'server':>7} {'doubles':>7} {'a msg':>6} {'dup':>3}  turns (holder's first)"
    )
    rows = []
    for store, processes in [("state.db", 1), *(("postgresql", n) for n in args.processes)]:
        on = cluster if store == "postgresql" else None
        row = burst(args, root / f"{store}-{processes}", on, processes)
        rows.append(row)
        one = next((r.rate for r in rows if r.store == "postgresql" and r.processes == 1), None)
        ratio = f"{row.rate / one:>4.2f}x" if one else f"{'-':>5}"
        said = sum(row.statements.values()) if row.statements else float("nan")
        print(
            f"{row.store:<10} {row.processes:>5} {row.rate:>6.1f} {ratio} {sum(row.cpu_ms):>7.1f} "
            f"{row.cpu_ms[0]:>7.1f} {row.others_ms:>7.1f} {row.server_ms:>7.1f} "
            f"{row.doubles_ms:>7.1f} {said:>6.1f} {row.duplicates:>3}  "
            + " / ".join(map(str, row.turns)),
            flush=True,
        )
    for row in rows:
        if row.statements:
            kinds = ", ".join(f"{k} {v:.1f}" for k, v in row.statements.most_common())
            print(f"  statements a message, {row.processes} process(es): {kinds}")
    print(
        "  agents: every process's CPU together; holder: the intake holder's; other: each other"
        "\n  process's; server: PostgreSQL's; doubles: this process's (the model and Telegram"
        "\n  doubles, on the same cores); turns: the turns each process ran"
    )
    return rows


# -- 2. latency ---------------------------------------------------------------------------------


def paced(args: argparse.Namespace, root: Path, url: str | None) -> list[float]:
    """End-to-end ms of each paced message through one process, the model's wait taken off."""
    with fleet_on(root, url, args.latency_ms, args.slots) as fleet:
        fleet.start_many(1)
        fleet.warm_up(5)
        sent_at: dict[tuple[int, int], float] = {}
        started = time.monotonic()
        for n in range(args.paced):
            chat = n % args.chats
            sent_at[(chat, n)] = time.monotonic()
            fleet.telegram.inject_message(
                1000 + chat, 1000 + chat, f"paced chat {chat} message {n}"
            )
            time.sleep(max(0.0, started + (n + 1) / args.rate - time.monotonic()))
        got = fleet.wait_answered("paced", args.paced, 120)
    return [(got[key][0] - at) * 1000 - args.latency_ms for key, at in sent_at.items()]


def latency(args: argparse.Namespace, root: Path, cluster: PostgresCluster) -> None:
    print(
        f"\n2. latency: {args.paced} messages at {args.rate:g}/s through one process, end to "
        f"end less the model's {args.latency_ms:g} ms; {load()}"
    )
    print(f"{'store':<10} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}")
    medians = []
    for store, url in (("state.db", None), ("postgresql", cluster.new_database())):
        took = paced(args, root / f"paced-{store}", url)
        medians.append((statistics.median(took), quantile(took, 0.95)))
        print(f"{store:<10} {medians[-1][0]:>7.1f} {medians[-1][1]:>7.1f} {max(took):>7.1f}")
    added = [pg - file for file, pg in zip(*medians, strict=True)]
    print(f"{'added':<10} {added[0]:>+7.1f} {added[1]:>+7.1f}", flush=True)


# -- 3. takeover --------------------------------------------------------------------------------


def takeover(args: argparse.Namespace, root: Path, cluster: PostgresCluster) -> None:
    print(
        f"\n3. takeover: kill -9 the intake's holder, another on standby ({args.takeovers} "
        f"times); {load()}"
    )
    print(f"{'kill':>4} {'took over s':>11} {'answered s':>10}")
    took, answered = [], []
    with fleet_on(root / "takeover", cluster.new_database(), args.latency_ms, args.slots) as fleet:
        fleet.start_many(2)
        holder = fleet.daemons[0]
        for n in range(args.takeovers):
            standby = [d for d in fleet.alive() if d is not holder]
            holder.kill9()
            killed = time.monotonic()
            fleet.telegram.inject_message(1000, 1000, f"after chat 0 message {n}")
            wait_until(lambda s=standby: any(TAKEN_OVER in d.log for d in s), 30, "the takeover")  # type: ignore[misc]
            took.append(time.monotonic() - killed)
            holder = next(d for d in standby if TAKEN_OVER in d.log)
            got = fleet.wait_answered("after", n + 1, 60)
            answered.append(got[(0, n)][0] - killed)
            print(f"{n + 1:>4} {took[-1]:>11.2f} {answered[-1]:>10.2f}", flush=True)
            if n + 1 < args.takeovers:
                fleet.start_standby()
    print(
        f"{'p50':>4} {statistics.median(took):>11.2f} {statistics.median(answered):>10.2f}\n"
        f"{'max':>4} {max(took):>11.2f} {max(answered):>10.2f}   (goal: within 10 s)"
    )


# -- what it predicts ---------------------------------------------------------------------------


def predict(rows: list[Burst]) -> None:
    """What the figures say of more machines: which shared part fills first."""
    shared = [r for r in rows if r.store == "postgresql" and r.statements]
    if not shared:
        return
    one, most = shared[0], shared[-1]
    turn_ms = sum(one.cpu_ms)  # a message's CPU in one process: its intake and its turn
    said = sum(most.statements.values())
    coordination = most.statements["claims"] + most.statements["NOTIFY"]
    count = sum(most.turns)
    hearing = [
        max(0.0, cpu - turns / count * turn_ms)
        for cpu, turns in zip(most.cpu_ms[1:], most.turns[1:], strict=True)
    ]
    print(
        f"\nMore machines: a process brings its turn slots and its CPU ({turn_ms:.1f} ms a "
        f"message here),\nso the rate grows with processes while the turns spread over them "
        f"and no shared part is full.\nWith {most.processes} processes the intake's holder ran "
        f"{most.turns[0] / count:.0%} of the turns (an even share: {1 / most.processes:.0%})."
    )
    if hearing:
        print(
            f"A process spends about {statistics.mean(hearing):.1f} ms a message it does not "
            f"answer (NOTIFY heard, a claim tried,\nthe sweeps): that much more for each "
            f"process added."
        )
    print(
        f"PostgreSQL: {most.server_ms:.1f} ms of server CPU and {said:.0f} statements a message "
        f"({coordination:.1f} of them claims and\nNOTIFY): one server core carries about "
        f"{1000 / most.server_ms:.0f} msg/s; each statement is a round trip, so at 0.5 ms"
        f"\na trip a network between the machines adds up to {said * 0.5:.0f} ms to a message. "
        f"Telegram itself\nlets a bot send about 30 messages a second across chats."
    )


def main() -> None:
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)  # a killed process's cut requests
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smaller run (about a minute)")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="the model's answer time (0: CPU-bound)"
    )
    parser.add_argument("--slots", type=int, default=16, help="agent.max_concurrent_turns")
    parser.add_argument("--paced", type=int, default=100, help="messages of the latency part")
    parser.add_argument("--rate", type=float, default=5.0, help="their rate, per second")
    parser.add_argument("--takeovers", type=int, default=3)
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["throughput", "latency", "takeover"],
        choices=["throughput", "latency", "takeover"],
    )
    if "--quick" in sys.argv:  # smaller defaults; a flag given still counts
        parser.set_defaults(messages=300, chats=30, processes=[1, 2], paced=25, takeovers=2)
    args = parser.parse_args()
    bindir = server_bin()
    if bindir is None:
        raise SystemExit("no PostgreSQL server here (Debian: apt-get install postgresql-15)")
    print(f"{os.cpu_count()} cores; PostgreSQL from {bindir}\n")
    cluster = PostgresCluster(bindir).start(*AS_IN_PRODUCTION)
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        with tempfile.TemporaryDirectory(prefix="pinclaw-bench-") as folder:
            root = Path(folder)
            rows = throughput(args, root, cluster) if "throughput" in args.parts else []
            if "latency" in args.parts:
                latency(args, root, cluster)
            if "takeover" in args.parts:
                takeover(args, root, cluster)
            predict(rows)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
