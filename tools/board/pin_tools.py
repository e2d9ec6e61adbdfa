"""The hardware tools: the model's words for pins, checked against the config and the board.

A pin arrives as a number (13), an analog name ("A0") or a configured name ("fan"); a level as
0/1, true/false or "low"/"high". Every argument is checked before the board is touched, and a
refusal names the valid choices, so the model can correct itself in one step. With
`[hardware] require_approval` under supervised autonomy, each write then waits for the owner.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Literal

from tools.base import ApprovalRequest, FunctionTool, Tool, ToolCallContext, ToolResult
from tools.board.board import Board, BoardError, BoardInfo
from tools.board.pin_policy import (
    TOOL_FOR_MODE,
    PinError,
    PinPolicy,
    PinRef,
    describe_value,
    parse_level,
)
from tools.board.pin_recheck import PinRechecks
from tools.config import Autonomy, HardwareSettings

Pattern = Literal["blink", "pulse", "heartbeat"]
# (level, share of the period) steps; every pattern ends low.
PATTERNS: dict[str, tuple[tuple[int, float], ...]] = {
    "blink": ((1, 0.5), (0, 0.5)),
    "pulse": ((1, 0.1), (0, 0.9)),
    "heartbeat": ((1, 0.1), (0, 0.1), (1, 0.1), (0, 0.7)),
}
MIN_PERIOD_MS, MAX_PERIOD_MS, MAX_REPEAT = 20, 600_000, 100_000
AWAIT_PATTERN_S = 10.0


async def _attempt(board: Board, action: Callable[[], Awaitable[str]]) -> ToolResult:
    """Run a tool's action; what happened to the board meanwhile (a reset, a restore) is
    added to the result, so the model hears of it."""
    try:
        result = ToolResult.success(await action())
    except (PinError, BoardError) as exc:
        result = ToolResult.error(str(exc))
    notice = board.take_notice()
    if notice:
        result = dataclasses.replace(result, output=f"{result.output}\nNote: {notice}")
    return result


class _HardwareTools:
    """The tool functions; each docstring becomes the tool's description and argument help."""

    def __init__(self, settings: HardwareSettings, board: Board, *, ask_first: bool) -> None:
        self.policy = PinPolicy(settings)
        self.board = board
        self.ask_first = ask_first  # every pin write waits for the owner's yes
        # A finite pattern this short is awaited, so the result says what happened.
        self.await_s = min(AWAIT_PATTERN_S, board.pattern_grace_s / 2)

    async def _approved(self, call: ToolCallContext, tool: str, ref: PinRef, what: str) -> None:
        """Ask the owner before a checked write reaches the board; a no is a PinError."""
        if not self.ask_first:
            return
        action = f"{what} on {ref.label}"
        reason = "[hardware] require_approval: every pin write asks first"
        if not await call.ask(ApprovalRequest(tool, action, reason, (f"{tool}:{ref.token}",))):
            raise PinError(
                f"Not done: the owner did not approve {tool} ({action}); the pin is unchanged. "
                "Say what you wanted to do instead of retrying."
            )

    async def gpio_write(
        self, call: ToolCallContext, pin: int | str, value: bool | int | str
    ) -> ToolResult:
        """Set a digital output pin high or low: switch a LED, relay or buzzer on or off.
        Stops any pattern running on the pin.

        Args:
            pin: pin number (13), analog name ("A0") or configured name ("led")
            value: 1 or 0, true or false, "high" or "low"
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "output")
            level = parse_level(value)
            await self._approved(call, "gpio_write", ref, f"set {'high' if level else 'low'}")
            reading = await self.board.digital_write(ref.token, level)
            return f"{ref.label} is now {describe_value('output', reading.value)}."

        return await _attempt(self.board, act)

    async def gpio_read(self, call: ToolCallContext, pin: int | str) -> ToolResult:
        """Read a digital pin: its level (high/low) and mode. A pin set up as an input (a
        button, a switch) is read as one; an output reports the level it is driven to.

        Args:
            pin: pin number (2), analog name ("A0") or configured name ("button")
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "read")
            reading = await self.board.digital_read(
                ref.token,
                pullup=ref.mode == "input_pullup",
                as_output=ref.mode in ("output", "pwm", "servo"),
            )
            value = describe_value(reading.mode, reading.value, note=reading.note)
            return f"{ref.label}: {value}, mode {reading.mode}."

        return await _attempt(self.board, act)

    async def pwm_write(self, call: ToolCallContext, pin: int | str, duty: float) -> ToolResult:
        """Drive a PWM-capable pin at a duty cycle: set a fan's speed or a LED's brightness.
        Stops any pattern running on the pin.

        Args:
            pin: pin number (9) or configured name ("fan")
            duty: 0.0 (off) to 1.0 (full on); 0.5 is half
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "pwm")
            if not 0.0 <= duty <= 1.0:
                raise PinError(f"Duty {duty:g} is out of range: give 0.0 (off) to 1.0 (full on).")
            await self._approved(call, "pwm_write", ref, f"PWM duty {duty:.0%}")
            reading = await self.board.pwm_write(ref.token, duty)
            return f"{ref.label}: PWM duty {reading.value:.0%}."

        return await _attempt(self.board, act)

    async def analog_read(self, call: ToolCallContext, pin: int | str) -> ToolResult:
        """Read an analog input (A0-A5 on an Uno): a light sensor, a potentiometer, a
        thermistor. Answers the raw reading (0-1023) and the voltage.

        Args:
            pin: analog name ("A0") or configured name ("light")
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "analog")
            reading = await self.board.analog_read(ref.token)
            value = describe_value("analog", reading.value, reading.full_scale)
            return f"{ref.label}: {value}."

        return await _attempt(self.board, act)

    async def servo_write(self, call: ToolCallContext, pin: int | str, angle: float) -> ToolResult:
        """Turn a hobby servo on a pin to an angle.

        Args:
            pin: pin number (10) or configured name ("door")
            angle: 0 to 180 degrees
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "servo")
            if not 0 <= angle <= 180:
                raise PinError(f"Angle {angle:g} is out of range: give 0 to 180 degrees.")
            await self._approved(call, "servo_write", ref, f"servo to {round(angle)}°")
            reading = await self.board.servo_write(ref.token, round(angle))
            return f"{ref.label}: servo at {reading.value:g}°."

        return await _attempt(self.board, act)

    async def gpio_pattern(
        self,
        call: ToolCallContext,
        pin: int | str,
        pattern: Pattern,
        period_ms: int = 1000,
        repeat: int = 0,
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
        """

        async def act() -> str:
            ref = self.policy.resolve(pin, "output")
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
            what = f"{pattern} every {period_ms} ms" + (f", {repeat} times" if repeat else "")
            await self._approved(call, "gpio_pattern", ref, what)
            run = await self.board.start_pattern(ref.token, pattern, steps, repeat)
            total_s = repeat * period_ms / 1000
            head = f"{ref.label}: {pattern} every {period_ms} ms"
            if repeat and total_s <= self.await_s:
                await self.board.wait_pattern(run, total_s + self.await_s)
                if run.level is None:
                    return f"{head} {run.outcome()}. The pin's level is unknown."
                level = describe_value("output", run.level)
                if run.ended != "completed":
                    return f"{head} {run.outcome()}. The pin is {level} now."
                return f"{head} {run.outcome()} (about {total_s:g} s); the pin is {level} now."
            grace = self.board.pattern_grace_s
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

        return await _attempt(self.board, act)

    async def hardware_board_info(self, call: ToolCallContext) -> ToolResult:
        """Describe the connected board: port, firmware, and each usable pin with what it can
        do, its current mode and last value, and which pins you may use.
        """

        async def act() -> str:
            info = await self.board.info()
            running = self.board.patterns
            lines = [_headline(info)]
            for pin in info.pins:
                if not pin.capabilities:
                    continue
                value = describe_value(pin.mode, pin.value, note=pin.note)
                state = f"mode {pin.mode}" + (f", {value}" if value else "") if pin.mode else ""
                if pin.number in running:
                    state += f", running {running[pin.number]}"
                lines.append(
                    f"- {pin.label}{self.policy.about(pin)}: {state or 'mode unknown'}; "
                    f"can {', '.join(pin.capabilities)}"
                )
            if info.resets:
                lines.append(f"Last reset: {info.resets}")
            return "\n".join(lines)

        return await _attempt(self.board, act)

    async def hardware_capabilities(self, call: ToolCallContext) -> ToolResult:
        """List what each pin of the connected board can do (output, input, pwm, analog,
        servo, ...) and which tool drives each mode.
        """

        async def act() -> str:
            info = await self.board.info()
            groups: dict[str, list[str]] = {}
            for pin in info.pins:
                can = ", ".join(
                    f"{m} ({bits}-bit)" if m in ("pwm", "analog") else m
                    for m, bits in pin.capabilities.items()
                )
                groups.setdefault(can or "not usable through Firmata", []).append(
                    pin.label + self.policy.about(pin)
                )
            lines = [_headline(info)]
            lines += [f"- {', '.join(pins)}: {can}" for can, pins in groups.items()]
            tools = "; ".join(f"{mode} -> {tool}" for mode, tool in TOOL_FOR_MODE.items())
            lines.append(f"Tools per mode: {tools}.")
            return "\n".join(lines)

        return await _attempt(self.board, act)


_WRITERS = frozenset({"gpio_write", "pwm_write", "servo_write", "gpio_pattern"})
# A level, duty or angle set twice is set once; a pattern run twice blinks (or pulses a
# relay) twice.
_REPEAT_SAFE = frozenset({"gpio_write", "pwm_write", "servo_write"})


def _headline(info: BoardInfo) -> str:
    analog = sum(pin.analog_channel is not None for pin in info.pins)
    head = (
        f"Board on {info.port}: {info.firmware} {info.firmware_version} (Firmata protocol "
        f"{info.protocol_version}), {info.pin_count} pins, {analog} analog inputs."
    )
    if not info.model:
        return f"{head}\nTimers: board not recognised, so no timer conflicts are predicted."
    return (
        f"{head}\nTimers of an {info.model}: {info.timer_groups}. A servo takes the servo "
        "timer, which stops PWM on its pins until the board resets."
    )


def hardware_tools(
    settings: HardwareSettings, board: Board, *, autonomy: Autonomy = "supervised"
) -> list[Tool]:
    """The eight hardware tools; the pin tools' descriptions carry the configured pin names.
    Pin writes ask the owner when `require_approval` is on and autonomy is supervised
    (read_only refuses them outright through tools.base.read_only; full never asks)."""
    ask_first = settings.require_approval and autonomy == "supervised"
    tools = _HardwareTools(settings, board, ask_first=ask_first)
    guide = tools.policy.guide()
    functions = (
        tools.gpio_read,
        tools.gpio_write,
        tools.pwm_write,
        tools.analog_read,
        tools.servo_write,
        tools.gpio_pattern,
        tools.hardware_board_info,
        tools.hardware_capabilities,
    )
    rechecks = PinRechecks(tools.policy, board)
    built: list[Tool] = []
    for fn in functions:
        summary = " ".join((inspect.getdoc(fn) or "").partition("Args:")[0].split())
        pin_tool = "pin" in inspect.signature(fn).parameters
        description = f"{summary} {guide}" if pin_tool else summary
        name = fn.__name__
        writes = name in _WRITERS
        recheck = getattr(rechecks, f"recheck_{name}", None)
        safe = name in _REPEAT_SAFE if writes else None
        built.append(
            FunctionTool(
                fn,
                name=name,
                description=description,
                writes=writes,
                repeat_safe=safe,
                recheck=recheck,
            )
        )
    return built
