"""The pin-watch tools: watch_pin, list_watches and cancel_watch.

A watch asks the board to report a pin by itself (Firmata's reporting, no polling) and runs a
turn in the chat that set it when the reading crosses a threshold (an analog input) or the
level changes (a digital input). Everything is checked here, before anything is kept: the
pin against the boards' config (tools/board/fleet.py), exactly one condition, thresholds within
the reading's range. Where watches are kept and who listens to the board is the runtime's
business: it hands in a `WatchBook` (agent/proactive/watch_book.py, over the schedules table).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol
from zoneinfo import ZoneInfo

from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.board.pin_names import PinNames, without_board
from tools.board.pin_policy import PinError, PinRef
from tools.proactive.kept_tasks import BookRefused, ended_note, listing, task_refusal
from tools.proactive.schedule_times import format_time, zone_named

FULL_SCALE = 1023  # StandardFirmata's analog readings are 10-bit: 0 to 1023
MAX_INTERVAL_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class WatchSpec:
    """What one watch listens to and when it fires; kept as JSON with the watch."""

    pin: int | str  # the board's spelling: 13 or "A0"
    label: str  # as people read it: "light (A0)"
    mode: str  # how the board reports it: "analog", "input" or "input_pullup"
    above: float | None = None
    below: float | None = None
    changes: bool = False
    hysteresis: float = 0.0  # how far back past the threshold before it can fire again
    min_interval_s: float = 60.0  # the least time between two firings
    board: str = ""  # the board's name, with several boards ("": the only one, or [hardware])

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> WatchSpec:
        return cls(**json.loads(text))

    @property
    def condition(self) -> str:
        """`above 700`, `below 300` or `changes`."""
        if self.above is not None:
            return f"above {self.above:g}"
        if self.below is not None:
            return f"below {self.below:g}"
        return "changes"

    def summary(self) -> str:
        """`light (A0) above 700 (again once below 680), at most every 60 s`."""
        if self.above is not None:
            again = f" (again once below {self.above - self.hysteresis:g})"
        elif self.below is not None:
            again = f" (again once above {self.below + self.hysteresis:g})"
        else:
            again = ""
        return f"{self.label} {self.condition}{again}, at most every {self.min_interval_s:g} s"


@dataclass(frozen=True)
class WatchEntry:
    """One watch as the tools and `agent schedules` show it."""

    id: int
    spec: WatchSpec
    task: str
    status: str  # "active" or "cancelled"
    chat_key: str
    set_by: str
    runs: int = 0
    last_run: float | None = None  # UTC epoch of the last firing
    where: str = ""  # where its turns run, when not the calling chat
    note: str = ""  # why it ended
    paused: str = ""  # why it hears nothing now (the board is gone), while active


class WatchRefused(BookRefused):
    """The watch book's refusal, and plan_watch's."""


class WatchBook(Protocol):
    async def add(self, call: ToolCallContext, spec: WatchSpec, task: str) -> WatchEntry:
        """Keep a new watch for the chat of `call` and start it (or raise WatchRefused)."""
        ...

    async def entries(self, call: ToolCallContext) -> list[WatchEntry]:
        """The watches `call` may see, active ones first, then the newest ended ones."""
        ...

    async def cancel(self, call: ToolCallContext, watch_id: int) -> WatchEntry:
        """Cancel an active watch `call` may see (or raise WatchRefused)."""
        ...


def describe_watch(entry: WatchEntry, zone: ZoneInfo) -> str:
    """`#4 light (A0) above 700 (...), fired 2 times, last Tue ...: water the plants`."""
    what = entry.spec.summary()
    if entry.runs:
        last = f", last {format_time(entry.last_run, zone)}" if entry.last_run else ""
        what += f", fired {entry.runs} time{'s' if entry.runs != 1 else ''}{last}"
    if entry.status != "active":
        what += ended_note(entry.status, entry.note)
    elif entry.paused:
        what += f" (paused: {entry.paused})"
    return f"#{entry.id} watch {what}: {entry.task}"


@dataclass(frozen=True)
class WatchDefaults:
    """`[watches]`: the least time between firings (a watch may ask for more, not less) and
    the hysteresis when none is given, in raw reading units."""

    min_interval_s: float = 60.0
    hysteresis: float = 20.0


def plan_watch(
    names: PinNames,
    defaults: WatchDefaults,
    pin: int | str,
    above: float | None = None,
    below: float | None = None,
    changes: bool = False,
    hysteresis: float | None = None,
    min_interval_s: float | None = None,
    board: str | None = None,
) -> WatchSpec:
    """The watch the arguments describe, or a WatchRefused (a PinError's text included)
    naming what to change. Nothing touches the board here."""
    if (above is not None) + (below is not None) + bool(changes) != 1:
        raise WatchRefused(
            "give exactly one condition: above or below (a raw reading 0-1023 of an analog "
            "input), or changes=true (a digital input)"
        )
    interval = _interval(defaults.min_interval_s, min_interval_s)
    try:
        if changes:
            if hysteresis is not None:
                raise WatchRefused("hysteresis is for above/below; leave it out with changes")
            found = names.resolve(pin, "", board)
            if found.ref.mode == "analog":
                raise WatchRefused(
                    f"{found.label} is an analog input: watch it with above or below"
                )
            target = names.resolve(pin, "read", board)
            on = target.board if names.several else ""
            mode = _input_mode(target.ref)
            token, label = target.ref.token, target.label
            return WatchSpec(token, label, mode, changes=True, min_interval_s=interval, board=on)
        target = names.resolve(pin, "analog", board)
    except PinError as exc:
        raise WatchRefused(str(exc)) from None
    ref, label = target.ref, target.label
    on = target.board if names.several else ""
    if ref.mode != "analog" and not isinstance(ref.token, str):
        raise WatchRefused(
            f"{label} is not an analog input: above/below watch an analog pin (A0-A5, or "
            "one configured with mode analog); for a digital input use changes=true"
        )
    threshold = above if above is not None else below
    assert threshold is not None
    if not 0 < threshold < FULL_SCALE:
        raise WatchRefused(
            f"{'above' if above is not None else 'below'} {threshold:g} is out of range: "
            f"readings run 0-{FULL_SCALE}, so give a threshold between 1 and {FULL_SCALE - 1}"
        )
    room = threshold if above is not None else FULL_SCALE - threshold  # to re-arm in
    if hysteresis is None:
        hysteresis = min(defaults.hysteresis, room / 2)
    elif not 0 <= hysteresis < room:
        raise WatchRefused(
            f"hysteresis {hysteresis:g} does not fit: it must be 0 or more and under {room:g}, "
            "or the reading could never move back far enough for the watch to fire again"
        )
    return WatchSpec(ref.token, label, "analog", above, below, False, hysteresis, interval, on)


def _interval(least: float, asked: float | None) -> float:
    if asked is None:
        return least
    if not least <= asked <= MAX_INTERVAL_S:
        raise WatchRefused(
            f"min_interval_s {asked:g} is out of range: give {least:g} ([watches] "
            f"min_interval_s) to {MAX_INTERVAL_S:g} seconds, or leave it out"
        )
    return asked


def _input_mode(ref: PinRef) -> str:
    if ref.mode in ("", "input"):
        return "input"
    if ref.mode == "input_pullup":
        return "input_pullup"
    raise WatchRefused(f"{ref.label} is wired as {ref.mode}: changes watches a digital input")


class WatchTools:
    """watch_pin, list_watches and cancel_watch over a WatchBook (None: this process keeps
    no watches, and every call says so)."""

    def __init__(
        self,
        book: WatchBook | None,
        names: PinNames,
        timezone: str,
        defaults: WatchDefaults = WatchDefaults(),
        *,
        scrub: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._book = book
        self.names = names
        self.defaults = defaults
        self.zone = zone_named(timezone)
        self._scrub = scrub  # the task is stored: nothing secret goes with it

    def tools(self) -> list[FunctionTool]:
        guide = self.names.guide()
        summary = " ".join((self.watch_pin.__doc__ or "").partition("Args:")[0].split())
        watch = self.watch_pin if self.names.several else without_board(self.watch_pin)
        return [
            FunctionTool(watch, name="watch_pin", description=f"{summary} {guide}", writes=True),
            FunctionTool(self.list_watches, name="list_watches"),
            # repeat_safe: a second cancel answers "has already ended"
            FunctionTool(self.cancel_watch, name="cancel_watch", writes=True, repeat_safe=True),
        ]

    async def watch_pin(
        self,
        call: ToolCallContext,
        pin: int | str,
        task: str,
        above: float | None = None,
        below: float | None = None,
        changes: bool = False,
        hysteresis: float | None = None,
        min_interval_s: float | None = None,
        board: str | None = None,
    ) -> ToolResult:
        """Watch a pin and do a task when it happens: an analog input's reading rising above
        or falling below a threshold, or a digital input changing level. The board reports
        the pin by itself; when the condition comes true you get the task, with the reading,
        as a message in this chat, and your reply is sent there. It fires again only once
        the reading has gone back past the threshold by the hysteresis, and never more often
        than the minimum interval. Give exactly one of above, below or changes.

        Args:
            pin: analog name ("A0"), pin number (7) or configured name ("light")
            task: what to do then, as an instruction to yourself ("Tell Alice the soil is dry.")
            above: fire when the raw reading (0-1023; 1023 is 5 V) rises above this
            below: fire when the raw reading falls below this
            changes: true: fire each time a digital input changes level
            hysteresis: raw units the reading must fall back (above) or rise back (below)
                before it can fire again; default [watches] hysteresis (20)
            min_interval_s: the least seconds between two firings; default and minimum
                [watches] min_interval_s
            board: the board's name, when the pin is on several boards
        """
        if self._book is None:
            return ToolResult.error("Pin watches are not kept here; nothing is watched.")
        task = self._scrub(task.strip())
        if (refused := task_refusal(task, "when the watch fires")) is not None:
            return refused
        try:
            condition = (above, below, changes, hysteresis, min_interval_s)
            spec = plan_watch(self.names, self.defaults, pin, *condition, board=board)
            entry = await self._book.add(call, spec, task)
        except WatchRefused as exc:
            return ToolResult.error(f"Not watching: {exc}")
        text = f"Watching: {describe_watch(entry, self.zone)}"
        if entry.where:
            text += f"\nIt fires in {entry.where}."
        if entry.paused:
            text += "\nIt starts by itself once the board is reachable."
        return ToolResult.success(text)

    async def list_watches(self, call: ToolCallContext) -> ToolResult:
        """The pin watches of this chat: the active ones with their ids, conditions and
        firings (and whether the board is there to report), then the latest cancelled."""
        if self._book is None:
            return ToolResult.success("No pin watches are kept here.")
        found = await self._book.entries(call)
        return listing(found, lambda entry: describe_watch(entry, self.zone), "pin watches")

    async def cancel_watch(self, call: ToolCallContext, id: int) -> ToolResult:
        """Stop a pin watch of this chat so it never fires again.

        Args:
            id: its number, as list_watches shows it (4 for "#4")
        """
        if self._book is None:
            return ToolResult.error("No pin watches are kept here.")
        try:
            entry = await self._book.cancel(call, id)
        except WatchRefused as exc:
            return ToolResult.error(str(exc))
        return ToolResult.success(f"Cancelled {describe_watch(entry, self.zone)}")
