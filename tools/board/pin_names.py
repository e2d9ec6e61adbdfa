"""The model's words for pins across several boards, and the tool argument that picks one.

`[hardware]` is the board named "board"; `[boards.NAME]` are more. A pin is named as on one
board ("fan", 13, "A0") when only one board has it, or as `board.pin` ("garage.door");
every hardware tool also takes an optional `board`, offered only when there are several.
With one board nothing changes: the names, the refusals and the labels are those of
tools/board/pin_policy.py. With several, a label says which board ("door (pin 7) on
garage"). Plain config, no I/O: the watch tools use it too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tools.base import ToolCallContext
from tools.board.pin_policy import PinError, PinPolicy, PinRef
from tools.config import BoardSettings


@dataclass(frozen=True)
class Target:
    """A pin the tools may touch, on the board it belongs to."""

    board: str
    ref: PinRef
    several: bool = False  # more than one board is configured: labels name the board

    @property
    def label(self) -> str:
        return f"{self.ref.label} on {self.board}" if self.several else self.ref.label


class PinNames:
    """Which pins of which board the tools may touch, and what the model's words mean."""

    def __init__(self, boards: Mapping[str, BoardSettings]) -> None:
        self.policies = {name: PinPolicy(settings) for name, settings in boards.items()}

    @property
    def several(self) -> bool:
        return len(self.policies) > 1

    def board_named(self, board: str | None) -> str | None:
        """The board `board` names (None: not given); a PinError lists the boards."""
        if board is None or not board.strip():
            return None
        name = board.strip().lower()
        if name not in self.policies:
            raise PinError(f"No board is named {board!r}; the boards are {self.listed()}.")
        return name

    def resolve(self, pin: int | str, use: str, board: str | None = None) -> Target:
        """The allowed pin `pin` names, fit for `use`, and its board; otherwise a PinError
        naming the choices."""
        name = self.board_named(board)
        if isinstance(pin, str) and "." in pin:
            prefix, _, rest = pin.strip().partition(".")
            if prefix.lower() in self.policies:
                if name is not None and name != prefix.lower():
                    raise PinError(f"{pin!r} is on {prefix}, not on {name}: give one board.")
                name, pin = prefix.lower(), rest
        if name is None:
            name = self._only_board_with(pin)
        return Target(name, self.policies[name].resolve(pin, use), self.several)

    def _only_board_with(self, pin: int | str) -> str:
        if not self.several:
            return next(iter(self.policies))
        having = [name for name, policy in self.policies.items() if policy.knows(pin)]
        if len(having) == 1:
            return having[0]
        if having:
            raise PinError(
                f"{pin!r} is on {', '.join(having)}: write it as board.pin "
                f"({having[0]}.{pin}) or give board."
            )
        raise PinError(f"Unknown pin {pin!r} on every board. {self.choices()}")

    def board_lines(self) -> tuple[str, ...]:
        """A line per board for the prompt: `garage: door (pin 7), light (A0), pin 13`."""
        lines = []
        for name, policy in self.policies.items():
            pins = ", ".join(ref.label for ref in policy.allowed.values())
            lines.append(f"{name}: {pins or 'no pins allowed'}")
        return tuple(lines)

    def listed(self) -> str:
        return ", ".join(self.policies)

    def choices(self) -> str:
        if not self.several:
            return next(iter(self.policies.values())).choices()
        per_board = [f"on {name}: {p.pins() or 'none'}" for name, p in self.policies.items()]
        return f"Allowed pins {'; '.join(per_board)}."

    def guide(self) -> str:
        """The pin part of each tool description."""
        if not self.several:
            return next(iter(self.policies.values())).guide()
        per_board = [f"on {name}: {p.pins() or 'none'}" for name, p in self.policies.items()]
        return (
            f"Pins you may use {'; '.join(per_board)}. A name on several boards is written "
            "board.pin (garage.door), or give board."
        )


def without_board(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a tool offers it with one board: no `board` argument to choose."""

    @functools.wraps(fn)
    async def call(call: ToolCallContext, **args: Any) -> Any:
        return await fn(call, **args)

    signature = inspect.signature(fn)
    kept = [p for p in signature.parameters.values() if p.name != "board"]
    call.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    return call
