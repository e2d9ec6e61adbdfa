"""Chats at once through the daemon: N chats each send one message through the fake
Telegram server; the fake LLM answers each after 200 ms. Reports messages per second, the
runtime's own overhead per turn (end to end minus the LLM's 200 ms), and the daemon's RSS.

    .venv/bin/python bench/turns.py [--chats 1 100 1000] [--rate 20]

By default every chat sends at the same instant (a burst); --rate spreads the messages
over time, as real chats do.

The daemon runs as `agent run` in its own process with the default settings
(max_concurrent_turns = 16, so in a burst most turns wait for a slot: that wait counts as
overhead); the fakes run in this process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_server import FakeLLM  # noqa: E402
from fakes.telegram_server import FakeTelegram  # noqa: E402

LLM_LATENCY_S = 0.2


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(chats: int, rate: float, concurrency: int) -> str:
    with (
        tempfile.TemporaryDirectory() as home,
        FakeLLM(latency_s=LLM_LATENCY_S) as llm,
        FakeTelegram() as telegram,
    ):
        env = {
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
            "PINCLAW_AGENT__MAX_CONCURRENT_TURNS": str(concurrency),
        }
        log = Path(os.environ.get("DAEMON_LOG", os.devnull)).open("w")  # noqa: SIM115
        daemon = subprocess.Popen(
            [sys.executable, "-m", "agent", "run"], env=env, cwd=REPO, stderr=log
        )
        try:
            telegram.inject_message(1, 1, "warm-up")  # imports, prompt, first connection
            telegram.wait_for(lambda m: m.chat_id == 1, timeout=120)
            sent_at: dict[int, float] = {}
            started = time.monotonic()
            for chat in range(10_000, 10_000 + chats):
                sent_at[chat] = time.monotonic()
                telegram.inject_message(chat, chat, f"hello from {chat}")
                if rate:
                    time.sleep(1 / rate)
            replies = telegram.wait_for(
                lambda m: m.chat_id in sent_at, count=chats, timeout=60 + chats * 0.2
            )
            elapsed = max(r.at for r in replies) - started
            overhead = sorted(
                (r.at - sent_at[int(r.chat_id)] - LLM_LATENCY_S) * 1000 for r in replies
            )
            rss = peak_rss_mib(daemon.pid)
            errors = [c for c in telegram.calls if c.status >= 300]
        finally:
            daemon.terminate()
            daemon.wait(30)
            log.close()
    p99 = overhead[min(len(overhead) - 1, int(len(overhead) * 0.99))]
    pace = f"{rate:g}/s" if rate else "burst"
    return (
        f"{chats:>6} {pace:>7} {chats / elapsed:>10.1f} {statistics.median(overhead):>10.1f} "
        f"{p99:>9.1f} {rss:>9.0f} {len(errors):>7}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument(
        "--concurrency", type=int, default=16, help="agent.max_concurrent_turns (16 is the default)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="messages per second across all chats; 0: all at once",
    )
    args = parser.parse_args()
    print(
        f"{'chats':>6} {'sent':>7} {'msg/s':>10} {'ovh p50 ms':>10} {'p99 ms':>9} {'RSS MiB':>9} "
        f"{'errors':>7}"
    )
    for chats in args.chats:
        print(run(chats, args.rate, args.concurrency), flush=True)


if __name__ == "__main__":
    main()
