"""After a crash: what a pin write cut off by it left on the board, read back, not redone.

A hardware write that was running when pinclaw stopped may or may not have reached the board.
When its turn runs again, the tool journal (agent/durable/tool_journal.py) asks the tool's
`recheck` instead of writing a second time blindly. These rechecks only read: each looks at
the pin as the board holds it now and compares it with what the call would have set. They
live apart from the tools (tools/board/pin_tools.py) because they are a separate job, looking
and never acting, only for a call cut off by a crash; pin_tools.py hands each one to its
FunctionTool.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.base import ToolCallContext, ToolResult
from tools.board.board import BoardError, PinReading
from tools.board.fleet import Boards
from tools.board.pin_policy import PinError, describe_value, parse_level


class PinRechecks:
    """`recheck_<tool>` for each pin-writing tool, with that tool's arguments; nothing is
    written to the board."""

    def __init__(self, boards: Boards) -> None:
        self.boards = boards

    async def _pin_now(self, pin: int | str, use: str, board: str | None) -> tuple[str, PinReading]:
        target = self.boards.names.resolve(pin, use, board)
        reading = await self.boards[target.board].digital_read(target.ref.token, as_output=True)
        value = describe_value(reading.mode, reading.value, note=reading.note) or "no value"
        return f"{target.label} reads {value} (mode {reading.mode})", reading

    async def _read_back(
        self,
        pin: int | str,
        use: str,
        wanted: str,
        holds: Callable[[float], bool],
        board: str | None,
    ) -> ToolResult:
        """The pin's state as the board holds it, against what the write would set."""
        try:
            found, reading = await self._pin_now(pin, use, board)
        except (PinError, BoardError) as exc:
            return ToolResult.error(f"the pin could not be read back ({exc})")
        if reading.mode == use and not reading.note and holds(reading.value):
            return ToolResult.success(f"{found}, as this call sets it.")
        return ToolResult.error(f"{found}, not {wanted} as this call would set it.")

    async def recheck_gpio_write(
        self,
        call: ToolCallContext,
        pin: int | str,
        value: bool | int | str,
        board: str | None = None,
    ) -> ToolResult:
        try:
            level = parse_level(value)
        except PinError as exc:
            return ToolResult.error(str(exc))
        wanted = describe_value("output", level)
        return await self._read_back(pin, "output", wanted, lambda now: now == level, board)

    async def recheck_pwm_write(
        self, call: ToolCallContext, pin: int | str, duty: float, board: str | None = None
    ) -> ToolResult:
        wanted = f"duty {duty:.0%}"
        close = lambda now: abs(now - duty) < 1 / 255  # noqa: E731
        return await self._read_back(pin, "pwm", wanted, close, board)

    async def recheck_servo_write(
        self, call: ToolCallContext, pin: int | str, angle: float, board: str | None = None
    ) -> ToolResult:
        wanted = f"{round(angle)}°"
        same = lambda now: round(now) == round(angle)  # noqa: E731
        return await self._read_back(pin, "servo", wanted, same, board)

    async def recheck_gpio_pattern(
        self,
        call: ToolCallContext,
        pin: int | str,
        pattern: str,
        board: str | None = None,
        **timing: int,
    ) -> ToolResult:
        """A pattern is driven by pinclaw, so none survives it: how far it ran is unknown."""
        try:
            found, _ = await self._pin_now(pin, "output", board)
        except (PinError, BoardError) as exc:
            found = f"the pin could not be read back ({exc})"
        return ToolResult.error(
            f"no {pattern} runs now (a pattern stops when pinclaw stops); {found}; how far "
            "it ran is unknown."
        )
