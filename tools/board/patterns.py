"""Light patterns on digital outputs, timed on the host: what ran, and the pin left at rest.

A pattern is a task writing (level, seconds) steps through the Board. Each run keeps count
of the cycles done and the level the board read back, so a tool result can say what
happened rather than what was asked. A pattern stopped by a write or a new pattern on its
pin leaves the pin to that write; one cut for any other reason (the process exits, the task
is cancelled) writes the rest level (low) first. `finish()` lets finite patterns end before
the process exits, within a bound, and cuts the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tools.board.link.firmata_types import BoardError

log = logging.getLogger(__name__)
REST = 0  # every pattern ends low
Writer = Callable[[int, int], Awaitable[float]]  # (pin, level) -> the level read back


@dataclass
class PatternRun:
    """One pattern on one pin, and how far it got."""

    pin: int
    name: str
    steps: tuple[tuple[int, float], ...]
    repeat: int  # 0: until stopped
    cycles: int = 0
    level: float | None = None  # as the board last read it back; None before, or during, a write
    ended: str = ""  # "" while running, else "completed" or why it stopped
    rest_on_stop: bool = True
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.task is None or self.task.done()

    def outcome(self) -> str:
        """'ran 5 times' or 'stopped after 2 of 5 times: why'."""
        if self.ended == "completed":
            return f"ran {self.cycles} time{'s' if self.cycles != 1 else ''}"
        of = f" of {self.repeat}" if self.repeat else ""
        return f"stopped after {self.cycles}{of} times: {self.ended or 'still running'}"


class Patterns:
    """The running patterns of one board, at most one per pin."""

    def __init__(self, write: Writer) -> None:
        self._write = write
        self._runs: dict[int, PatternRun] = {}

    @property
    def running(self) -> dict[int, PatternRun]:
        return {pin: run for pin, run in self._runs.items() if not run.done}

    def start(
        self, pin: int, name: str, steps: Sequence[tuple[int, float]], repeat: int
    ) -> PatternRun:
        """Start a pattern (the caller stopped any other on the pin, holding the board lock)."""
        run = PatternRun(pin, name, tuple(steps), repeat)
        run.task = asyncio.create_task(self._run(run), name=f"{name} on pin {pin}")
        self._runs[pin] = run
        return run

    def stop(self, pin: int, why: str, *, rest: bool) -> PatternRun | None:
        """Stop the pattern on `pin`; `rest=False` when a write on the pin takes over."""
        run = self._runs.pop(pin, None)
        if run is not None and not run.done and run.task is not None:
            run.ended, run.rest_on_stop = why, rest
            run.task.cancel()
        return run

    async def wait(self, run: PatternRun, within_s: float) -> PatternRun:
        """Wait for `run` to end, at most `within_s`; the pattern runs on if the wait is cut."""
        if run.task is not None:
            await asyncio.wait([run.task], timeout=within_s)
        return run

    async def finish(self, within_s: float) -> list[str]:
        """Let finite patterns end, at most `within_s`; cut the rest at their rest level.
        Returns a line for each pattern that was cut."""
        finite = [run.task for run in self._runs.values() if run.repeat and run.task]
        if finite:
            await asyncio.wait(finite, timeout=within_s)
        notes = []
        for pin, run in list(self._runs.items()):
            if run.done:
                continue
            self.stop(pin, "pinclaw was exiting", rest=True)
            with contextlib.suppress(asyncio.CancelledError):
                if run.task is not None:
                    await run.task
            left = f"pin {pin} left low" if run.level == REST else f"pin {pin} may not be low"
            if run.repeat:
                notes.append(
                    f"The {run.name} on pin {pin} was cut after {run.cycles} of {run.repeat} "
                    f"cycles: it did not end within {within_s:g} s of pinclaw exiting; {left}."
                )
            else:
                log.info("the %s on pin %d (until stopped) ended as pinclaw exits", run.name, pin)
        self._runs.clear()
        return notes

    async def _run(self, run: PatternRun) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        try:
            while run.repeat == 0 or run.cycles < run.repeat:
                for level, seconds in run.steps:
                    run.level = None  # a cut mid-write may still land it: rest the pin then
                    run.level = await self._write(run.pin, level)
                    due += seconds
                    await asyncio.sleep(max(0.0, due - loop.time()))
                run.cycles += 1
            run.ended = "completed"
        except asyncio.CancelledError:
            run.ended = run.ended or "cancelled"
            if run.rest_on_stop and run.level != REST:
                await self._rest(run)
            raise
        except BoardError as exc:
            run.ended, run.level = str(exc), None  # the board is gone: its level is unknown
            log.warning("the %s on pin %d stopped: %s", run.name, run.pin, exc)
        finally:
            if self._runs.get(run.pin) is run and run.ended:
                del self._runs[run.pin]

    async def _rest(self, run: PatternRun) -> None:
        try:
            run.level = await self._write(run.pin, REST)
        except (BoardError, asyncio.CancelledError) as exc:
            log.warning("could not set pin %d low after its %s: %s", run.pin, run.name, exc)
