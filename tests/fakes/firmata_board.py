"""A StandardFirmata board on a pseudo-terminal: the test double for an Arduino on USB serial.

pyfirmata2 opens the pty's path as its serial port, so tests run the real client over the
real protocol bytes. The emulator answers what StandardFirmata answers (version, firmware,
capability, analog-mapping and pin-state queries) and applies pin modes, digital, analog and
extended-analog writes, servo config, the sampling interval and reporting to a pin table that
tests read and set. It follows StandardFirmata 2.5's callbacks, including its quirks: setting a
mode clears the pin's state, enabling a report sends the current value at once.

`close()` makes the port vanish, as unplugging the board does; `reopen()` plugs it back in at
the same path (a symlink re-pointed at a new pty), reset as after a power cycle. `reset()`
resets the MCU with the port kept open: after `boot_s` (StandardFirmata blinks for about two
seconds) it announces its version and firmware unsolicited, and what arrived meanwhile is
read then. The Servo library's hold on Timer1 is modelled: once a servo was attached, PWM on
the layout's `servo_timer_pins` (9 and 10 on an Uno) stops until the MCU resets, so `pwm()`
says what the chip makes, where `state()` says what Firmata remembers. Opening the port does
not reset the emulator (the simavr rig in tests/simavr does that).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import tty
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["MEGA", "NANO", "UNO", "FirmataBoard", "Layout"]

INPUT, OUTPUT, ANALOG, PWM, SERVO, I2C, PULLUP = 0, 1, 2, 3, 4, 6, 11
MODE_NAMES = {0: "input", 1: "output", 2: "analog", 3: "pwm", 4: "servo", 6: "i2c",
              11: "input_pullup"}  # fmt: skip
DIGITAL_MESSAGE, ANALOG_MESSAGE, REPORT_ANALOG, REPORT_DIGITAL = 0x90, 0xE0, 0xC0, 0xD0
START_SYSEX, SET_PIN_MODE, SET_DIGITAL_PIN_VALUE, END_SYSEX = 0xF0, 0xF4, 0xF5, 0xF7
REPORT_VERSION, SYSTEM_RESET = 0xF9, 0xFF
ANALOG_MAPPING_QUERY, ANALOG_MAPPING_RESPONSE, CAPABILITY_QUERY = 0x69, 0x6A, 0x6B
CAPABILITY_RESPONSE, PIN_STATE_QUERY, PIN_STATE_RESPONSE = 0x6C, 0x6D, 0x6E
EXTENDED_ANALOG, SERVO_CONFIG, REPORT_FIRMWARE, SAMPLING_INTERVAL = 0x6F, 0x70, 0x79, 0x7A
ARGUMENTS = {DIGITAL_MESSAGE: 2, ANALOG_MESSAGE: 2, REPORT_ANALOG: 1, REPORT_DIGITAL: 1,
             SET_PIN_MODE: 2, SET_DIGITAL_PIN_VALUE: 2}  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """Which pins can do what, as StandardFirmata's Boards.h says for one board."""

    name: str
    total_pins: int
    digital: frozenset[int]
    analog: tuple[int, ...]  # pins in channel order: analog[0] is A0
    pwm: frozenset[int]
    i2c: frozenset[int] = frozenset()
    servo_timer_pins: frozenset[int] = frozenset()  # PWM pins of the timer servos take

    def capabilities(self, pin: int) -> dict[int, int]:
        """Mode -> resolution, in the order StandardFirmata's capability response lists them."""
        caps: dict[int, int] = {}
        if pin in self.digital:
            caps |= {INPUT: 1, PULLUP: 1, OUTPUT: 1}
        if pin in self.analog:
            caps[ANALOG] = 10
        if pin in self.pwm:
            caps[PWM] = 8
        if pin in self.digital:
            caps[SERVO] = 14
        if pin in self.i2c:
            caps[I2C] = 1
        return caps


UNO = Layout("uno", 20, frozenset(range(2, 20)), tuple(range(14, 20)),
             frozenset({3, 5, 6, 9, 10, 11}), frozenset({18, 19}), frozenset({9, 10}))  # fmt: skip
# StandardFirmata's Mega 2560: pins 0 and 1 are the serial port; servos take Timer5 first.
MEGA = Layout("mega", 70, frozenset(range(2, 70)), tuple(range(54, 70)),
              frozenset({*range(2, 14), 44, 45, 46}), frozenset({20, 21}),
              frozenset({44, 45, 46}))  # fmt: skip
# An Uno plus A6 and A7, which (as on a Nano) are analog inputs and nothing else.
NANO = Layout("nano", 22, frozenset(range(2, 20)), tuple(range(14, 22)),
              frozenset({3, 5, 6, 9, 10, 11}), frozenset({18, 19}), frozenset({9, 10}))  # fmt: skip


@dataclass
class _Pin:
    mode: int
    state: int = 0  # Firmata's pinState: output level, PWM duty, servo angle, pull-up flag


class FirmataBoard:
    """An emulated board at `path`, running from construction until `close()`.

    Read the world with `mode()`, `state()`, `level()`, `transitions()` and `events()`; change
    it with `set_input()` and `set_analog()`. With `answers=False` it is a serial device that
    says nothing (a board without Firmata). Pins are numbers or analog names ("A0").
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        layout: Layout = UNO,
        firmware: str = "StandardFirmata.ino",
        version: tuple[int, int] = (2, 5),
        answers: bool = True,
    ) -> None:
        self.path = Path(path)
        self.layout, self.firmware, self.version, self.answers = layout, firmware, version, answers
        self._lock = threading.RLock()
        self._inputs: dict[int, int] = {}  # what the outside world drives digital inputs to
        self._analog = [0] * len(layout.analog)  # raw readings per channel
        self._transitions: dict[int, int] = {}
        self._changed_at: dict[int, float] = {}
        self._events: list[tuple[str, int, object]] = []
        self._thread: threading.Thread | None = None
        self.received = 0  # bytes read from the client
        self.resets = 0
        self._boot_until = 0.0
        self._announce = False
        self._servo_timer_taken = False
        self._reset()
        self._open()

    # -- the world, for tests ----------------------------------------------------------------

    def mode(self, pin: int | str) -> str:
        with self._lock:
            return MODE_NAMES.get(self._pins[self._number(pin)].mode, "?")

    def state(self, pin: int | str) -> int:
        """Firmata's pin state: an output's level, a PWM duty (0-255), a servo angle."""
        with self._lock:
            return self._pins[self._number(pin)].state

    def level(self, pin: int | str) -> int:
        """The pin's electrical level: what an output drives, or what drives an input."""
        with self._lock:
            number = self._number(pin)
            return self._level(number, self._pins[number])

    def pwm(self, pin: int | str) -> int | None:
        """The duty (0-255) the chip's timer makes on `pin`; None when it makes no PWM there."""
        with self._lock:
            number = self._number(pin)
            target = self._pins[number]
            if target.mode != PWM or self._timer_held(number):
                return None
            return target.state

    def transitions(self, pin: int | str) -> int:
        """How many times the output level of `pin` has changed."""
        with self._lock:
            return self._transitions.get(self._number(pin), 0)

    def changed_at(self, pin: int | str) -> float:
        """time.monotonic() of the last change of `pin`'s output level (0.0: never)."""
        with self._lock:
            return self._changed_at.get(self._number(pin), 0.0)

    def events(self) -> list[tuple[str, int, object]]:
        """Every change the client made, in order: ("mode", pin, name), ("level", pin, 0|1),
        ("pwm", pin, duty), ("servo", pin, angle)."""
        with self._lock:
            return list(self._events)

    @property
    def sampling_interval_ms(self) -> int:
        return self._interval_ms

    def set_input(self, pin: int | str, level: int) -> None:
        with self._lock:
            number = self._number(pin)
            self._inputs[number] = level
            if number // 8 in self._reported_ports and self._pins[number].mode in (INPUT, PULLUP):
                self._send_port(number // 8)

    def set_analog(self, pin: int | str, raw: int) -> None:
        with self._lock:
            self._analog[self.layout.analog.index(self._number(pin))] = raw

    # -- plugging in and out -----------------------------------------------------------------

    def close(self) -> None:
        """Make the port vanish: the client's next read or write fails, as on unplugging."""
        if self._thread is None:
            return
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=2)
        self._thread = None
        with self._lock:
            for fd in (self._master, self._slave, self._wake_r, self._wake_w):
                os.close(fd)
        self.path.unlink(missing_ok=True)

    def reset(self, boot_s: float = 0.0) -> None:
        """Reset the MCU, the port staying open: every pin back to its default, then, after
        `boot_s`, the firmware announces itself (as after a DTR edge or the reset button)."""
        with self._lock:
            with contextlib.suppress(OSError):  # what was on its way is lost with the reset
                while os.read(self._master, 4096):
                    pass
            self._reset()
            self._servo_timer_taken = False
            self.resets += 1
            self._boot_until = time.monotonic() + boot_s
            self._announce = True
        os.write(self._wake_w, b"x")

    def reopen(self) -> None:
        """Plug the board back in at the same path, reset as after a power cycle."""
        self.close()
        with self._lock:
            self._reset()
        self._open()

    def __enter__(self) -> FirmataBoard:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _open(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self._wake_r, self._wake_w = os.pipe()
        link = self.path.with_name(self.path.name + ".new")
        link.unlink(missing_ok=True)
        link.symlink_to(os.ttyname(self._slave))
        link.replace(self.path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="firmata-emulator", daemon=True)
        self._thread.start()

    def _timer_held(self, pin: int) -> bool:
        return self._servo_timer_taken and pin in self.layout.servo_timer_pins

    def _reset(self) -> None:
        """StandardFirmata's systemResetCallback: analog pins analog, digital pins low outputs
        (the Servo library's timer stays taken: only an MCU reset gives it back)."""
        layout = self.layout
        self._pins = [
            _Pin(ANALOG if p in layout.analog else OUTPUT if p in layout.digital else INPUT)
            for p in range(layout.total_pins)
        ]
        self._reported_ports: set[int] = set()
        self._reported_channels: set[int] = set()
        self._interval_ms = 19
        self._command: int | None = None
        self._args: list[int] = []
        self._sysex: bytearray | None = None

    def _run(self) -> None:
        next_sample = time.monotonic()
        while not self._stop.is_set():
            wait = max(0.0, min(0.05, next_sample - time.monotonic()))
            booting = time.monotonic() < self._boot_until
            watched = [self._wake_r] if booting else [self._wake_r, self._master]
            ready, _, _ = select.select(watched, [], [], wait)
            if self._wake_r in ready:
                os.read(self._wake_r, 64)
            if booting:
                continue
            if self._announce:
                with self._lock:
                    self._announce = False
                    self._send(bytes([REPORT_VERSION, *self.version]))
                    self._on_sysex(REPORT_FIRMWARE, [])
            if self._master in ready:
                try:
                    data = os.read(self._master, 4096)
                except BlockingIOError:
                    data = b""
                except OSError:
                    return
                with self._lock:
                    self._feed(data)
            now = time.monotonic()
            if now >= next_sample:
                with self._lock:
                    for channel in sorted(self._reported_channels):
                        if self._pins[self.layout.analog[channel]].mode == ANALOG:
                            self._send_analog(channel)
                next_sample += self._interval_ms / 1000
                if next_sample < now:
                    next_sample = now + self._interval_ms / 1000

    # -- the protocol ------------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        for byte in data:
            self.received += 1
            if self._sysex is not None:
                if byte == END_SYSEX:
                    body, self._sysex = self._sysex, None
                    if body and self.answers:
                        self._on_sysex(body[0], list(body[1:]))
                else:
                    self._sysex.append(byte)
            elif byte == START_SYSEX:
                self._sysex = bytearray()
            elif byte & 0x80:
                self._command, self._args = byte, []
                self._maybe_dispatch()
            elif self._command is not None:
                self._args.append(byte)
                self._maybe_dispatch()

    def _maybe_dispatch(self) -> None:
        command = self._command
        assert command is not None
        kind = command & 0xF0 if command < 0xF0 else command
        if len(self._args) < ARGUMENTS.get(kind, 0):
            return
        args, self._command = self._args, None
        if not self.answers:
            return
        low = command & 0x0F
        if kind == DIGITAL_MESSAGE:
            self._write_port(low, args[0] | args[1] << 7)
        elif kind == ANALOG_MESSAGE:
            self._analog_write(low, args[0] | args[1] << 7)
        elif kind == REPORT_ANALOG:
            self._report_analog(low, bool(args[0]))
        elif kind == REPORT_DIGITAL:
            self._report_port(low, bool(args[0]))
        elif kind == SET_PIN_MODE:
            self._set_mode(args[0], args[1])
        elif kind == SET_DIGITAL_PIN_VALUE and self._valid(args[0]):
            if self._pins[args[0]].mode == OUTPUT:
                self._set_output(args[0], args[1] & 1)
        elif kind == REPORT_VERSION:
            self._send(bytes([REPORT_VERSION, *self.version]))
        elif kind == SYSTEM_RESET:
            self._reset()

    def _on_sysex(self, command: int, args: list[int]) -> None:
        if command == REPORT_FIRMWARE:
            name = [part for char in self.firmware.encode() for part in (char & 0x7F, char >> 7)]
            self._sysex_reply(REPORT_FIRMWARE, [*self.version, *name])
        elif command == CAPABILITY_QUERY:
            body: list[int] = []
            for pin in range(self.layout.total_pins):
                body += [x for pair in self.layout.capabilities(pin).items() for x in pair] + [127]
            self._sysex_reply(CAPABILITY_RESPONSE, body)
        elif command == ANALOG_MAPPING_QUERY:
            analog = self.layout.analog
            mapping = [analog.index(p) if p in analog else 127 for p in range(len(self._pins))]
            self._sysex_reply(ANALOG_MAPPING_RESPONSE, mapping)
        elif command == PIN_STATE_QUERY and args:
            pin, reply = args[0], [args[0]]
            if pin < len(self._pins):
                state = self._pins[pin].state
                reply += [self._pins[pin].mode, state & 0x7F]
                reply += [state >> 7 & 0x7F] if state & 0xFF80 else []
            self._sysex_reply(PIN_STATE_RESPONSE, reply)
        elif command == SAMPLING_INTERVAL and len(args) > 1:
            self._interval_ms = max(1, args[0] | args[1] << 7)
        elif command == SERVO_CONFIG and len(args) > 4 and args[0] in self.layout.digital:
            self._set_mode(args[0], SERVO)
            self._servo_timer_taken = True
        elif command == EXTENDED_ANALOG and len(args) > 1:
            self._analog_write(args[0], sum(b << (7 * i) for i, b in enumerate(args[1:])))

    def _set_mode(self, pin: int, mode: int) -> None:
        if not self._valid(pin) or mode not in self.layout.capabilities(pin):
            return  # StandardFirmata ignores a mode the pin does not have
        if pin in self.layout.analog:  # switching to analog starts its report, else stops it
            self._report_analog(self.layout.analog.index(pin), mode == ANALOG)
        if mode == OUTPUT:
            self._set_output(pin, 0)
        if mode == SERVO:
            self._servo_timer_taken = True  # attaching a servo takes the timer for good
        target = self._pins[pin]
        target.mode, target.state = mode, 1 if mode == PULLUP else 0
        self._events.append(("mode", pin, MODE_NAMES[mode]))

    def _write_port(self, port: int, mask: int) -> None:
        for pin in range(port * 8, min(port * 8 + 8, len(self._pins))):
            target, bit = self._pins[pin], mask >> (pin % 8) & 1
            if pin not in self.layout.digital:
                continue
            if target.mode == OUTPUT:
                self._set_output(pin, bit)
            elif target.mode == INPUT:
                target.state = bit  # a 1 here turns on the pull-up, for old clients

    def _set_output(self, pin: int, level: int) -> None:
        target = self._pins[pin]
        if target.mode == OUTPUT and target.state != level:
            self._transitions[pin] = self._transitions.get(pin, 0) + 1
            self._changed_at[pin] = time.monotonic()
            self._events.append(("level", pin, level))
        target.state = level

    def _analog_write(self, pin: int, value: int) -> None:
        if not self._valid(pin):
            return
        target = self._pins[pin]
        if target.mode in (PWM, SERVO):
            target.state = value
            self._events.append(("pwm" if target.mode == PWM else "servo", pin, value))

    def _report_analog(self, channel: int, on: bool) -> None:
        if channel >= len(self.layout.analog):
            return
        if on:
            self._reported_channels.add(channel)
            self._send_analog(channel)
        else:
            self._reported_channels.discard(channel)

    def _report_port(self, port: int, on: bool) -> None:
        if on:
            self._reported_ports.add(port)
            self._send_port(port)
        else:
            self._reported_ports.discard(port)

    def _send_analog(self, channel: int) -> None:
        raw = self._analog[channel]
        self._send(bytes([ANALOG_MESSAGE | channel, raw & 0x7F, raw >> 7 & 0x7F]))

    def _send_port(self, port: int) -> None:
        mask = 0
        for pin in range(port * 8, min(port * 8 + 8, len(self._pins))):
            if self._pins[pin].mode in (INPUT, PULLUP):
                mask |= self._level(pin, self._pins[pin]) << (pin % 8)
        self._send(bytes([DIGITAL_MESSAGE | port, mask & 0x7F, mask >> 7 & 0x7F]))

    def _sysex_reply(self, command: int, body: list[int]) -> None:
        self._send(bytes([START_SYSEX, command, *body, END_SYSEX]))

    def _send(self, data: bytes) -> None:
        """Write to the client; with nobody reading and the buffer full, bytes are lost, as
        on a real serial line."""
        while data:
            try:
                data = data[os.write(self._master, data) :]
            except OSError:
                return

    def _level(self, pin: int, target: _Pin) -> int:
        if target.mode == OUTPUT:
            return target.state
        return self._inputs.get(pin, 1 if target.mode == PULLUP else 0)

    def _valid(self, pin: int) -> bool:
        return 0 <= pin < len(self._pins)

    def _number(self, pin: int | str) -> int:
        if isinstance(pin, str):
            return self.layout.analog[int(pin.upper().removeprefix("A"))]
        return pin
