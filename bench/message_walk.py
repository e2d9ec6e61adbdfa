"""The walk of one message through pinclaw's modules: which rooms (source files) it passes
through, how often it enters each, and how often it comes back to a room it already left.
A hub shows up as a room entered many times; a tangle as many returns.

    .venv/bin/python bench/message_walk.py [--room agent/runtime/channel_runtime.py]

One message from a private chat on a channel named "telegram" goes in through the runtime's
intake (`submit`, in the task that calls it, until it returns) and then through its turn (in
every task: the chat's queue, the turn, the commit and the courier, until the reply is
handed to the channel). The model and the
platform are in-process doubles (bench/turns.py's), so only pinclaw's own code is walked; a
warm-up message first, so imports and first-time set-up are not counted.

Every call and return in the event loop's thread is seen (sys.setprofile); a step is counted
when the code running moves from one file of agent/, channels/ or tools/ to another. Resuming
a coroutine is a call, so a task switch counts as a step too: the same for every version.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from turns import HandedOver, InstantModel  # noqa: E402

from agent.app import build_app  # noqa: E402
from agent.config import load_settings  # noqa: E402
from agent.runtime.turn_setup import Access  # noqa: E402
from channels.base import ChatRef, IncomingMessage  # noqa: E402

# Who a message is from, worked out from the settings: once per message is enough.
LOOKUPS = ("audience_of", "person_of", "spender_of")
ROOTS = tuple(str(REPO / package) + os.sep for package in ("agent", "channels", "tools"))


def room_of(frame: FrameType | None) -> str | None:
    """The project file a frame runs in, relative to the repository; None outside it."""
    if frame is None:
        return None
    path = frame.f_code.co_filename
    return path[len(str(REPO)) + 1 :] if path.startswith(ROOTS) else None


@dataclass
class Walk:
    """The rooms one phase passed through, in order (a room once per stay)."""

    steps: list[str] = field(default_factory=list)
    task: asyncio.Task[Any] | None = None  # only what runs in this task; None: every task
    lookups: Counter[str] = field(default_factory=Counter)  # calls of LOOKUPS

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.task is not None and asyncio.current_task() is not self.task:
            return
        if event == "call":
            room = room_of(frame)
            if frame.f_code.co_name in LOOKUPS:
                self.lookups[frame.f_code.co_name] += 1
        elif event == "return":
            room = room_of(frame.f_back)
        else:
            return
        if room is not None and (not self.steps or self.steps[-1] != room):
            self.steps.append(room)

    def entries(self) -> Counter[str]:
        return Counter(self.steps)

    def returns(self) -> int:
        """Steps into a room this walk had already been in and left."""
        seen: set[str] = set()
        count = 0
        for room in self.steps:
            count += room in seen
            seen.add(room)
        return count


def report(phase: str, walk: Walk, room: str) -> str:
    entries = walk.entries()
    lookups = ", ".join(f"{name} {walk.lookups[name]}" for name in LOOKUPS)
    figures = f"{len(entries)} | {len(walk.steps)} | {walk.returns()} | {entries[room]}"
    return f"| {phase} | {figures} | {lookups} |"


async def walk_one_message() -> tuple[Walk, Walk]:
    with tempfile.TemporaryDirectory() as home:
        os.environ["PINCLAW_HOME"] = home
        os.environ["PINCLAW_LLM__MODEL"] = "openai/bench"
        os.environ["PINCLAW_LLM__API_KEY"] = "sk-bench"  # never used: the model is a double
        app = await build_app(load_settings())
        app.llm = InstantModel(app.settings.llm)
        channel = HandedOver()
        channel.name = "telegram"
        runtime = app.runtime(channel, Access(open_to_all=True))
        chat = ChatRef("telegram", "42")
        intake, turn = Walk(task=asyncio.current_task()), Walk()
        for n, walk in enumerate((None, (intake, turn))):
            msg = IncomingMessage(
                chat, "42", "Owner", f"what is on my list, {n}?", message_id=str(n)
            )
            if walk is not None:
                sys.setprofile(walk[0])
            await runtime.intake.submit(msg)
            if walk is not None:
                sys.setprofile(walk[1])
            await channel.until(n + 1)
            sys.setprofile(None)
        await runtime.drain(5.0)
        await app.close()
    return intake, turn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--room", default="agent/runtime/channel_runtime.py")
    parser.add_argument("--steps", action="store_true", help="print each phase's rooms in order")
    args = parser.parse_args()
    intake, turn = asyncio.run(walk_one_message())
    print(
        f"| phase | rooms | steps | returns to a room left | entries into {args.room} | lookups |"
    )
    print("|---|---:|---:|---:|---:|---|")
    print(report("intake", intake, args.room))
    print(report("turn", turn, args.room))
    if args.steps:
        for name, walk in (("intake", intake), ("turn", turn)):
            print(f"\n{name}:")
            for room in walk.steps:
                print(f"  {room}")


if __name__ == "__main__":
    main()
