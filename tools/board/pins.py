"""The pins of one linked board as pinclaw knows them, and the operations the tools ask for.

Modes and values are what the board reported (PIN_STATE_QUERY), at connect, after a reset,
and after every write: a tool result tells what the board holds, not what was asked. The
servos attached since the last reset say which timers the Servo library holds
(tools/board/timers.py), so a write that the timers would defeat is refused before it is
sent, and a PWM pin whose timer was taken is never reported as running. Runs on the worker
thread of tools/board/board.py, over the link of tools/board/link/firmata_link.py.
"""

from __future__ import annotations

from tools.board.link.firmata_link import FirmataLink
from tools.board.link.firmata_types import (
    ANALOG,
    ANALOG_MESSAGE,
    EXTENDED_ANALOG,
    INPUT,
    MODE_CODES,
    MODE_NAMES,
    OUTPUT,
    PULLUP,
    PWM,
    REPORT_ANALOG,
    REPORT_DIGITAL,
    SERVO,
    SERVO_CONFIG,
    SET_DIGITAL_PIN_VALUE,
    SET_PIN_MODE,
    BoardError,
    BoardInfo,
    PinInfo,
    PinReading,
    PinToken,
    pin_runs,
)
from tools.board.timers import detect, pwm_refusal, servo_refusal

SERVO_MIN_US, SERVO_MAX_US = 544, 2400  # the Servo library's defaults


class Pins:
    """One board's pins over one link: what each is set to, and the servos since reset."""

    def __init__(self, link: FirmataLink) -> None:
        self.link = link
        self.caps, self.channels = link.caps, link.channels
        self.modes: dict[int, int] = {}
        self.values: dict[int, float] = {}
        self.driven: set[int] = set()  # pins driven as output, pwm or servo
        self.servos: set[int] = set()  # pins with a servo attached now
        self.servo_slots = 0  # StandardFirmata's servoCount: servos allotted since reset
        pwm = [pin for pin, caps in enumerate(self.caps) if PWM in caps]
        self.model = detect(len(self.caps), pwm, link.firmware)

    def adopt(self) -> None:
        """Take the board's own view of every usable pin (on connect, and after a reset)."""
        states = self.link.pin_states(self.link.usable)
        self.driven.clear()
        for pin, (mode, state) in states.items():
            self._note(pin, mode, state)
            if mode in (PWM, SERVO) or (mode == OUTPUT and state):
                self.driven.add(pin)
        self.servos = {pin for pin, (mode, _) in states.items() if mode == SERVO}
        self.servo_slots = len(self.servos)

    # -- checks, before anything is written --------------------------------------------------

    def pin_of(self, token: PinToken) -> int:
        if isinstance(token, str):
            channel = int(token[1:])
            for pin, ch in self.channels.items():
                if ch == channel:
                    return pin
            names = ", ".join(f"A{ch}" for ch in sorted(self.channels.values()))
            raise BoardError(f"{token} is not an analog input of this board; it has {names}.")
        if token >= len(self.caps) or not self.caps[token]:
            usable = pin_runs(self.link.usable)
            raise BoardError(f"Pin {token} is not usable on this board; its pins are {usable}.")
        return token

    def check(self, pin: int, mode: str) -> None:
        """Refuse a mode the pin cannot do, or one the board's timers would defeat now."""
        code = MODE_CODES[mode]
        if code not in self.caps[pin]:
            able = [p for p, caps in enumerate(self.caps) if code in caps]
            if mode == "analog":
                listed = ", ".join(f"A{self.channels[p]}" for p in able if p in self.channels)
            else:
                listed = pin_runs(able)
            label = f"A{self.channels[pin]} (pin {pin})" if pin in self.channels else f"Pin {pin}"
            raise BoardError(f"{label} cannot do {mode}; pins that can: {listed or 'none'}.")
        refusal = self._timer_refusal(pin, mode)
        if refusal:
            raise BoardError(refusal)

    def _timer_refusal(self, pin: int, mode: str) -> str | None:
        if self.model is None:
            return None
        if mode == "pwm":
            return pwm_refusal(self.model, pin, self.servo_slots, self.servos)
        if mode == "servo" and pin not in self.servos:
            after = max(self.servo_slots, len(self.servos) + 1)
            in_use = {
                p: f"duty {self.values.get(p, 0.0):.0%}"
                for p, m in self.modes.items()
                if m == PWM and p != pin
            }
            return servo_refusal(self.model, pin, after, self.servo_slots, in_use)
        return None

    # -- operations ------------------------------------------------------------------------

    def digital_write(self, pin: int, level: int) -> PinReading:
        self._set_mode(pin, OUTPUT)
        self.link.send(bytes([SET_DIGITAL_PIN_VALUE, pin, level]))
        return self._confirm(pin, OUTPUT)

    def pwm_write(self, pin: int, duty: float) -> PinReading:
        self._set_mode(pin, PWM)
        self._analog_write(pin, round(duty * (2 ** self.caps[pin][PWM] - 1)))
        return self._confirm(pin, PWM)

    def servo_write(self, pin: int, angle: int) -> PinReading:
        if self.modes.get(pin) != SERVO:
            # SERVO_CONFIG attaches the servo and sets the mode in one message.
            lo, hi = SERVO_MIN_US, SERVO_MAX_US
            self.link.sysex(SERVO_CONFIG, [pin, lo & 0x7F, lo >> 7, hi & 0x7F, hi >> 7])
            self._moded(pin, SERVO)
        self._analog_write(pin, angle)
        return self._confirm(pin, SERVO)

    def digital_read(self, pin: int, mode: int) -> PinReading:
        self._set_mode(pin, mode)
        port = pin // 8
        mask = self.link.ask("port", port, lambda: self.link.report(REPORT_DIGITAL, port))
        level = (mask >> (pin % 8)) & 1
        self.values[pin] = level
        return PinReading(pin, MODE_NAMES[mode], level)

    def analog_read(self, pin: int) -> PinReading:
        channel = self.channels[pin]
        self._set_mode(pin, ANALOG)
        raw = self.link.ask("analog", channel, lambda: self.link.report(REPORT_ANALOG, channel))
        self.values[pin] = raw
        return PinReading(pin, "analog", raw, 2 ** self.caps[pin][ANALOG] - 1)

    def watch(self, pin: int, mode: str) -> None:
        """Have the board report `pin` on its own (REPORT_ANALOG or REPORT_DIGITAL)."""
        self._set_mode(pin, MODE_CODES[mode])
        if mode == "analog":
            self.link.report(REPORT_ANALOG, self.channels[pin])
        else:
            self.link.report(REPORT_DIGITAL, pin // 8)
        self.link.ask(None)

    def pin_state(self, pin: int) -> PinReading:
        """An output's state as the board holds it, without switching the pin to input."""
        self._note(pin, *self.link.pin_state(pin))
        return self.reading(pin)

    def reading(self, pin: int) -> PinReading:
        mode = self.modes.get(pin, INPUT)
        return PinReading(
            pin, MODE_NAMES.get(mode, str(mode)), self.values.get(pin, 0.0), note=self.note(pin)
        )

    def note(self, pin: int) -> str:
        """Why the chip does not do what the pin's mode says, or ""."""
        if self.model is None or self.modes.get(pin) != PWM:
            return ""
        timer = self.model.timer_of(pin)
        if timer in self.model.held_by_servos(self.servo_slots):
            return f"not running: {timer} is held by the Servo library"
        return ""

    def info(self) -> BoardInfo:
        link = self.link
        link.ask(None)  # a board that reset answers only once it has announced itself
        pins = []
        for pin, caps in enumerate(self.caps):
            value, channel = self.values.get(pin), self.channels.get(pin, -1)
            if self.modes.get(pin) == ANALOG and link.reporting_analog(channel):
                value = link.payload("analog", channel)  # reporting keeps it fresh
            pins.append(
                PinInfo(
                    number=pin,
                    analog_channel=self.channels.get(pin),
                    capabilities={MODE_NAMES.get(m, str(m)): bits for m, bits in caps.items()},
                    mode=MODE_NAMES.get(self.modes[pin]) if pin in self.modes else None,
                    value=value,
                    note=self.note(pin),
                )
            )
        model = self.model
        return BoardInfo(
            link.port,
            link.firmware,
            link.firmware_version,
            link.protocol_version,
            tuple(pins),
            model=model.name if model else "",
            timer_groups=model.groups() if model else "",
        )

    # -- plumbing ----------------------------------------------------------------------------

    def _set_mode(self, pin: int, mode: int) -> None:
        if mode not in (OUTPUT, PWM, SERVO):
            self.driven.discard(pin)
        if self.modes.get(pin) == mode:
            return
        self.link.send(bytes([SET_PIN_MODE, pin, mode]))
        self._moded(pin, mode)

    def _moded(self, pin: int, mode: int) -> None:
        """Follow the firmware: a new mode clears the pin's state, attaches or detaches a
        servo, and starts or stops an analog pin's report."""
        if mode == SERVO:
            self.servos.add(pin)
            self.servo_slots = max(self.servo_slots, len(self.servos))
        else:
            self.servos.discard(pin)
        if pin in self.channels:
            key = (REPORT_ANALOG, self.channels[pin])
            (self.link.reporting.add if mode == ANALOG else self.link.reporting.discard)(key)
        self.modes[pin] = mode
        self.values[pin] = 0.0

    def _analog_write(self, pin: int, value: int) -> None:
        if pin < 16:
            self.link.send(bytes([ANALOG_MESSAGE | pin, value & 0x7F, value >> 7 & 0x7F]))
        else:  # past pin 15 the short analog message has no room for the pin number
            self.link.sysex(EXTENDED_ANALOG, [pin, value & 0x7F, value >> 7 & 0x7F])

    def _confirm(self, pin: int, mode: int) -> PinReading:
        """Read the pin back; the write is done when the board says so (it answers in order)."""
        self.driven.add(pin)
        reading = self.pin_state(pin)
        if self.modes.get(pin) != mode:
            raise BoardError(
                f"The board did not take it: pin {pin} is in mode {reading.mode}, not "
                f"{MODE_NAMES[mode]}."
            )
        return reading

    def _note(self, pin: int, mode: int, state: int) -> None:
        if self.modes.get(pin) != mode and mode != SERVO:
            self.servos.discard(pin)
        self.modes[pin] = mode
        if mode == PWM:
            self.values[pin] = state / (2 ** self.caps[pin].get(PWM, 8) - 1)
        elif mode in (OUTPUT, SERVO):
            self.values[pin] = float(state)
        elif mode in (INPUT, PULLUP):
            self.values.setdefault(pin, 0.0)
