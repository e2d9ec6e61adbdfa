"""The hardware tools as the model gets them: the pin tools (tools/board/pin_tools.py), the
two that describe the boards, and their descriptions with the configured pin names.

With one board the tools are as they always were; with several, each takes an optional
`board`, and hardware_board_info lists every board with its state (a board that is down
says why, the others answer as usual).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from tools.base import FunctionTool, Tool, ToolCallContext, ToolResult
from tools.board.board import Board, BoardError, BoardInfo
from tools.board.fleet import Boards
from tools.board.oversight.keeper import Keeper
from tools.board.pin_names import without_board
from tools.board.pin_policy import TOOL_FOR_MODE, PinError, describe_value
from tools.board.pin_recheck import PinRechecks
from tools.board.pin_tools import PinTools
from tools.config import Autonomy

WRITERS = frozenset({"gpio_write", "pwm_write", "servo_write", "gpio_pattern"})
# A level, duty or angle set twice is set once; a pattern run twice blinks (or pulses a
# relay) twice.
REPEAT_SAFE = frozenset({"gpio_write", "pwm_write", "servo_write"})


class BoardTools:
    """hardware_board_info and hardware_capabilities, over one board or all of them."""

    def __init__(self, boards: Boards) -> None:
        self.boards = boards

    async def hardware_board_info(
        self, call: ToolCallContext, board: str | None = None
    ) -> ToolResult:
        """Describe the connected board: port, firmware, and each usable pin with what it can
        do, its current mode and last value, and which pins you may use.

        Args:
            board: one board's name; leave out for every board
        """
        return await self._each(board, self._info)

    async def hardware_capabilities(
        self, call: ToolCallContext, board: str | None = None
    ) -> ToolResult:
        """List what each pin of the connected board can do (output, input, pwm, analog,
        servo, ...) and which tool drives each mode.

        Args:
            board: one board's name; leave out for every board
        """
        return await self._each(board, self._capabilities)

    async def _each(
        self, board: str | None, describe: Callable[[Board, BoardInfo], str]
    ) -> ToolResult:
        """`describe` each chosen board; with several, one that fails says why and the
        others still answer."""
        try:
            chosen = self.boards.chosen(board)
        except PinError as exc:
            return ToolResult.error(str(exc))
        several = len(self.boards) > 1
        parts, failed = [], 0
        for one in chosen:
            try:
                text = describe(one, await one.info())
            except BoardError as exc:
                failed += 1
                text = (
                    f"{one.name} ({one.settings.port}): not reachable: {exc}"
                    if several
                    else str(exc)
                )
            notice = one.take_notice()
            if notice:
                text += f"\nNote: {notice}"
            parts.append(f"## {one.name}\n{text}" if several else text)
        text = "\n\n".join(parts)
        return ToolResult.error(text) if failed == len(chosen) else ToolResult.success(text)

    def _info(self, board: Board, info: BoardInfo) -> str:
        policy = self.boards.names.policies[board.name]
        running = board.patterns
        lines = [_headline(info)]
        for pin in info.pins:
            if not pin.capabilities:
                continue
            value = describe_value(pin.mode, pin.value, note=pin.note)
            state = f"mode {pin.mode}" + (f", {value}" if value else "") if pin.mode else ""
            if pin.number in running:
                state += f", running {running[pin.number]}"
            lines.append(
                f"- {pin.label}{policy.about(pin)}: {state or 'mode unknown'}; "
                f"can {', '.join(pin.capabilities)}"
            )
        if info.resets:
            lines.append(f"Last reset: {info.resets}")
        return "\n".join(lines)

    def _capabilities(self, board: Board, info: BoardInfo) -> str:
        policy = self.boards.names.policies[board.name]
        groups: dict[str, list[str]] = {}
        for pin in info.pins:
            can = ", ".join(
                f"{m} ({bits}-bit)" if m in ("pwm", "analog") else m
                for m, bits in pin.capabilities.items()
            )
            groups.setdefault(can or "not usable through Firmata", []).append(
                pin.label + policy.about(pin)
            )
        lines = [_headline(info)]
        lines += [f"- {', '.join(pins)}: {can}" for can, pins in groups.items()]
        tools = "; ".join(f"{mode} -> {tool}" for mode, tool in TOOL_FOR_MODE.items())
        lines.append(f"Tools per mode: {tools}.")
        return "\n".join(lines)


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


def hardware_tools(boards: Board | Keeper, *, autonomy: Autonomy = "supervised") -> list[Tool]:
    """The eight hardware tools of one board or of a Keeper's boards; the pin tools'
    descriptions carry the configured pin names. Pin writes ask the owner when a board's
    `require_approval` is on and autonomy is supervised (read_only refuses them outright
    through tools.base.read_only; full never asks)."""
    keeper = boards if isinstance(boards, Keeper) else Keeper(Boards.single(boards))
    fleet = keeper.boards

    def ask_first(board: str) -> bool:
        return fleet[board].settings.require_approval and autonomy == "supervised"

    pins = PinTools(keeper, ask_first=ask_first)
    info = BoardTools(fleet)
    functions = (
        pins.gpio_read,
        pins.gpio_write,
        pins.pwm_write,
        pins.analog_read,
        pins.servo_write,
        pins.gpio_pattern,
        info.hardware_board_info,
        info.hardware_capabilities,
    )
    guide = fleet.names.guide()
    rechecks = PinRechecks(fleet)
    built: list[Tool] = []
    for fn in functions:
        summary = " ".join((inspect.getdoc(fn) or "").partition("Args:")[0].split())
        pin_tool = "pin" in inspect.signature(fn).parameters
        description = f"{summary} {guide}" if pin_tool else summary
        name = fn.__name__
        writes = name in WRITERS
        recheck = getattr(rechecks, f"recheck_{name}", None)
        built.append(
            FunctionTool(
                fn if fleet.names.several else without_board(fn),
                name=name,
                description=description,
                writes=writes,
                repeat_safe=name in REPEAT_SAFE if writes else None,
                recheck=recheck,
            )
        )
    return built
