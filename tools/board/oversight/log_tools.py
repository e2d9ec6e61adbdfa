"""hardware_log and plot_pin: what the boards' outputs did, and a chart of a watched pin.

hardware_log reads the actuation log ("when did the pump last run?"); plot_pin draws a
pin's kept readings (tools/board/oversight/chart.py) into the workspace's charts/ folder,
and the model sends it with a media marker in its reply, as any file of the workspace
(agent/runtime/media.py). Both read only what the Keeper's records hold: without them
(no state.db in this process) they say so.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.base import FunctionTool, ToolCallContext, ToolResult
from tools.board.oversight.chart import render
from tools.board.oversight.keeper import Keeper
from tools.board.pin_names import Target
from tools.board.pin_policy import PinError
from tools.paths import PathRules, PolicyError

MAX_HOURS = 24 * 31.0
MAX_ENTRIES = 200
CHARTS = "charts"
NOT_KEPT = "Nothing is kept here: the actuation log and readings live in the daemon's state.db."


class LogTools:
    """hardware_log and plot_pin over a Keeper's boards and records."""

    def __init__(self, keeper: Keeper, timezone: str) -> None:
        self.keeper = keeper
        try:
            self.zone = ZoneInfo(timezone or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            self.zone = ZoneInfo("UTC")

    def tools(self) -> list[FunctionTool]:
        return [
            FunctionTool(self.hardware_log, name="hardware_log"),
            # It writes a chart of its own into charts/, never a file the owner made.
            FunctionTool(self.plot_pin, name="plot_pin"),
        ]

    def _target(self, pin: int | str, board: str | None) -> Target:
        return self.keeper.boards.names.resolve(pin, "", board)

    async def hardware_log(
        self,
        call: ToolCallContext,
        pin: int | str | None = None,
        board: str | None = None,
        hours: float = 24.0,
        limit: int = 20,
    ) -> ToolResult:
        """What pinclaw changed on the boards' outputs, newest first: when, which pin, the
        value asked and the state the board confirmed, the tool or rule (max_on_s, safe
        state), who asked and in which chat. Answers "when did the pump last run?".

        Args:
            pin: only this pin (a name or number, as for gpio_write); leave out for all
            board: only this board
            hours: how far back, in hours (default 24)
            limit: at most this many entries (default 20, at most 200)
        """
        records = self.keeper.records
        if records is None:
            return ToolResult.error(NOT_KEPT)
        if not 0 < hours <= MAX_HOURS or not 0 < limit <= MAX_ENTRIES:
            return ToolResult.error(
                f"Give hours from 0 to {MAX_HOURS:g} and limit from 1 to {MAX_ENTRIES}."
            )
        try:
            target = self._target(pin, board) if pin is not None else None
            named = self.keeper.boards.names.board_named(board)
        except PinError as exc:
            return ToolResult.error(str(exc))
        where = target.board if target is not None else named
        label = target.ref.label if target is not None else None
        since = time.time() - hours * 3600
        found = await records.actuations(board=where, pin=label, since=since, limit=limit)
        what = target.label if target is not None else "the outputs"
        if not found:
            return ToolResult.success(f"No change of {what} in the last {hours:g} h.")
        several = self.keeper.boards.names.several
        lines = [entry.line(self.zone, with_board=several) for entry in found]
        head = f"Changes of {what} in the last {hours:g} h, newest first ({self.zone.key}):"
        return ToolResult.success("\n".join([head, *lines]))

    async def plot_pin(
        self,
        call: ToolCallContext,
        pin: int | str,
        hours: float = 24.0,
        board: str | None = None,
    ) -> ToolResult:
        """Draw a small PNG chart of a watched pin's readings over the last hours, to send
        in your reply with the marker the result gives. Readings are kept only for pins
        being watched (watch_pin).

        Args:
            pin: analog name ("A0"), pin number or configured name ("light")
            hours: how far back, in hours (default 24)
            board: the board's name, when the pin is on several boards
        """
        records = self.keeper.records
        if records is None:
            return ToolResult.error(NOT_KEPT)
        if not 0 < hours <= MAX_HOURS:
            return ToolResult.error(f"Give hours from 0 to {MAX_HOURS:g}.")
        try:
            target = self._target(pin, board)
        except PinError as exc:
            return ToolResult.error(str(exc))
        since = time.time() - hours * 3600
        points = await records.readings(target.board, str(target.ref.token), since)
        if not points:
            return ToolResult.error(
                f"No readings of {target.label} are kept for the last {hours:g} h: pinclaw "
                "keeps the readings of watched pins only (watch_pin starts one)."
            )
        title = f"{target.label}, last {hours:g} h ({len(points)} readings)"
        image = render(points, title, self.zone)
        try:
            name = _save(call, f"{target.board}-{target.ref.label}", image)
        except (OSError, PolicyError) as exc:
            return ToolResult.error(f"The chart could not be saved in the workspace: {exc}")
        values = [value for _, value in points]
        first, last = (self._when(points[i][0]) for i in (0, -1))
        return ToolResult.success(
            f"Chart of {target.label}: {len(points)} readings from {first} to {last}, lowest "
            f"{min(values):g}, highest {max(values):g}, last {values[-1]:g}. To send it, put "
            f"[IMAGE:{name}] in your reply."
        )

    def _when(self, epoch: float) -> str:
        return datetime.fromtimestamp(epoch, self.zone).strftime("%a %H:%M")


def _save(call: ToolCallContext, what: str, image: bytes) -> str:
    """Write the chart under charts/ in the workspace (a new file, no link followed)."""
    slug = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rules = PathRules.build(call.workspace, ())
    for n in range(100):
        name = f"{CHARTS}/{slug}-{stamp}{f'-{n}' if n else ''}.png"
        try:
            fd = rules.open_beneath(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, make_folders=True)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(image)
        return name
    raise FileExistsError(f"{CHARTS}/{slug}-{stamp}.png")
