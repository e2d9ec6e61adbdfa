"""Where a pin goes when pinclaw cannot vouch for it: its configured `safe` value.

A pin with `safe` (0 or 1, a duty, an angle) is set to it when a link to its board is first
made, again whenever the link comes back after a loss or the board reset (before anything
else is sent: what pinclaw had set on it is not put back), and at a clean stop. What was
applied, or why not, goes back to the Board, which says so and has it logged. Runs on the
Board's worker thread (tools/board/link/worker.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.board.link.firmata_types import BoardError, BoardReset, PinToken
from tools.board.pins import Pins
from tools.board.restore import Setting
from tools.config import BoardSettings


@dataclass(frozen=True)
class Applied:
    """One pin set by pinclaw itself (a safe state, a restore): what it holds now, or why
    it could not be set."""

    pin: int
    setting: Setting
    label: str  # "pump (pin 8)"
    failed: str = ""  # why it could not be set
    token: PinToken | None = None  # as configured (8, "A0"); None: the pin number

    @property
    def spelled(self) -> str:
        """The pin as the config spells it: "8" or "A0"."""
        return str(self.pin if self.token is None else self.token)

    @property
    def text(self) -> str:
        done = f"{self.label} {self.setting.value_text()}"
        return f"{done} (not set: {self.failed})" if self.failed else done


class SafeStates:
    """The configured safe values of one board's named pins."""

    def __init__(self, settings: BoardSettings) -> None:
        self.values: dict[PinToken, Setting] = {
            pin.pin: Setting(pin.mode, float(pin.safe))
            for pin in settings.pins.values()
            if pin.safe is not None
        }
        self.names = {pin.pin: name for name, pin in settings.pins.items()}

    def __bool__(self) -> bool:
        return bool(self.values)

    def label(self, pins: Pins, pin: int) -> str:
        """`pump (pin 8)`, `light (A0)` or `pin 8`, for what pinclaw says it did."""
        analog = f"A{pins.channels[pin]}" if pin in pins.channels else ""
        name = self.names.get(pin) or self.names.get(analog)
        spelled = analog or f"pin {pin}"
        return f"{name} ({spelled})" if name else spelled

    def apply(self, pins: Pins) -> list[Applied]:
        """Set every safe pin (a reset while doing so is for the caller to handle)."""
        done = []
        for token, setting in self.values.items():
            try:
                pin = pins.pin_of(token)
            except BoardError as exc:
                done.append(Applied(-1, setting, str(token), str(exc), token))
                continue
            try:
                setting.apply(pins, pin)
            except BoardReset:
                raise
            except BoardError as exc:
                done.append(Applied(pin, setting, self.label(pins, pin), str(exc), token))
                continue
            done.append(Applied(pin, setting, self.label(pins, pin), token=token))
        return done
