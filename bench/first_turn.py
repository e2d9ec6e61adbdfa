"""A new home's first turn on a real model, as a person meets it: how long `agent run -m`
takes when nothing of pinclaw's prompt is read yet (cold), and through a daemon that read
its prompt ahead at start (`llm.read_ahead`, agent/daemon/warmup.py).

Each run takes a fresh home (`agent init`) whose AGENTS.md starts with a line of its own, so
no cache of the server (llama-server also keeps earlier prompts in RAM) holds the prompt
past the sections before the workspace files (about 230 of its 1,400 tokens), and times
- cold: `agent run -m MESSAGE --no-daemon`, start to exit: the rest of the first request is
  read, then the reply written;
- read ahead: `agent run` started, its log waited for until the read-ahead's line (how long
  the server took is printed too), then the same one-shot through the daemon, start to exit.

    bash ../shared/real-model/setup.sh --serve 8091 &
    .venv/bin/python bench/first_turn.py --api-base http://127.0.0.1:8091/v1 \\
        --model openai/qwen2.5-coder-1.5b [--runs 3] [--dispatcher native|xml]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MESSAGE = "Reply with one word: ready"
READ_AHEAD = re.compile(r"read the cli prompt ahead in ([\d.]+) s")


def environment(args: argparse.Namespace, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
    if args.dispatcher:
        env["PINCLAW_AGENT__TOOL_DISPATCHER"] = args.dispatcher
    return env | {
        "PINCLAW_HOME": str(home),
        "PINCLAW_AGENT__WARM_START_S": "0",  # cold is cold (agent/warm would save ~0.5 s)
        "PINCLAW_LLM__MODEL": args.model,
        "PINCLAW_LLM__API_BASE": args.api_base,
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "x"),
    }


def agent(*argv: str) -> list[str]:
    return [sys.executable, "-m", "agent", *argv]


def fresh_home(args: argparse.Namespace, folder: str) -> tuple[dict[str, str], Path]:
    """`agent init` in a new home whose AGENTS.md no server has read before."""
    home = Path(folder) / "home"
    env = environment(args, home)
    subprocess.run(agent("init"), env=env, cwd=REPO, check=True, capture_output=True)
    agents = home / "workspace" / "AGENTS.md"
    agents.write_text(f"- This home is {uuid.uuid4()}.\n{agents.read_text()}")
    return env, home


def one_shot(env: dict[str, str], timeout: float, *flags: str) -> float:
    """`agent run -m MESSAGE`: seconds from start to exit; the run must answer."""
    started = time.monotonic()
    done = subprocess.run(
        agent("run", "-m", MESSAGE, *flags),
        env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    took = time.monotonic() - started
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"the one-shot did not answer ({done.returncode}):\n{done.stderr}")
    return took


def through_read_ahead(env: dict[str, str], home: Path, timeout: float) -> tuple[float, float]:
    """The daemon started and its read-ahead waited for: (the server's read-ahead seconds, the
    one-shot's seconds through the daemon)."""
    log = home / "daemon.log"
    with log.open("wb") as out:
        command = agent("-v", "run")
        daemon = subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + timeout
        while not (found := READ_AHEAD.search(log.read_text(errors="replace"))):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"no read-ahead:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        took = one_shot(env, timeout)
        if "one-shot from the local socket" not in log.read_text(errors="replace"):
            raise SystemExit("the one-shot was not answered by the daemon")
        return float(found.group(1)), took
    finally:
        daemon.terminate()
        daemon.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen2.5-coder-1.5b")
    parser.add_argument("--api-base", default="http://127.0.0.1:8091/v1")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dispatcher", choices=["native", "xml"], help="agent.tool_dispatcher")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    cold, ahead, warm = [], [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pinclaw-first-turn-") as folder:
            env, _ = fresh_home(args, folder)
            cold.append(one_shot(env, args.timeout, "--no-daemon"))
        with tempfile.TemporaryDirectory(prefix="pinclaw-first-turn-") as folder:
            env, home = fresh_home(args, folder)
            read, took = through_read_ahead(env, home, args.timeout)
            ahead.append(read)
            warm.append(took)
        print(f"run {run + 1}: cold {cold[-1]:5.1f} s   read ahead in {read:5.1f} s, "
              f"then the first turn {took:5.1f} s", flush=True)  # fmt: skip
    print(f"first turn in a new home, medians of {args.runs}: cold {statistics.median(cold):.1f} s;"
          f" through a daemon that read ahead {statistics.median(warm):.1f} s"
          f" (its read-ahead {statistics.median(ahead):.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
