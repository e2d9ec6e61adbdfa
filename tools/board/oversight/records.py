"""What pinclaw writes down about its boards, and the store it writes it to.

Three kinds of rows, all in state.db: each change of an output (an `Actuation`: who asked,
in which chat, through which tool or by which rule, the value asked and the state the board
confirmed), each deadline by which an output must be off again (a `Deadline`, so a restart
still switches it off on time), and the kept readings of watched pins. tools/ knows nothing
of state.db: the runtime hands in a `HardwareRecords` (agent/durable/hardware_records.py);
without one nothing is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Protocol

# `source` of what pinclaw did by itself, not asked in a chat
MAX_ON = "max_on_s"
PINCLAW = "pinclaw"


@dataclass(frozen=True)
class Actuation:
    """One change of an output."""

    at: float  # UTC epoch seconds
    board: str
    pin: str  # as people read it: "pump (pin 8)"
    value: str  # what was asked: "high", "PWM 50%", "servo 90°"
    state: str  # what the board confirmed ("high"), or "not confirmed: why"
    source: str  # the tool ("gpio_write") or the rule ("max_on_s", "safe state at start")
    who: str = ""  # who asked ("Ann (@ann)"), or "pinclaw"
    chat: str = ""  # the chat it was asked in (ChatRef.key)

    def line(self, zone: tzinfo, *, with_board: bool = True) -> str:
        """`2025-05-01 14:03:07 pump (pin 8) on garage: high, confirmed high; gpio_write by
        Ann in telegram:42:`, the time in `zone`."""
        when = datetime.fromtimestamp(self.at, zone).strftime("%Y-%m-%d %H:%M:%S")
        where = f" on {self.board}" if with_board else ""
        confirmed = self.state if self.state.startswith("not ") else f"confirmed {self.state}"
        by = f" by {self.who}" if self.who else ""
        chat = f" in {self.chat}" if self.chat else ""
        return f"{when} {self.pin}{where}: {self.value}, {confirmed}; {self.source}{by}{chat}"


@dataclass(frozen=True)
class Deadline:
    """An output that must be off again by `due` (UTC epoch seconds)."""

    board: str
    pin: str  # the board's spelling, as text: "8" or "A0"
    label: str  # "pump (pin 8)"
    due: float
    chat: str  # the chat that switched it on: told when pinclaw switches it off
    set_at: float


class HardwareRecords(Protocol):
    """Where the actuation log, the deadlines and the kept readings live."""

    async def log(self, entry: Actuation) -> None: ...

    async def actuations(
        self,
        *,
        board: str | None = None,
        pin: str | None = None,
        since: float | None = None,
        limit: int = 50,
    ) -> list[Actuation]:
        """The newest first; `pin` as its label ("pump (pin 8)")."""
        ...

    async def set_deadline(self, deadline: Deadline) -> None: ...

    async def clear_deadline(self, board: str, pin: str) -> None: ...

    async def deadlines(self) -> list[Deadline]: ...

    async def keep_readings(
        self, board: str, pin: str, rows: Sequence[tuple[float, float]], forget_before: float
    ) -> None:
        """Add (time, value) rows; drop the pin's rows older than `forget_before`."""
        ...

    async def readings(self, board: str, pin: str, since: float) -> list[tuple[float, float]]:
        """(time, value) rows since `since`, oldest first."""
        ...
