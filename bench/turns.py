"""Chats at once through the daemon: N chats each send one message through the fake
Telegram server; the fake LLM answers each after 200 ms. Reports messages per second, the
runtime's own overhead per turn (end to end minus the LLM's 200 ms), and the daemon's RSS.
Every message goes through the durable inbox and outbox, as it always does now.

    .venv/bin/python bench/turns.py [--chats 1 100 1000] [--rate 25]

By default every chat sends at the same instant (a burst): those rows measure the turn
queue, not the runtime. With max_concurrent_turns = 16 and 200 ms per answer no more than
16 / 0.2 s = 80 messages a second can be answered, so in a burst of N most turns wait for a
slot and that wait counts as overhead. --rate spreads the messages over time, as real chats
do: those rows are the ones to hold against the overhead goals.

The overhead is split where the LLM request arrives: "in" is from the message being put on
the fake Telegram server to the fake LLM receiving the request (long poll, intake commit,
the chat's queue, history, prompt, LiteLLM), "out" from the LLM's answer to the reply
reaching the fake Telegram server (LiteLLM, the turn commit, the courier, sendMessage).

The daemon runs as `agent run` in its own process with the default settings, under the
probe of bench/durability.py, which logs what each state.db operation takes; a second table
gives those figures per run. The fakes run in this process.

First, unless `--own 0`: pinclaw's own work per message, without the model and the
platform. The same runtime runs in this process with doubles that cost nothing (the model
answers at once, a part counts as sent when handed over), one message at a time; the CPU of
every thread is counted (state.db's and auto-recall's included), so what is left is ours:
intake, the inbox, auto-recall, the history, the prompt, the turn, the outbox, the courier.
`--chats` with no number runs only that.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from durability import probe_summary, quantile  # noqa: E402
from fakes.llm_server import FakeLLM, Reply, echo  # noqa: E402
from fakes.telegram_server import FakeTelegram  # noqa: E402

from agent.app import build_app  # noqa: E402
from agent.config import load_settings  # noqa: E402
from agent.model.client import LLMClient  # noqa: E402
from agent.model.responses import LLMResponse, Message  # noqa: E402
from agent.runtime.turn_setup import Access  # noqa: E402
from channels.base import ChatRef, IncomingMessage, OutgoingPart  # noqa: E402
from channels.terminal import TerminalChannel  # noqa: E402

LLM_LATENCY_S = 0.2
FIRST_CHAT = 10_000
DB_COLUMNS = ("intake commit", "turn commit", "mark_sent commit", "COMMIT alone", "reads")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Arrivals:
    """The fake LLM's responder: notes when each chat's request arrives, then echoes."""

    pattern = re.compile(r"hello from (\d+)")

    def __init__(self) -> None:
        self.at: dict[int, float] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        now = time.monotonic()
        found = self.pattern.search(json.dumps(body.get("messages", [])))
        if found:
            with self._lock:
                self.at.setdefault(int(found.group(1)), now)
        return echo(body)


def daemon_env(home: str, llm: FakeLLM, telegram: FakeTelegram, slots: int) -> dict[str, str]:
    return {
        **os.environ,
        "PINCLAW_HOME": home,
        "PINCLAW_LLM__MODEL": "openai/bench",
        "PINCLAW_LLM__API_BASE": llm.base_url,
        "OPENAI_API_KEY": "sk-bench-not-real",
        "PINCLAW_CHANNELS__TELEGRAM__ENABLED": "true",
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": telegram.token,
        "PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS": '["*"]',
        "PINCLAW_CHANNELS__TELEGRAM__API_BASE": telegram.api_base,
        "PINCLAW_CHANNELS__TELEGRAM__FILE_API_BASE": telegram.file_api_base,
        "PINCLAW_AGENT__MAX_CONCURRENT_TURNS": str(slots),
    }


def p50_p99(values: list[float]) -> str:
    return f"{statistics.median(values):>7.1f} {quantile(values, 0.99):>7.1f}"


def run(chats: int, rate: float, concurrency: int) -> tuple[str, str]:
    arrivals = Arrivals()
    with (
        tempfile.TemporaryDirectory() as home,
        FakeLLM(responder=arrivals, latency_s=LLM_LATENCY_S) as llm,
        FakeTelegram() as telegram,
    ):
        probe = Path(home) / "probe.log"
        log = Path(os.environ.get("DAEMON_LOG", os.devnull)).open("w")  # noqa: SIM115
        probed = [sys.executable, str(REPO / "bench" / "durability.py"), "--probe-daemon"]
        daemon = subprocess.Popen(
            [*probed, str(probe), "run"],
            env=daemon_env(home, llm, telegram, concurrency),
            cwd=REPO,
            stderr=log,
        )
        try:
            telegram.inject_message(1, 1, "warm-up")  # imports, prompt, first connection
            telegram.wait_for(lambda m: m.chat_id == 1, timeout=120)
            sent_at: dict[int, float] = {}
            cpu_before, started = cpu_seconds(daemon.pid), time.monotonic()
            for n, chat in enumerate(range(FIRST_CHAT, FIRST_CHAT + chats), start=1):
                sent_at[chat] = time.monotonic()
                telegram.inject_message(chat, chat, f"hello from {chat}")
                if rate:  # on a fixed schedule, so the rate is exact
                    time.sleep(max(0.0, started + n / rate - time.monotonic()))
            replies = telegram.wait_for(
                lambda m: m.chat_id in sent_at, count=chats, timeout=60 + chats * 0.2
            )
            elapsed = max(r.at for r in replies) - started
            cpu_ms = (cpu_seconds(daemon.pid) - cpu_before) * 1000 / chats
            rss = peak_rss_mib(daemon.pid)
            errors = [c for c in telegram.calls if c.status >= 300]
        finally:
            daemon.terminate()
            daemon.wait(30)
            log.close()
        code_from = probe.read_text().splitlines()[0]
        db = probe_summary(probe, started, chats)
    if not code_from.startswith(f"agent {REPO}"):
        raise SystemExit(f"the daemon ran other code than this tree's: {code_from}")
    overhead, inward, outward = [], [], []
    for reply in replies:
        chat = int(reply.chat_id)
        overhead.append((reply.at - sent_at[chat] - LLM_LATENCY_S) * 1000)
        inward.append((arrivals.at[chat] - sent_at[chat]) * 1000)
        outward.append((reply.at - arrivals.at[chat] - LLM_LATENCY_S) * 1000)
    pace = f"{rate:g}/s" if rate else "burst"
    main_row = (
        f"{chats:>6} {pace:>6} {chats / elapsed:>6.1f} {p50_p99(overhead)} {p50_p99(inward)} "
        f"{p50_p99(outward)} {cpu_ms:>4.1f} {rss:>4.0f} {len(errors):>3}"
    )
    db_row = f"{chats:>6} {pace:>6} " + " ".join(
        f"{db[name][0]:>5.2f}/{db[name][1]:<5.1f}" if name in db else f"{'-':>11}"
        for name in DB_COLUMNS
    )
    db_row += f" {db['state.db per message'][0]:>7.1f}"
    full, longest = db["gc"]
    db_row += f" {full:>4.0f} {longest:>7.1f} {db['gc per message'][0]:>6.2f}"
    return main_row, db_row


# -- pinclaw's own work ------------------------------------------------------------------------


class InstantModel(LLMClient):
    """The model's double: answers at once, in this process (no LiteLLM, no HTTP)."""

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Any = None,
        on_text: Any = None,
        on_retry: Any = None,
        model: Any = None,
    ) -> LLMResponse:
        asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        return LLMResponse(f"echo: {str(asked)[-80:]}", (), self.model, 1500, 30, 0.0)


class HandedOver(TerminalChannel):
    """The platform's double: a part counts as delivered when it is handed over."""

    def __init__(self) -> None:
        super().__init__(out=io.StringIO())
        self.delivered = 0
        self.changed = asyncio.Event()

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        self.delivered += 1
        self.changed.set()

    async def until(self, count: int) -> None:
        while self.delivered < count:
            self.changed.clear()
            await self.changed.wait()


async def own_work(messages: int, chats: int) -> tuple[float, float]:
    """CPU and wall ms per message for everything pinclaw does with a message, the model
    and the platform replaced by in-process doubles: intake (the inbox commit), the chat's
    queue, auto-recall, the history, the prompt, the loop, the turn commit, the courier and
    the mark_sent commit; one message at a time, so nothing waits for anything else."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["PINCLAW_HOME"] = home
        os.environ["PINCLAW_LLM__MODEL"] = "openai/bench"
        app = await build_app(load_settings())
        app.llm = InstantModel(app.settings.llm)
        channel = HandedOver()
        runtime = app.runtime(channel, Access(open_to_all=True))
        warm_up = 50
        for n in range(warm_up + messages):
            if n == warm_up:
                cpu, wall = time.process_time(), time.perf_counter()
            chat = ChatRef("cli", str(FIRST_CHAT + n % chats))
            message = f"hello from {chat.chat_id}, message {n}: what is on my list today?"
            await runtime.intake.submit(
                IncomingMessage(chat, "owner", "Owner", message, message_id=str(n))
            )
            await channel.until(n + 1)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await runtime.drain(5.0)
        await app.close()
    return cpu * 1000 / messages, wall * 1000 / messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, nargs="*", default=[1, 100, 1000])
    parser.add_argument(
        "--concurrency", type=int, default=16, help="agent.max_concurrent_turns (16 is the default)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="messages per second across all chats; 0: all at once (a burst: measures the queue)",
    )
    parser.add_argument(
        "--own", type=int, default=1000, help="messages for the own-work row (0: leave it out)"
    )
    args = parser.parse_args()
    if args.own:
        cpu, wall = asyncio.run(own_work(args.own, chats=100))
        print(
            f"own work per message (model, platform: in-process doubles; {args.own} messages "
            f"one at a time): {cpu:.2f} ms CPU, {wall:.2f} ms wall\n"
        )
    if not args.chats:
        return
    if not args.rate:
        ceiling = args.concurrency / LLM_LATENCY_S
        print(
            f"burst: every chat at once; this measures the turn queue ({args.concurrency} slots "
            f"/ {LLM_LATENCY_S * 1000:.0f} ms = {ceiling:.0f} msg/s at most), not the runtime"
        )
    print(
        f"{'':>20} {'overhead ms':^15} {'in ms':^15} {'out ms':^15} {'CPU':>4} {'RSS':>4} "
        f"{'err':>3}\n"
        f"{'chats':>6} {'sent':>6} {'msg/s':>6} {'p50':>7} {'p99':>7} {'p50':>7} {'p99':>7} "
        f"{'p50':>7} {'p99':>7} {'ms':>4} {'MiB':>4} {'':>3}"
    )
    db_rows = []
    for chats in args.chats:
        main_row, db_row = run(chats, args.rate, args.concurrency)
        print(main_row, flush=True)
        db_rows.append(db_row)
    print(
        "\nIn the daemon: state.db, ms p50/p99 per operation (the queue included), and its sum per"
        "\nmessage; the garbage collector: full collections, longest pause, ms per message"
    )
    print(
        f"{'chats':>6} {'sent':>6} "
        + " ".join(f"{name.replace(' commit', ''):>11}" for name in DB_COLUMNS)
        + f" {'ms/msg':>7} {'gc2':>4} {'longest':>7} {'ms/msg':>6}"
    )
    for row in db_rows:
        print(row)


if __name__ == "__main__":
    main()
