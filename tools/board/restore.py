"""What pinclaw set on the board, kept so it can be put back when the board forgets it.

A board forgets every pin when it resets (a DTR edge, a brown-out, the reset button) or is
unplugged. The Board records each setting its tools made — levels, duties, servo angles,
input modes, watched pins — and after a reset, or a reconnect that finds the board changed,
compares it with what the board reports and re-applies what differs (or, with
`[hardware] restore_after_reset = false`, only says what was lost). Runs on the worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.board.link.firmata_types import MODE_CODES, BoardError, BoardReset
from tools.board.pins import Pins

PWM_STEP = 1 / 255


@dataclass(frozen=True)
class Setting:
    """What pinclaw last set on one pin."""

    mode: str  # "output", "pwm", "servo", "input", "input_pullup" or "analog"
    value: float = 0.0  # the level, duty or angle

    def describe(self, pin: int) -> str:
        return f"pin {pin} {self.value_text()}"

    def value_text(self) -> str:
        """`high`, `PWM 50%`, `servo 90°` or the input mode."""
        if self.mode == "output":
            return "high" if self.value else "low"
        if self.mode == "pwm":
            return f"PWM {self.value:.0%}"
        if self.mode == "servo":
            return f"servo {self.value:g}°"
        return self.mode

    @property
    def on(self) -> bool:
        """An output high or a PWM above 0: what max_on_s and interlocks are about."""
        return self.mode in ("output", "pwm") and self.value > 0

    def held_by(self, pins: Pins, pin: int) -> bool:
        """Does the board hold this setting now?"""
        if pins.modes.get(pin) != MODE_CODES[self.mode]:
            return False
        value = pins.values.get(pin, 0.0)
        if self.mode == "pwm":
            return abs(value - self.value) < PWM_STEP
        return self.mode not in ("output", "servo") or value == self.value

    def apply(self, pins: Pins, pin: int) -> None:
        pins.check(pin, self.mode)
        if self.mode == "output":
            pins.digital_write(pin, int(self.value))
        elif self.mode == "pwm":
            pins.pwm_write(pin, self.value)
        elif self.mode == "servo":
            pins.servo_write(pin, int(self.value))
        elif self.mode == "analog":
            pins.analog_read(pin)
        else:
            pins.digital_read(pin, MODE_CODES[self.mode])


class Record(dict[int, Setting]):
    """pin -> the last setting pinclaw made on it."""

    def restore(
        self, pins: Pins, *, put_back: bool, why: str
    ) -> tuple[str, list[tuple[int, Setting]]]:
        """Compare with the board and re-apply what it lost (servos first, as they were
        allowed next to the PWM pins); returns a sentence for the user ("" if nothing was
        lost) and the settings put back."""
        lost = {pin: s for pin, s in self.items() if not s.held_by(pins, pin)}
        if not lost:
            return "", []
        names = ", ".join(s.describe(pin) for pin, s in lost.items())
        if not put_back:
            return (
                f"{why}; these settings were lost: {names} ([hardware] restore_after_reset is "
                "off: set them again if they are still wanted)."
            ), []
        done: list[tuple[int, Setting]] = []
        failed = []
        for pin, setting in sorted(lost.items(), key=lambda item: item[1].mode != "servo"):
            try:
                setting.apply(pins, pin)
                done.append((pin, setting))
            except BoardReset:
                raise
            except BoardError as exc:
                failed.append(f"{setting.describe(pin)} ({exc})")
        restored = ", ".join(setting.describe(pin) for pin, setting in done)
        text = f"{why}; pinclaw restored {restored}" if done else why
        return text + (f"; lost: {'; '.join(failed)}" if failed else "") + ".", done
