"""The way every change of an output goes: interlocks checked, the write confirmed by the
board, the change logged, the pin's max_on_s deadline kept; and what pinclaw changes by
itself (safe states, restores after a reset, a deadline reached) logged the same way.

`Keeper` wraps the runtime's boards (tools/board/fleet.py) for the tools
(tools/board/pin_tools.py). Without records (a test, or `agent prompt show`) nothing is
logged or kept, and the rest works as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time

from tools.background import despite_a_cut
from tools.base import ToolCallContext
from tools.board.fleet import Boards
from tools.board.link.firmata_types import BoardError, PinReading
from tools.board.oversight.interlocks import Interlocks
from tools.board.oversight.on_limits import OnLimits, Tell
from tools.board.oversight.readings import ReadingKeeper
from tools.board.oversight.records import PINCLAW, Actuation, HardwareRecords
from tools.board.pin_names import Target
from tools.board.pin_policy import describe_value
from tools.board.restore import Setting
from tools.board.safe_states import Applied

log = logging.getLogger(__name__)

WRITERS = ("output", "pwm", "servo")


class Keeper:
    """The runtime's boards, with their interlocks, limits, log and kept readings."""

    def __init__(self, boards: Boards, records: HardwareRecords | None = None) -> None:
        self.boards = boards
        self.records = records
        self.interlocks = {name: Interlocks(b.settings) for name, b in boards.boards.items()}
        self.limits = OnLimits(boards, records)
        settings = {name: board.settings for name, board in boards.boards.items()}
        self.readings = ReadingKeeper(records, settings)
        self._tasks: set[asyncio.Task[None]] = set()
        for name, board in boards.boards.items():
            board.on_applied = functools.partial(self._applied, name)
            board.on_reading = functools.partial(self.readings.heard, name)

    @property
    def tell(self) -> Tell | None:
        return self.limits.tell

    @tell.setter
    def tell(self, tell: Tell | None) -> None:
        """How the daemon reaches a chat (max_on_s switched something off)."""
        self.limits.tell = tell

    async def start(self) -> int:
        """The daemon holds the boards: keep their links up, arm the kept deadlines, and
        connect now (in the background) every board with safe states or a deadline. Returns
        how many deadlines were armed."""
        armed = await self.limits.arm_kept()
        waiting = {board for board, _ in self.limits.armed}
        for board in self.boards:
            board.stay_connected = True
            if board.name in waiting or board.has_safe_states:
                board.keep_up()
        return armed

    async def close(self, *, grace_s: float | None = None) -> None:
        """Stop the timers (their deadlines stay written down), close the boards (safe
        states set), and write what is still to be logged or kept."""
        self.limits.stop()
        await self.boards.close(grace_s=grace_s)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.readings.stop()

    async def write(
        self, call: ToolCallContext, tool: str, target: Target, mode: str, value: float
    ) -> tuple[PinReading, str]:
        """Set an output as `tool` asked in `call`'s chat: the reading the board confirmed,
        and a note for the result ("" or when max_on_s switches it off). A call cut off
        while the board acts (a stopped turn, the tool's time limit) still has the write
        logged and its max_on_s deadline kept before the cut goes on: it may have landed."""
        return await despite_a_cut(self._write(call, tool, target, mode, value))

    async def _write(
        self, call: ToolCallContext, tool: str, target: Target, mode: str, value: float
    ) -> tuple[PinReading, str]:
        board = self.boards[target.board]
        asked = Setting(mode, value)
        check = self.interlocks[target.board].check(target.ref) if asked.on else None
        token = target.ref.token
        try:
            if mode == "output":
                reading = await board.digital_write(token, int(value), check=check)
            elif mode == "pwm":
                reading = await board.pwm_write(token, value, check=check)
            else:
                reading = await board.servo_write(token, round(value), check=check)
        except BoardError as exc:
            if str(exc).startswith("Not confirmed"):  # sent, then the link failed
                await self._log(call, tool, target, asked, f"not confirmed: {exc}")
            raise
        state = describe_value(reading.mode, reading.value, note=reading.note)
        await self._log(call, tool, target, asked, state)
        return reading, await self.limits.after_write(target, reading, call.chat_key)

    async def pattern_started(
        self, call: ToolCallContext, tool: str, target: Target, what: str
    ) -> None:
        """A pattern drives the pin now: log it; its deadline (if any) is over."""
        await self.limits.clear(target.board, str(target.ref.token))
        await self._log(call, tool, target, what, "running")

    async def _log(
        self, call: ToolCallContext, tool: str, target: Target, asked: Setting | str, state: str
    ) -> None:
        if self.records is None:
            return
        value = asked if isinstance(asked, str) else asked.value_text()
        entry = Actuation(time.time(), target.board, target.ref.label, value, state, tool)
        try:
            await self.records.log(dataclasses.replace(entry, who=_who(call), chat=call.chat_key))
        except Exception:  # the write happened: a full disk must not turn it into an error
            log.exception("could not log %s %s on %s", target.ref.label, value, target.board)

    def _applied(self, board: str, source: str, applied: list[Applied]) -> None:
        """What a board set by itself (on the event loop): log it; an output now off has
        no deadline any more."""
        task = asyncio.get_running_loop().create_task(self._note_applied(board, source, applied))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _note_applied(self, board: str, source: str, applied: list[Applied]) -> None:
        for item in applied:
            if item.failed or item.setting.mode not in WRITERS:
                continue
            try:
                if not item.setting.on:
                    await self.limits.clear(board, item.spelled)
                if self.records is not None:
                    value = item.setting.value_text()
                    entry = Actuation(time.time(), board, item.label, value, value, source)
                    await self.records.log(dataclasses.replace(entry, who=PINCLAW))
            except Exception:  # the log is not worth a board's recovery
                log.exception("could not log %s on %s (%s)", item.label, board, source)


def _who(call: ToolCallContext) -> str:
    speaker = call.speaker
    who = speaker.name or speaker.id
    return f"{who} (@{speaker.username})" if speaker.username else who
