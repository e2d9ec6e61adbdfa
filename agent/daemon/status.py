"""What `agent run` says of itself without -v: one line per thing it starts, one when it
stops. The lines go to the "pinclaw" logger at INFO, which `agent/cli/logs.py` shows as plain
`pinclaw: ...` lines on stderr (timestamped with -v, none with -q), so a person starting it by
hand, and a service's journal, see what runs. Standard library only: the CLI's logging setup
imports it for the logger's name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

STATUS_LOGGER = "pinclaw"

_status = logging.getLogger(STATUS_LOGGER)


def say(line: str) -> None:
    """One line of `agent run`'s own (secrets never reach these: names, paths, counts)."""
    _status.info("%s", line)


def counted(count: int, one: str, many: str = "") -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def board_line(port: str, model: str, firmware: str, version: str) -> str:
    """`board on /dev/ttyACM0: Arduino Uno/Nano (ATmega328P), StandardFirmata 2.5`."""
    name = firmware.removesuffix(".ino")
    described = ", ".join(part for part in (model, f"{name} {version}".strip()) if part)
    return f"board on {port}: {described}" if described else f"board on {port}"


def lazy_board_line(port: str) -> str:
    """A board connected at its first use (no `connect_on_start`)."""
    where = "the first Arduino port found" if port == "auto" else port
    return f"board on {where}, connected when a tool first uses it"


@dataclass(frozen=True)
class Proactive:
    """What the scheduler and the pin watcher took on at start."""

    schedules: int
    watches: int | None  # None: no watcher (no board, or `[watches]` off)
    heartbeat_minutes: float | None  # None: no heartbeat row

    def line(self) -> str:
        """`3 schedules, 1 pin watch, heartbeat every 30 min` (`no schedules yet` at first)."""
        parts = [counted(self.schedules, "schedule") if self.schedules else "no schedules yet"]
        if self.watches:
            parts.append(counted(self.watches, "pin watch", "pin watches"))
        if self.heartbeat_minutes is not None:
            parts.append(f"heartbeat every {self.heartbeat_minutes:g} min")
        return ", ".join(parts)
