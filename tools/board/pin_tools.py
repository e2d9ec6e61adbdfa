"""The pin tools: the model's words for pins, checked against the config and the board.

A pin arrives as a number (13), an analog name ("A0"), a configured name ("fan") or, with
several boards, as `board.pin` ("garage.door"); a level as 0/1, true/false or "low"/"high".
Every argument is checked before the board is touched, and a refusal names the valid
choices, so the model can correct itself in one step. With `require_approval` under
supervised autonomy, each write then waits for the owner. Writes go through the Keeper
(tools/board/oversight/keeper.py): interlocks, the log, max_on_s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Literal

from tools.base import ApprovalRequest, ToolCallContext, ToolResult
from tools.board.board import Board, BoardError
from tools.board.oversight.keeper import Keeper
from tools.board.patterns import PatternRun
from tools.board.pin_names import Target
from tools.board.pin_policy import PinError, describe_value, parse_level

Pattern = Literal["blink", "pulse", "heartbeat"]
# (level, share of the period) steps; every pattern ends low.
PATTERNS: dict[str, tuple[tuple[int, float], ...]] = {
    "blink": ((1, 0.5), (0, 0.5)),
    "pulse": ((1, 0.1), (0, 0.9)),
    "heartbeat": ((1, 0.1), (0, 0.1), (1, 0.1), (0, 0.7)),
}
MIN_PERIOD_MS, MAX_PERIOD_MS, MAX_REPEAT = 20, 600_000, 100_000
AWAIT_PATTERN_S = 10.0
Act = Callable[[Target, Board], Awaitable[str]]


class PinTools:
    """The pin tool functions; each docstring becomes the tool's description and argument
    help (`board` is offered only when there are several boards)."""

    def __init__(self, keeper: Keeper, *, ask_first: Callable[[str], bool]) -> None:
        self.keeper = keeper
        self.boards = keeper.boards
        self.names = keeper.boards.names
        self.ask_first = ask_first  # per board: every pin write waits for the owner's yes
        # A finite pattern this short is awaited, so the result says what happened.
        self.await_s = min(AWAIT_PATTERN_S, self.boards.pattern_grace_s / 2)

    async def attempt(self, resolve: Callable[[], Target], act: Act) -> ToolResult:
        """Resolve the pin, run the tool's action on its board; what happened to the board
        meanwhile (a reset, a restore) is added to the result, so the model hears of it.
        With several boards, a failure names its board."""
        target: Target | None = None
        try:
            target = resolve()
            board = self.boards[target.board]
            result = ToolResult.success(await act(target, board))
        except (PinError, BoardError) as exc:
            named = target is not None and target.several and isinstance(exc, BoardError)
            result = ToolResult.error(f"{target.board}: {exc}" if named and target else str(exc))
        if target is not None:
            notice = self.boards[target.board].take_notice()
            if notice:
                where = f" ({target.board})" if target.several else ""
                result = dataclasses.replace(
                    result, output=f"{result.output}\nNote{where}: {notice}"
                )
        return result

    async def _approved(self, call: ToolCallContext, tool: str, target: Target, what: str) -> None:
        """Ask the owner before a checked write reaches the board; a no is a PinError."""
        if not self.ask_first(target.board):
            return
        action = f"{what} on {target.label}"
        reason = "[hardware] require_approval: every pin write asks first"
        rule = (
            f"{tool}:{target.ref.token}"
            if not target.several
            else f"{tool}:{target.board}.{target.ref.token}"
        )
        if not await call.ask(ApprovalRequest(tool, action, reason, (rule,))):
            raise PinError(
                f"Not done: the owner did not approve {tool} ({action}); the pin is unchanged. "
                "Say what you wanted to do instead of retrying."
            )

    async def gpio_write(
        self,
        call: ToolCallContext,
        pin: int | str,
        value: bool | int | str,
        board: str | None = None,
    ) -> ToolResult:
        """Set a digital output pin high or low: switch a LED, relay or buzzer on or off.
        Stops any pattern running on the pin.

        Args:
            pin: pin number (13), analog name ("A0") or configured name ("led")
            value: 1 or 0, true or false, "high" or "low"
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            level = parse_level(value)
            await self._approved(call, "gpio_write", target, f"set {'high' if level else 'low'}")
            reading, note = await self.keeper.write(call, "gpio_write", target, "output", level)
            return _said(f"{target.label} is now {describe_value('output', reading.value)}.", note)

        return await self.attempt(lambda: self.names.resolve(pin, "output", board), act)

    async def gpio_read(
        self, call: ToolCallContext, pin: int | str, board: str | None = None
    ) -> ToolResult:
        """Read a digital pin: its level (high/low) and mode. A pin set up as an input (a
        button, a switch) is read as one; an output reports the level it is driven to.

        Args:
            pin: pin number (2), analog name ("A0") or configured name ("button")
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            mode = target.ref.mode
            reading = await on.digital_read(
                target.ref.token,
                pullup=mode == "input_pullup",
                as_output=mode in ("output", "pwm", "servo"),
            )
            value = describe_value(reading.mode, reading.value, note=reading.note)
            return f"{target.label}: {value}, mode {reading.mode}."

        return await self.attempt(lambda: self.names.resolve(pin, "read", board), act)

    async def pwm_write(
        self, call: ToolCallContext, pin: int | str, duty: float, board: str | None = None
    ) -> ToolResult:
        """Drive a PWM-capable pin at a duty cycle: set a fan's speed or a LED's brightness.
        Stops any pattern running on the pin.

        Args:
            pin: pin number (9) or configured name ("fan")
            duty: 0.0 (off) to 1.0 (full on); 0.5 is half
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            if not 0.0 <= duty <= 1.0:
                raise PinError(f"Duty {duty:g} is out of range: give 0.0 (off) to 1.0 (full on).")
            await self._approved(call, "pwm_write", target, f"PWM duty {duty:.0%}")
            reading, note = await self.keeper.write(call, "pwm_write", target, "pwm", duty)
            return _said(f"{target.label}: PWM duty {reading.value:.0%}.", note)

        return await self.attempt(lambda: self.names.resolve(pin, "pwm", board), act)

    async def analog_read(
        self, call: ToolCallContext, pin: int | str, board: str | None = None
    ) -> ToolResult:
        """Read an analog input (A0-A5 on an Uno): a light sensor, a potentiometer, a
        thermistor. Answers the raw reading (0-1023) and the voltage.

        Args:
            pin: analog name ("A0") or configured name ("light")
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            reading = await on.analog_read(target.ref.token)
            value = describe_value("analog", reading.value, reading.full_scale)
            return f"{target.label}: {value}."

        return await self.attempt(lambda: self.names.resolve(pin, "analog", board), act)

    async def servo_write(
        self, call: ToolCallContext, pin: int | str, angle: float, board: str | None = None
    ) -> ToolResult:
        """Turn a hobby servo on a pin to an angle.

        Args:
            pin: pin number (10) or configured name ("door")
            angle: 0 to 180 degrees
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            if not 0 <= angle <= 180:
                raise PinError(f"Angle {angle:g} is out of range: give 0 to 180 degrees.")
            await self._approved(call, "servo_write", target, f"servo to {round(angle)}°")
            reading, note = await self.keeper.write(call, "servo_write", target, "servo", angle)
            return _said(f"{target.label}: servo at {reading.value:g}°.", note)

        return await self.attempt(lambda: self.names.resolve(pin, "servo", board), act)

    async def gpio_pattern(
        self,
        call: ToolCallContext,
        pin: int | str,
        pattern: Pattern,
        period_ms: int = 1000,
        repeat: int = 0,
        board: str | None = None,
    ) -> ToolResult:
        """Run a light pattern on a digital output: blink (on half the period), pulse (a
        short flash each period) or heartbeat (two quick beats). A finite pattern of up to
        10 s is waited for and reported as it ran; longer ones run in the background. A new
        pattern or a gpio_write on the pin stops it; every pattern ends low.

        Args:
            pin: pin number (13) or configured name ("led")
            pattern: "blink", "pulse" or "heartbeat"
            period_ms: length of one cycle in milliseconds (20 to 600000)
            repeat: number of cycles; 0 runs until stopped
            board: the board's name, when the pin is on several boards
        """

        async def act(target: Target, on: Board) -> str:
            if not MIN_PERIOD_MS <= period_ms <= MAX_PERIOD_MS:
                raise PinError(
                    f"period_ms {period_ms} is out of range: give {MIN_PERIOD_MS} to "
                    f"{MAX_PERIOD_MS} milliseconds."
                )
            if not 0 <= repeat <= MAX_REPEAT:
                raise PinError(
                    f"repeat {repeat} is out of range: give 1 to {MAX_REPEAT}, or 0 for "
                    "until stopped."
                )
            steps = [(level, share * period_ms / 1000) for level, share in PATTERNS[pattern]]
            if (refused := self.keeper.limits.pattern_refusal(target, steps)) is not None:
                raise PinError(refused)
            what = f"{pattern} every {period_ms} ms" + (f", {repeat} times" if repeat else "")
            await self._approved(call, "gpio_pattern", target, what)
            run = await on.start_pattern(target.ref.token, pattern, steps, repeat)
            await self.keeper.pattern_started(call, "gpio_pattern", target, what)
            return await self._pattern_said(target, on, run, pattern, period_ms, repeat)

        return await self.attempt(lambda: self.names.resolve(pin, "output", board), act)

    async def _pattern_said(
        self, target: Target, on: Board, run: PatternRun, pattern: str, period_ms: int, repeat: int
    ) -> str:
        total_s = repeat * period_ms / 1000
        head = f"{target.label}: {pattern} every {period_ms} ms"
        if repeat and total_s <= self.await_s:
            await on.wait_pattern(run, total_s + self.await_s)
            if run.level is None:
                return f"{head} {run.outcome()}. The pin's level is unknown."
            level = describe_value("output", run.level)
            if run.ended != "completed":
                return f"{head} {run.outcome()}. The pin is {level} now."
            return f"{head} {run.outcome()} (about {total_s:g} s); the pin is {level} now."
        grace = on.pattern_grace_s
        if repeat:
            return (
                f"{head}, {repeat} times (about {total_s:g} s), started in the background "
                "(a gpio_write on the pin stops it). If pinclaw stops before it ends, it "
                f"waits up to {grace:g} s for it, then cuts it and leaves the pin low."
            )
        return (
            f"{head}, until stopped (gpio_write the pin to stop it); it stops, leaving the "
            "pin low, when pinclaw stops."
        )


def _said(text: str, note: str) -> str:
    return f"{text} {note}" if note else text
