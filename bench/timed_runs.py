"""Timing commands for bench/startup.py and bench/peers.py: wall time and peak RSS of each
run, the machine's load beside each figure, and the check that a one-shot really answered
the fake LLM (a run that failed, or answered from somewhere else, must not be timed as if
it had)."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from fakes.llm_server import FakeLLM, echo

REPO = Path(__file__).resolve().parent.parent

# Runs a command N times and reports each run's wall time and peak RSS. It runs in a small
# process of its own: on Linux a child's peak RSS starts at its parent's size (fork and exec
# carry the high-water mark over), and the bench, with the fake LLM loaded, is bigger than
# the client being measured. argv: runs, a file for the child's stdout ("" for none; its
# stderr goes to that name + ".err"), the command.
MEASURE = """
import json, os, subprocess, sys, time
runs, out, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
found = []
for _ in range(runs):
    stdout = open(out, "wb") if out else subprocess.DEVNULL
    stderr = open(out + ".err", "wb") if out else subprocess.DEVNULL
    started = time.perf_counter()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(" ".join(command) + f" exited {os.waitstatus_to_exitcode(status)}")
    found.append((time.perf_counter() - started, usage.ru_maxrss / 1024))
print(json.dumps(found))
"""

Run = tuple[float, float]  # wall seconds, peak RSS MiB


def timed(
    command: list[str], env: dict[str, str], runs: int = 1, out: Path | None = None
) -> list[Run]:
    """Wall seconds and peak RSS (MiB) of each of `runs` runs of `command`; a run that
    exits non-zero ends the bench with its stderr (when `out` keeps it)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(runs), str(out or ""), *command],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        said = out.with_name(out.name + ".err").read_text()[-3000:] if out else ""
        raise SystemExit(f"{done.stderr}{said}")
    return [(wall, rss) for wall, rss in json.loads(done.stdout)]


def load() -> float:
    """The machine's load (one-minute average): the figures move with it."""
    return os.getloadavg()[0]


@dataclass
class Figures:
    """The runs behind one printed row, with the load seen before each and after the last."""

    runs: list[Run] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def add(self, found: list[Run], load_before: float) -> None:
        self.runs += found
        self.loads += [load_before, load()]

    @property
    def wall_ms(self) -> float:
        return statistics.median(wall for wall, _ in self.runs) * 1000

    @property
    def rss_mib(self) -> float:
        return statistics.median(rss for _, rss in self.runs)

    def row(self, name: str, note: str = "", rss: bool = True) -> str:
        """`name  median ms  [peak RSS]  (runs; load lo–hi)`."""
        memory = f"   peak RSS {self.rss_mib:4.0f} MiB" if rss else ""
        loads = f"load {min(self.loads):.1f}–{max(self.loads):.1f}"
        return f"{name:27} {self.wall_ms:6.0f} ms{memory}   ({len(self.runs)}{note}; {loads})"


def batch(command: list[str], env: dict[str, str], runs: int) -> Figures:
    """`runs` runs of a command whose output is not checked (`python -c pass`, `--help`)."""
    figures = Figures()
    figures.add(timed(command, env, runs), load())
    return figures


_words = itertools.count(1)


@dataclass(frozen=True)
class OneShot:
    """How to run one client's one-shot: a fresh home each run (made, untimed, by `home`,
    which yields its folder and the environment that uses it) and the command that sends
    `message`."""

    name: str
    home: Callable[[], AbstractContextManager[tuple[Path, dict[str, str]]]]
    command: Callable[[str], list[str]]


def answered(one_shot: OneShot, llm: FakeLLM, figures: Figures) -> None:
    """One timed run of `one_shot` in a fresh home, added to `figures` only if it answered:
    it exited 0, the fake received a request carrying this run's own message, and the
    fake's reply to that request is in the run's stdout. Anything else ends the bench."""
    message = f"hello-{next(_words)}"
    with one_shot.home() as (folder, env):
        out = folder / "one-shot.out"
        seen = len(llm.requests)
        load_before = load()
        found = timed(one_shot.command(message), env, out=out)
        printed = out.read_text(errors="replace")
        carrying = [r for r in llm.requests[seen:] if message in json.dumps(r["messages"])]
        if not carrying:
            raise SystemExit(f"{one_shot.name}: the fake LLM got no request for {message!r}")
        reply = echo(carrying[-1]).content or ""
        if reply not in printed:
            raise SystemExit(f"{one_shot.name}: {reply!r} is not in its stdout:\n{printed}")
    figures.add(found, load_before)
