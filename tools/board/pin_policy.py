"""Which pins the hardware tools may touch, and what the model's words for them mean.

A pin arrives as a number (13), an analog name ("A0") or a configured name ("fan"); a level
as 0/1, true/false or "low"/"high". `PinPolicy` answers from [hardware] allowed_pins and the
named pins, before the board is touched, and every refusal names the valid choices. The
other way round, `describe_value` puts what a pin reads into words ("high", "duty 50%",
"512/1023 (2.50 V)") for the tools, their read-backs after a crash and the pin watcher.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.board.link.firmata_types import PinInfo
from tools.config import BoardSettings, pin_token

ANALOG_REFERENCE_V = 5.0  # the Uno's, Nano's and Mega's default analog reference
LEVELS = {"0": 0, "1": 1, "low": 0, "high": 1, "false": 0, "true": 1, "off": 0, "on": 1}
TOOL_FOR_MODE = {
    "output": "gpio_write or gpio_pattern",
    "input": "gpio_read",
    "input_pullup": "gpio_read",
    "pwm": "pwm_write",
    "analog": "analog_read",
    "servo": "servo_write",
}
# What a tool may do to a pin wired (configured) for each mode; "read" is gpio_read.
USES = {
    "output": {"output", "read"},
    "input": {"read"},
    "input_pullup": {"read"},
    "pwm": {"pwm", "read"},
    "servo": {"servo", "read"},
    "analog": {"analog"},
}


class PinError(Exception):
    """An argument the config or the tool refuses; nothing was sent to the board."""


@dataclass(frozen=True)
class PinRef:
    """A pin the tools may touch: its spelling for the board, and its configured name."""

    token: int | str  # 13 or "A0"
    name: str = ""
    mode: str = ""  # how it is wired, when configured under [hardware.pins.NAME]
    description: str = ""

    @property
    def label(self) -> str:
        pin = f"pin {self.token}" if isinstance(self.token, int) else self.token
        return f"{self.name} ({pin})" if self.name else pin


class PinPolicy:
    """Which pins the tools may touch (allowed_pins and named pins), and what names mean."""

    def __init__(self, settings: BoardSettings) -> None:
        self.named = {
            name: PinRef(pin.pin, name, pin.mode, pin.description)
            for name, pin in settings.pins.items()
        }
        self.allowed = {token: PinRef(token) for token in settings.allowed_pins}
        self.allowed |= {ref.token: ref for ref in self.named.values()}

    def resolve(self, arg: int | str, use: str) -> PinRef:
        """The allowed pin `arg` names, fit for `use` ("": any); otherwise a PinError naming
        the choices."""
        ref = self.named.get(arg.strip().lower()) if isinstance(arg, str) else None
        if ref is None:
            try:
                token = pin_token(arg)
            except ValueError:
                names = f" or a configured name ({', '.join(self.named)})" if self.named else ""
                raise PinError(
                    f"Unknown pin {arg!r}: give a pin number (13), an analog name (A0){names}."
                ) from None
            ref = self.allowed.get(token)
            if ref is None:
                raise PinError(
                    f"{PinRef(token).label.capitalize()} is not allowed. {self.choices()}"
                )
        if use and ref.mode and use not in USES[ref.mode]:
            raise PinError(f"{ref.label} is wired as {ref.mode}: use {TOOL_FOR_MODE[ref.mode]}.")
        return ref

    def knows(self, arg: int | str) -> bool:
        """Is `arg` one of this board's named or allowed pins?"""
        if isinstance(arg, str) and arg.strip().lower() in self.named:
            return True
        try:
            return pin_token(arg) in self.allowed
        except ValueError:
            return False

    def pins(self) -> str:
        """The pin part of the guide: `"fan" = pin 9 (pwm: ceiling fan); pin 13`."""
        parts = []
        for ref in self.allowed.values():
            if ref.name:
                about = f"{ref.mode}: {ref.description}" if ref.description else ref.mode
                parts.append(f'"{ref.name}" = {PinRef(ref.token).label} ({about})')
            else:
                parts.append(PinRef(ref.token).label)
        return "; ".join(parts)

    def choices(self) -> str:
        if not self.allowed:
            return (
                "No pins are allowed yet: list them in [hardware] allowed_pins, or name them "
                "under [hardware.pins.NAME], in config.toml."
            )
        return f"Allowed pins: {', '.join(ref.label for ref in self.allowed.values())}."

    def guide(self) -> str:
        """The pin part of each tool description: how "the fan" maps to pin 9."""
        listed = self.pins()
        return f"Pins you may use: {listed}." if listed else self.choices()

    def about(self, pin: PinInfo) -> str:
        """`pin`'s configured name and whether the tools may touch it, for board listings."""
        tokens = {pin.number, f"A{pin.analog_channel}"}
        refs = [ref for token, ref in self.allowed.items() if token in tokens]
        names = [f'"{ref.name}"' for ref in refs if ref.name]
        return (" " + ", ".join(names) if names else "") + (" [allowed]" if refs else "")


def parse_level(value: bool | int | str) -> int:
    if isinstance(value, bool):
        return int(value)
    level = LEVELS.get(str(value).strip().lower())
    if level is None:
        raise PinError(f"Level {value!r} is not one of 1/0, true/false or high/low.")
    return level


def describe_value(
    mode: str | None, value: float | None, full_scale: int = 1023, note: str = ""
) -> str:
    if note:
        return note  # the chip does not do what the mode says: claim nothing else
    if value is None or mode is None:
        return ""
    if mode in ("output", "input", "input_pullup"):
        return "high" if value else "low"
    if mode == "pwm":
        return f"duty {value:.0%}"
    if mode == "servo":
        return f"{value:g}°"
    if mode == "analog":
        return f"{value:g}/{full_scale} ({value / full_scale * ANALOG_REFERENCE_V:.2f} V)"
    return f"{value:g}"
