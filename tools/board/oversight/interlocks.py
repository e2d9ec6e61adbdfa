"""Interlocks: groups of a board's outputs that must never be on together.

`[hardware] interlocks = [["heater", "fan_off"]]`: switching one on (high, or a PWM above 0)
is refused while another of its group is on, with one line naming the other pin. The others
are asked of the board itself, in the same operation as the write (the Board's lock held),
so nothing can switch one on between the look and the write.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.board.link.firmata_types import OUTPUT, PWM, BoardError, PinToken
from tools.board.pin_policy import PinRef
from tools.board.pins import Pins
from tools.config import BoardSettings


class Interlocked(BoardError):
    """A write refused because another pin of its interlock group is on; nothing was sent."""


class Interlocks:
    """One board's interlock groups, as the pins' spellings and names."""

    def __init__(self, settings: BoardSettings) -> None:
        pins = settings.pins
        self.groups = [
            [PinRef(pins[name].pin, name) for name in group] for group in settings.interlocks
        ]

    def check(self, ref: PinRef) -> Callable[[Pins], None] | None:
        """What to ask the board before switching `ref` on (None: it is in no group)."""
        others = {
            other.token: other
            for group in self.groups
            if any(member.token == ref.token for member in group)
            for other in group
            if other.token != ref.token
        }
        if not others:
            return None

        def refuse_if_one_is_on(pins: Pins) -> None:
            for token, other in others.items():
                if _on(pins, token):
                    raise Interlocked(
                        f"Not done: {ref.label} and {other.label} are interlocked (never on "
                        f"together), and {other.label} is on now; switch it off first."
                    )

        return refuse_if_one_is_on


def _on(pins: Pins, token: PinToken) -> bool:
    """Is the pin high (an output) or at a PWM above 0, as the board holds it now?"""
    pin = pins.pin_of(token)
    mode, state = pins.link.pin_state(pin)
    return (mode == OUTPUT and state > 0) or (mode == PWM and state > 0)
