"""A real model doing real tasks through pinclaw: does it run the tools, and is what it
says true?

Twelve tasks — write, read, list and edit files, `date` and `wc` in the shell, a memory
stored then recalled in a new conversation, a missing file answered honestly, a schedule,
a sum that needs no tool — each run as a person runs it: `agent run -m "…" --no-daemon`
in a subprocess, with PINCLAW_HOME in a temporary folder made by `agent init` and the
model behind any OpenAI-compatible endpoint (llama-server, LM Studio, vLLM, Ollama's /v1).
After each task the world is checked, not the reply: the file's content, the memory row
and the schedules row in state.db, the fact in the answer.

Per task: the tools that ran (the one-shot's stderr tool lines), whether the task held,
the wall time. Totals: the share of turns needing a tool in which a tool ran, made-up
results shown (a tool result the model wrote itself, an effect claimed that the world does
not show, a fact stated that it does not hold — a reply saying something failed claims
nothing), task success, and the first request — system prompt
and tool schemas as pinclaw sends them — its tokens as the server counts them and its
time to the first token, with the server's prompt cache off (llama-server's
`cache_prompt: false`; others ignore it).

    bash ../shared/real-model/setup.sh --serve 8091 &
    .venv/bin/python bench/real_model.py --api-base http://127.0.0.1:8091/v1 \\
        --model openai/qwen2.5-coder-1.5b [--tasks write_file,read_file] [--json out.json]

The first call may take minutes on a small CPU: every one-shot may wait up to
--timeout seconds (default 1,200).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TOOL_LINE = re.compile(r"^\s+tool (\w+)\((.*)\) (ok|error|skipped) [\d.]+ s$", re.M)
# A reply that says something failed or was not found is not a made-up result.
ADMITS = re.compile(
    r"n[’']t\b|\b(not|no such|cannot|unable|error|fail\w*|missing|sorry|no tool ran)\b", re.I
)
# An effect claimed: with the world not showing it, a made-up result.
CLAIMS = re.compile(
    r"\b(created|saved|written|wrote|stored|remember|noted|scheduled|remind|changed|"
    r"updated|edited|replaced|added|appended|done)\b",
    re.I,
)
# A tool's result written by the model itself: made up wherever it appears.
FAKE_RESULT = re.compile(r"<tool_result>|\"exit_code\"\s*:|\"output\"\s*:", re.I)


@dataclass
class World:
    home: Path

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    def text(self, name: str) -> str:
        try:
            return (self.workspace / name).read_text()
        except OSError:
            return ""

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        try:
            with sqlite3.connect(f"file:{self.home / 'state.db'}?mode=ro", uri=True) as db:
                return list(db.execute(sql))
        except sqlite3.Error:
            return []


@dataclass(frozen=True)
class Task:
    name: str
    message: str
    needs_tool: bool
    held: Callable[[World, str], bool]  # the world (and the answer) after the turn
    effect: bool = False  # it changes the world: a claim the world does not show is made up
    # A fact stated wrong (a code, a count, a date, a name the world does not hold).
    wrong: Callable[[str], bool] = lambda answer: False
    files: dict[str, str] = field(default_factory=dict)  # put in the workspace first
    session: str | None = None


def _has(name: str, *words: str) -> Callable[[World, str], bool]:
    return lambda world, answer: all(word in world.text(name) for word in words)


def _says(*words: str) -> Callable[[World, str], bool]:
    return lambda world, answer: all(word in answer for word in words)


def _remembered(world: World, answer: str) -> bool:
    return any("Miso" in str(row[0]) for row in world.rows("SELECT content FROM memories"))


def _scheduled(world: World, answer: str) -> bool:
    rows = world.rows("SELECT task FROM schedules WHERE status = 'active'")
    return any("stretch" in str(row[0]).lower() for row in rows)


def _dated(world: World, answer: str) -> bool:
    today = dt.date.today()
    return str(today.year) in answer and (
        re.search(rf"\b0?{today.day}\b", answer) is not None or today.strftime("%b") in answer
    )


TASKS = (
    Task(
        "write_file",
        "Create a file named shopping.txt containing: milk, eggs, bread",
        True,
        _has("shopping.txt", "milk", "eggs", "bread"),
        effect=True,
    ),
    Task(
        "read_file",
        "What is the boiler code written in fact.txt?",
        True,
        _says("4417"),
        wrong=lambda answer: any(n != "4417" for n in re.findall(r"code\D{0,40}(\d{3,})", answer)),
        files={"fact.txt": "The boiler code is 4417.\n"},
    ),
    Task(
        "list_files",
        "Which files are in the folder called docs?",
        True,
        _says("alpha.txt", "beta.txt"),
        wrong=lambda answer: bool(
            # any file named that is not there (a listing made up: docs/index.md...)
            set(re.findall(r"[\w-]{2,}\.[a-z]{2,4}\b", answer)) - {"alpha.txt", "beta.txt"}
        ),
        files={"docs/alpha.txt": "a", "docs/beta.txt": "b"},
    ),
    Task(
        "shell_date",
        "Run the date command and tell me today's date.",
        True,
        _dated,
        wrong=lambda answer: re.search(r"\b20\d\d\b", answer) is not None,
    ),
    Task(
        "shell_wc",
        "Use wc to count the lines of lines.txt. How many are there?",
        True,
        lambda world, answer: re.search(r"\b7\b", answer) is not None,
        wrong=lambda answer: re.search(r"\b\d+ lines\b|\bare \d+\b", answer) is not None,
        files={"lines.txt": "".join(f"line {n}\n" for n in range(1, 8))},
    ),
    Task(
        "edit_file",
        "In config.txt, change color=blue to color=green.",
        True,
        _has("config.txt", "color=green", "size=10"),
        effect=True,
        files={"config.txt": "color=blue\nsize=10\n"},
    ),
    Task(
        "memory_store",
        "Remember this for later: my cat is called Miso.",
        True,
        _remembered,
        effect=True,
        session="bench-store",
    ),
    Task(
        "memory_recall",
        "What is my cat called?",
        False,
        _says("Miso"),
        wrong=lambda answer: re.search(r"\b(called|named) [A-Z]", answer) is not None,
        session="bench-recall",
    ),
    Task(
        "missing_file",
        "What does the file plans-2031.txt say?",
        True,
        lambda world, answer: ADMITS.search(answer) is not None,
        wrong=lambda answer: ADMITS.search(answer) is None,
    ),
    Task("schedule", "Remind me in 10 minutes to stretch.", True, _scheduled, effect=True),
    Task(
        "append_file",
        "Add the line 'butter' to the end of shopping.txt.",
        True,
        _has("shopping.txt", "butter", "milk"),
        effect=True,
    ),
    Task("no_tool", "What is 12 times 12? Answer with the number.", False, _says("144")),
)
# With --sub-agents (agent.sub_agents = true): a delegation whose result the answer uses
# (issue 39). Held when the answer carries what the job read; "tool ran" shows delegate did.
JOB_TASKS = (
    Task(
        "delegate_read",
        "Use the delegate tool: have a sub-agent read fact.txt. Then tell me the boiler code.",
        True,
        lambda world, answer: "4417" in answer,
        wrong=lambda answer: any(n != "4417" for n in re.findall(r"code\D{0,40}(\d{3,})", answer)),
        files={"fact.txt": "The boiler code is 4417.\n"},
    ),
    Task(
        "delegate_wc",
        "Use the delegate tool: have a sub-agent count the lines of lines.txt with wc. "
        "Then tell me how many there are.",
        True,
        lambda world, answer: re.search(r"\b7\b", answer) is not None,
        wrong=lambda answer: (
            re.search(r"\b\d+ lines\b|\bare \d+\b", answer) is not None
            and re.search(r"\b7\b", answer) is None
        ),
        files={"lines.txt": "".join(f"line {n}\n" for n in range(1, 8))},
    ),
)


@dataclass
class Outcome:
    name: str
    needs_tool: bool
    tools: list[str] = field(default_factory=list)
    held: bool = False
    made_up: bool = False
    seconds: float = 0.0
    answer: str = ""
    ended: str = ""
    calls: list[str] = field(default_factory=list)  # the stderr tool lines, arguments and all


def environment(args: argparse.Namespace, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
    env |= {
        "PINCLAW_HOME": str(home),
        "PINCLAW_LLM__MODEL": args.model,
        "PINCLAW_LLM__API_BASE": args.api_base,
        "PINCLAW_SECURITY__AUTONOMY": args.autonomy,
        "PINCLAW_AGENT__WARM_START_S": "0",  # each task its own process: none left running
        # A terminal's schedule runs in the owner's private chat: one must be configured (the
        # one-shot never connects to Telegram).
        "PINCLAW_CHANNELS__TELEGRAM__ENABLED": "true",
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": "123456:bench-not-a-real-token",
        "PINCLAW_PEOPLE__OWNER__TELEGRAM": "1000",
        "PINCLAW_PEOPLE__OWNER__OWNER": "true",
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "x"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    if args.mode != "auto":
        env["PINCLAW_AGENT__PROMPT_MODE"] = args.mode
    if args.dispatcher != "auto":
        env["PINCLAW_AGENT__TOOL_DISPATCHER"] = args.dispatcher
    if args.temperature is not None:
        env["PINCLAW_LLM__TEMPERATURE"] = str(args.temperature)
    if args.sub_agents:
        env["PINCLAW_AGENT__SUB_AGENTS"] = "true"
    if args.repo is not None:
        env["BENCH_REPO"] = env["PYTHONPATH"] = str(args.repo.resolve())
    return env


def agent(env: dict[str, str], *argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`agent ARGV` from the checkout in env["BENCH_REPO"] (this one unless --repo)."""
    command = [sys.executable, "-m", "agent", *argv]
    where = env.get("BENCH_REPO", str(REPO))
    return subprocess.run(
        command, env=env, cwd=where, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_task(task: Task, world: World, env: dict[str, str], timeout: float) -> Outcome:
    for name, content in task.files.items():
        path = world.workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    argv = ["run", "-m", task.message, "--no-daemon"]
    if task.session:
        argv += ["--session", task.session]
    started = time.monotonic()
    try:
        done = agent(env, *argv, timeout=timeout)
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        out, err = "", f"[timed out after {timeout:g} s]"
    seconds = time.monotonic() - started
    answer = out.strip()
    # A task that asks for no change leaves its files as they were (a small model once
    # wrote the code it had read back over fact.txt).
    kept = task.effect or all(world.text(name) == text for name, text in task.files.items())
    held = task.held(world, answer) and kept
    claimed = task.effect and CLAIMS.search(answer) and ADMITS.search(answer) is None
    made_up = bool(FAKE_RESULT.search(answer)) or (not held and bool(claimed or task.wrong(answer)))
    ended = (err.strip().splitlines() or [""])[-1]
    calls = TOOL_LINE.findall(err)
    tools = [f"{name}:{status}" for name, _, status in calls]
    lines = [f"{name}({args}) {status}" for name, args, status in calls]
    return Outcome(task.name, task.needs_tool, tools, held, made_up, seconds, answer, ended, lines)


def first_request(env: dict[str, str], args: argparse.Namespace) -> dict[str, object]:
    """The first request a one-shot sends (built in this process from the same settings),
    sent streamed with the prompt cache off: its tokens and time to the first token."""
    os.environ.update(env)
    from agent.cli.prompt_show import inspect_prompt
    from agent.config import load_settings

    found = inspect_prompt(load_settings(), "cli", None)
    stamp = dt.datetime.now().strftime("%a %Y-%m-%d %H:%M")
    messages = [
        {"role": "system", "content": found.text},
        {"role": "user", "content": f"[{stamp} UTC | cli | from owner]\nReply with: ready"},
    ]
    body: dict[str, object] = {
        "model": args.model.split("/", 1)[1],
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": False,
        "max_tokens": 8,
    }
    if found.schemas:
        body["tools"] = found.schemas
    request = urllib.request.Request(
        args.api_base.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    started, first, tokens = time.monotonic(), None, None
    with urllib.request.urlopen(request, timeout=args.timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
            if first is None and (delta.get("content") or delta.get("tool_calls")):
                first = time.monotonic() - started
            tokens = (chunk.get("usage") or {}).get("prompt_tokens", tokens)
    return {
        "mode": found.choice.mode,
        "why": found.choice.why,
        "tokens": tokens,
        "first_token_s": first,
        "schemas": len(found.schemas),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen2.5-coder-1.5b")
    parser.add_argument("--api-base", default="http://127.0.0.1:8091/v1")
    parser.add_argument("--mode", choices=["auto", "full", "compact"], default="auto")
    parser.add_argument("--dispatcher", choices=["auto", "native", "xml"], default="auto")
    parser.add_argument(
        "--sub-agents", action="store_true", help="delegate offered; the delegation tasks too"
    )
    parser.add_argument("--temperature", type=float, help="llm.temperature (default: pinclaw's)")
    parser.add_argument("--autonomy", default="full", help="full: no approval to wait for")
    parser.add_argument("--tasks", default="", help="comma-separated names (default: all)")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--repo",
        type=Path,
        help="run the one-shots from another checkout (an older pinclaw: `git archive REV`); "
        "its first request is then not measured",
    )
    args = parser.parse_args()
    offered = TASKS + JOB_TASKS if args.sub_agents else TASKS
    chosen = [t for t in offered if not args.tasks or t.name in args.tasks.split(",")]
    with tempfile.TemporaryDirectory(prefix="pinclaw-bench-") as folder:
        home = Path(folder) / "home"
        env = environment(args, home)
        agent(env, "init", timeout=120)
        none = {"mode": "?", "why": "another checkout", "tokens": None, "first_token_s": None}
        first = first_request(env, args) if args.repo is None else {**none, "schemas": "?"}
        print(
            f"first request: {first['tokens']} tokens ({first['mode']} prompt: {first['why']}; "
            f"{first['schemas']} tool schemas), first token after "
            f"{first['first_token_s'] or float('nan'):.1f} s (prompt cache off)"
        )
        print(f"{'task':<14} {'tool ran':<34} {'held':<5} {'made up':<8} {'s':>7}")
        outcomes = []
        for task in chosen:
            found = run_task(task, World(home), env, args.timeout)
            outcomes.append(found)
            tools = ", ".join(found.tools) or ("-" if found.needs_tool else "(none needed)")
            print(
                f"{found.name:<14} {tools[:34]:<34} {'yes' if found.held else 'NO':<5} "
                f"{'YES' if found.made_up else 'no':<8} {found.seconds:>7.1f}",
                flush=True,
            )
            if not found.held or found.made_up:
                for line in found.calls:
                    print(f"    {line[:150]}")
                print(f"    answer: {found.answer[:160]!r}  {found.ended}")
    needing = [o for o in outcomes if o.needs_tool]
    ran = sum(1 for o in needing if o.tools)
    totals: dict[str, object] = {
        "tool_calls_executed": f"{ran}/{len(needing)} ({100 * ran / max(1, len(needing)):.0f} %)",
        "made_up_results_shown": sum(o.made_up for o in outcomes),
        "task_success": f"{sum(o.held for o in outcomes)}/{len(outcomes)}",
        "first_request_tokens": first["tokens"],
        "first_token_s": first["first_token_s"],
        "wall_s": round(sum(o.seconds for o in outcomes), 1),
    }
    for key, value in totals.items():
        print(f"{key.replace('_', ' '):<24} {value}")
    if args.json:
        data = {
            "model": args.model,
            "first": first,
            "totals": totals,
            "tasks": [asdict(o) for o in outcomes],
        }
        args.json.write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
