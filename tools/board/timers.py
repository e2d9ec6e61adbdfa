"""Which pins share a hardware timer, and which timers the Servo library takes, per board.

An AVR makes PWM with its timers, two or three pins per timer, and StandardFirmata drives
servos with the Servo library, which takes whole 16-bit timers for its pulses: the first
servo attached (on any pin) switches its timer to plain counting, so PWM on that timer's
pins stops, and stays stopped until the MCU resets (the library never gives a timer back on
AVR). The boards pinclaw knows, from the variants' pins_arduino.h and Servo 1.3's
ServoTimers.h (12 servos per timer):

| board (MCU)            | Timer0 | Timer1 | Timer2 | Timer3  | Timer4  | Timer5     |
| ---------------------- | ------ | ------ | ------ | ------- | ------- | ---------- |
| Uno, Nano (ATmega328P) | 5, 6   | 9, 10  | 3, 11  |         |         |            |
| Mega 2560 (ATmega2560) | 4, 13  | 11, 12 | 9, 10  | 2, 3, 5 | 6, 7, 8 | 44, 45, 46 |

The Servo library takes, on an Uno or Nano, Timer1 for servos 1-12 (its only 16-bit timer
that StandardFirmata's 12 servos use); on a Mega, Timer5 for servos 1-12, then Timer1,
Timer3 and Timer4 for each next 12. So on an Uno the first servo stops PWM on 9 and 10; on
a Mega, on 44, 45 and 46.

The board is recognised from its capability report (pin count and PWM pins must both match)
(Uno, Nano: 20 or 22 pins, PWM on 3, 5, 6, 9, 10, 11; Mega: 70 pins, PWM on 2-13 and 44-46)
and a Firmata firmware name (StandardFirmata and its kin use the Servo library). Anything
else is unknown: no timer conflict is claimed, and what pinclaw reports is read back from the
board instead. Plain data and pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tools.board.link.firmata_types import pin_runs

SERVOS_PER_TIMER = 12


@dataclass(frozen=True)
class TimerModel:
    """One board's timers: which PWM pins each drives, and the order the Servo library
    takes them in."""

    name: str
    pin_counts: frozenset[int]
    timers: tuple[tuple[str, tuple[int, ...]], ...]  # timer -> the PWM pins it drives
    servo_timers: tuple[str, ...]

    @property
    def pwm_pins(self) -> frozenset[int]:
        return frozenset(pin for _, pins in self.timers for pin in pins)

    def timer_of(self, pin: int) -> str | None:
        return next((name for name, pins in self.timers if pin in pins), None)

    def pins_of(self, timer: str) -> tuple[int, ...]:
        return next((pins for name, pins in self.timers if name == timer), ())

    def held_by_servos(self, slots: int) -> tuple[str, ...]:
        """The timers the Servo library holds once `slots` servos were attached since reset."""
        used = -(-slots // SERVOS_PER_TIMER)
        return self.servo_timers[:used]

    def groups(self) -> str:
        """'Timer0: 5, 6; Timer1: 9, 10 (servos); ...' for doctor and the board info."""
        parts = []
        for name, pins in self.timers:
            servo = " (servos)" if self.servo_timers[:1] == (name,) else ""
            parts.append(f"{name}: {', '.join(map(str, pins))}{servo}")
        return "; ".join(parts)


UNO = TimerModel(
    "Arduino Uno/Nano (ATmega328P)",
    frozenset({20, 22}),
    (("Timer0", (5, 6)), ("Timer1", (9, 10)), ("Timer2", (3, 11))),
    ("Timer1",),
)
MEGA = TimerModel(
    "Arduino Mega 2560 (ATmega2560)",
    frozenset({70}),
    (
        ("Timer0", (4, 13)),
        ("Timer1", (11, 12)),
        ("Timer2", (9, 10)),
        ("Timer3", (2, 3, 5)),
        ("Timer4", (6, 7, 8)),
        ("Timer5", (44, 45, 46)),
    ),
    ("Timer5", "Timer1", "Timer3", "Timer4"),
)
MODELS = (UNO, MEGA)


def detect(pin_count: int, pwm_pins: Iterable[int], firmware: str) -> TimerModel | None:
    """The board whose pin count and PWM pins match the capability report, when a Firmata
    firmware runs it; None for anything else."""
    if "firmata" not in firmware.lower():
        return None
    pwm = frozenset(pwm_pins)
    return next((m for m in MODELS if pin_count in m.pin_counts and pwm == m.pwm_pins), None)


def servo_refusal(
    model: TimerModel, pin: int, slots_after: int, slots_now: int, pwm_in_use: Mapping[int, str]
) -> str | None:
    """Why attaching a servo on `pin` must not happen: the timer it would take drives PWM
    that is in use (pin -> what it does now); None when nothing would stop."""
    for timer in model.held_by_servos(slots_after)[len(model.held_by_servos(slots_now)) :]:
        hit = {p: what for p, what in pwm_in_use.items() if p in model.pins_of(timer)}
        if not hit:
            continue
        uses = ", ".join(f"pin {p} ({what})" for p, what in sorted(hit.items()))
        free = _free_pwm(model, model.held_by_servos(slots_after))
        return (
            f"Not done: a servo on pin {pin} makes the Servo library take {timer}, which also "
            f"drives the PWM on {uses}; that PWM would stop until the board resets. Move that "
            f"load to a PWM pin on another timer ({free}), or set {_them(hit)} with gpio_write "
            "first if it may stop."
        )
    return None


def pwm_refusal(model: TimerModel, pin: int, slots: int, servos: Iterable[int]) -> str | None:
    """Why PWM on `pin` cannot run now: the Servo library holds its timer; None if it can."""
    held = model.held_by_servos(slots)
    timer = model.timer_of(pin)
    if timer is None or timer not in held:
        return None
    attached = sorted(servos)
    since = f" (servo on pin {pin_runs(attached)})" if attached else ""
    shared = ", ".join(map(str, model.pins_of(timer)))
    return (
        f"Pin {pin} cannot do PWM now: its timer, {timer}, is held by the Servo library since "
        f"a servo was attached{since}, so PWM on pins {shared} stays off until the board "
        f"resets. Use a PWM pin on another timer: {_free_pwm(model, held)}."
    )


def _free_pwm(model: TimerModel, held: Iterable[str]) -> str:
    taken = set(held)
    free = [pin for name, pins in model.timers if name not in taken for pin in pins]
    return pin_runs(free) or "none left"


def _them(pins: Mapping[int, str]) -> str:
    return ("pin " if len(pins) == 1 else "pins ") + ", ".join(map(str, sorted(pins)))
