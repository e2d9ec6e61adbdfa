"""Sub-agents' jobs against an instant in-process model: what a job costs pinclaw itself.

    .venv/bin/python bench/jobs.py [--runs 50]

- end to message: from the moment the job's last model call returns until its result,
  as a message of its own (the job not waited for), is handed to the channel: the loop's
  end, the job's end and outbox row in one transaction, the courier's send and its mark.
- job over inline: one message whose turn makes one tool call (file_list) and answers,
  against one whose turn delegates that same call to a job and waits for it (the job's
  minimal prompt, its own two model calls, its rows), intake to reply handed over.

The model and the platform are in-process doubles (tests/fakes/model_double.py's
FunctionModel, bench/turns.py's HandedOver), so only pinclaw's own work is timed; a few
warm-up messages first. Medians and 95th percentiles in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_requests import last_user_content  # noqa: E402
from fakes.model_double import FunctionModel, text, tool_calls  # noqa: E402
from turns import HandedOver  # noqa: E402

from agent.app import build_app  # noqa: E402
from agent.config import load_settings  # noqa: E402
from agent.runtime.turn_setup import Access  # noqa: E402
from channels.base import ChatRef, IncomingMessage, OutgoingPart  # noqa: E402

WARM_UP = 5


class Stamped(HandedOver):
    """The platform's double, noting when each part was handed over and what it said."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[float, str]] = []

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        self.sent.append((time.perf_counter(), part.text))
        await super().send_part(chat, part)


def is_job(request: dict[str, Any]) -> bool:
    return str(last_user_content(request)).startswith("[Job #")


def answered(request: dict[str, Any]) -> bool:
    """Whether this turn's (or job's) own tool call has been answered already."""
    return request["messages"][-1]["role"] == "tool"


async def measure(runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"end to message": [], "inline": [], "job": []}
    job_ended: list[float] = []
    mode = {"how": "inline"}

    def respond(request: dict[str, Any]) -> Any:
        if is_job(request):
            if answered(request):
                job_ended.append(time.perf_counter())
                return text("the list is short")
            return tool_calls(("file_list", {"path": "."}))
        if answered(request):
            return text("done")
        if mode["how"] == "inline":
            return tool_calls(("file_list", {"path": "."}))
        wait = mode["how"] == "job"
        return tool_calls(("delegate", {"task": "list the workspace", "wait": wait}))

    with tempfile.TemporaryDirectory() as home:
        os.environ["PINCLAW_HOME"] = home
        os.environ["PINCLAW_LLM__MODEL"] = "openai/bench"
        os.environ["PINCLAW_AGENT__SUB_AGENTS"] = "true"
        os.environ["PINCLAW_LLM__API_KEY"] = "sk-bench"  # never used: the model is a double
        app = await build_app(load_settings(), model=FunctionModel(respond, model="openai/bench"))
        channel = Stamped()
        channel.name = "telegram"
        runtime = app.runtime(channel, Access(open_to_all=True))
        n = 0

        async def one(expect: int) -> float:
            nonlocal n
            n += 1
            before, started = channel.delivered, time.perf_counter()
            chat = ChatRef("telegram", str(1000 + n))  # a fresh chat: no history to compact
            msg = IncomingMessage(chat, "42", "Owner", f"list it, {n}", message_id=str(n))
            await runtime.intake.submit(msg)
            await channel.until(before + expect)
            return (channel.sent[-1][0] - started) * 1000

        for how, expect in (("inline", 1), ("job", 1), ("message", 2)):
            mode["how"] = how
            for run in range(WARM_UP + runs):
                job_ended.clear()
                ms = await one(expect)
                if run < WARM_UP:
                    continue
                if how == "message":
                    (sent_at,) = [at for at, said in channel.sent[-2:] if said.startswith("Job #")]
                    figures["end to message"].append((sent_at - job_ended[-1]) * 1000)
                else:
                    figures[how].append(ms)
        await runtime.drain(5.0)
        await app.close()
    return figures


def p50_p95(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.1f} | {p95:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.runs))
    inline, job = statistics.median(figures["inline"]), statistics.median(figures["job"])
    print(f"{args.runs} runs each, ms | median | p95")
    print("|---|---:|---:|")
    print(f"| a job's end to its message handed over | {p50_p95(figures['end to message'])} |")
    print(f"| a message with one inline tool call | {p50_p95(figures['inline'])} |")
    print(f"| the same call delegated to a job, waited for | {p50_p95(figures['job'])} |")
    print(f"| a job's overhead (median) | {job - inline:.1f} | |")


if __name__ == "__main__":
    main()
