"""The Firmata link on the worker thread: the board's own description and pin operations.

pyfirmata2's board setup busy-waits five seconds, never checks that a Firmata board
answered, and mis-reads the capability report of current StandardFirmata (it finds two
digital pins on an Uno). So the link opens the port itself, asks the board for its firmware,
capabilities, analog mapping and pin states, and lets pyfirmata2 (tools/pyfirmata_adapter.py)
only parse and write. Everything here runs on tools/hardware.py's worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tools.board_types import (
    ANALOG,
    ANALOG_MAPPING_QUERY,
    CAPABILITY_QUERY,
    EXTENDED_ANALOG,
    INPUT,
    MODE_CODES,
    MODE_NAMES,
    OUTPUT,
    PIN_STATE_QUERY,
    PULLUP,
    PWM,
    QUERY_FIRMWARE,
    REPORT_VERSION,
    SERVO,
    SERVO_CONFIG,
    SET_PIN_MODE,
    SETUP_HELP,
    BoardError,
    BoardInfo,
    PinInfo,
    PinReading,
    PinToken,
    parse_capabilities,
    pin_runs,
)
from tools.pyfirmata_adapter import autodetect_port, firmata_class

log = logging.getLogger(__name__)
T = TypeVar("T")


class FirmataLink:
    """One open serial port and what the board said about itself; used on the worker thread.

    The reader thread feeds every message to `seen`; requests wait on the condition for an
    answer, never longer than the deadline of the current operation.
    """

    def __init__(self, sp: Any, port: str, baud: int, timeout: float) -> None:
        self.port, self.baud, self.timeout = port, baud, timeout
        self.broken: str | None = None
        self.firmware = self.firmware_version = self.protocol_version = ""
        self.caps: list[dict[int, int]] = []  # per pin: mode -> resolution
        self.channels: dict[int, int] = {}  # pin -> analog channel
        self.modes: dict[int, int] = {}
        self.values: dict[int, float] = {}
        self.driven: set[int] = set()  # pins pinclaw set to output, pwm or servo
        self._sp = sp
        self._cond = threading.Condition()
        self._seq = 0
        self._last: dict[tuple[str, int], tuple[int, Any]] = {}  # (kind, key) -> (seq, payload)
        self._deadline = time.monotonic() + timeout
        self._running = True
        self.fb = firmata_class()(sp, self)
        self._reader = threading.Thread(target=self._read, name=f"firmata {port}", daemon=True)
        self._reader.start()

    @classmethod
    def open(cls, port: str, *, baud: int, timeout: float, sampling_ms: int) -> FirmataLink:
        import serial

        path = autodetect_port() if port == "auto" else port
        try:
            exclusive = True if os.name == "posix" else None
            sp = serial.Serial(path, baud, timeout=None, write_timeout=timeout, exclusive=exclusive)
            sp.reset_input_buffer()  # whatever the board said before we listened is stale
        except (OSError, ValueError) as exc:
            raise BoardError(
                f"No Arduino board is connected (could not open {path}: {_brief(exc)}). "
                f"{SETUP_HELP}"
            ) from None
        link = cls(sp, path, baud, timeout)
        try:
            link.guard(lambda lk, _: lk._handshake(sampling_ms), 0)
        except BoardError:
            link.close()
            if not link.firmware:
                raise BoardError(
                    f"No Firmata board answered on {path} within {timeout:g} s. Is StandardFirmata "
                    f"uploaded, and does [hardware] baud ({baud}) match it (StandardFirmata uses "
                    "57600)?"
                ) from None
            raise BoardError(
                f"{link.firmware} on {path} did not describe its pins ({link.broken}); "
                "pinclaw needs StandardFirmata 2.5 or later."
            ) from None
        return link

    def _handshake(self, sampling_ms: int) -> None:
        fb = self.fb
        while not self._has("firmware"):
            # A board that just reset announces itself; one that did not must be asked.
            fb.sp.write(bytearray([REPORT_VERSION]))
            fb.send_sysex(QUERY_FIRMWARE, [])
            self._wait(lambda: self._has("firmware"), "the firmware query", step=0.5)
        fb.send_sysex(CAPABILITY_QUERY, [])
        fb.send_sysex(ANALOG_MAPPING_QUERY, [])
        self._wait(lambda: self._has("caps") and self._has("mapping"), "the capability query")
        self.caps = parse_capabilities(self._payload("caps"))
        mapping = self._payload("mapping")
        self.channels = {p: ch for p, ch in enumerate(mapping[: len(self.caps)]) if ch != 127}
        usable = [pin for pin, caps in enumerate(self.caps) if caps]
        if not usable:
            raise BoardError(f"{self.firmware} reported no usable pins")
        fb.setup_layout(
            {
                "digital": tuple(range(len(self.caps))),
                "analog": tuple(range(max(self.channels.values(), default=-1) + 1)),
                "pwm": tuple(p for p in usable if PWM in self.caps[p]),
                "disabled": tuple(
                    p for p, c in enumerate(self.caps) if not {INPUT, OUTPUT} & set(c)
                ),
            }
        )
        with self._cond:
            start = self._seq
        for pin in usable:
            fb.send_sysex(PIN_STATE_QUERY, [pin])
        self._wait(lambda: all(self._seq_of("state", p) > start for p in usable), "pin states")
        for pin in usable:
            self._note_state(pin)
        fb.setSamplingInterval(sampling_ms)
        self._ask(None)  # the board took everything above

    def guard(self, fn: Callable[[FirmataLink, int], T], pin: int) -> T:
        """Run one operation under a fresh deadline; a serial error marks the link broken."""
        import serial

        self._deadline = time.monotonic() + self.timeout
        try:
            return fn(self, pin)
        except serial.SerialException as exc:
            self._fail(_brief(exc))
            raise BoardError(self._lost()) from None
        except OSError as exc:  # pyfirmata2 reports a misuse as IOError
            raise BoardError(str(exc)) from None

    def close(self) -> None:
        self._running = False
        if self.broken is None:
            with contextlib.suppress(Exception):
                for channel in self.fb.analog:
                    channel.disable_reporting()
                for port in self.fb.digital_ports:
                    port.disable_reporting()
        with contextlib.suppress(Exception):
            self._sp.cancel_read()
        self._reader.join(timeout=1.0)
        with contextlib.suppress(Exception):
            self._sp.close()

    # -- pins, as the tools ask for them ---------------------------------------------------

    def pin_of(self, token: PinToken) -> int:
        if isinstance(token, str):
            channel = int(token[1:])
            for pin, ch in self.channels.items():
                if ch == channel:
                    return pin
            names = ", ".join(f"A{ch}" for ch in sorted(self.channels.values()))
            raise BoardError(f"{token} is not an analog input of this board; it has {names}.")
        if token >= len(self.caps) or not self.caps[token]:
            usable = [pin for pin, caps in enumerate(self.caps) if caps]
            raise BoardError(
                f"Pin {token} is not usable on this board; its pins are {pin_runs(usable)}."
            )
        return token

    def check(self, pin: int, mode: str) -> None:
        code = MODE_CODES[mode]
        if code in self.caps[pin]:
            return
        able = [p for p, caps in enumerate(self.caps) if code in caps]
        if mode == "analog":
            listed = ", ".join(f"A{self.channels[p]}" for p in able if p in self.channels)
        else:
            listed = pin_runs(able)
        label = f"A{self.channels[pin]} (pin {pin})" if pin in self.channels else f"Pin {pin}"
        raise BoardError(f"{label} cannot do {mode}; pins that can: {listed or 'none'}.")

    def digital_write(self, pin: int, level: int) -> int:
        self._set_mode(pin, OUTPUT)
        target = self.fb.digital[pin]
        target.value = None  # pyfirmata2 skips a write equal to the value it remembers
        target.write(level)  # Firmata writes a whole port; pyfirmata2 keeps the other pins
        self._remember(pin, float(level))
        return pin

    def pwm_write(self, pin: int, duty: float) -> int:
        self._set_mode(pin, PWM)
        full = 2 ** self.caps[pin][PWM] - 1
        if pin < 16:
            self.fb.digital[pin].value = None
            self.fb.digital[pin].write(duty)  # pyfirmata2 scales to 0..255
        else:  # past pin 15 the short analog message has no room for the pin number
            self._extended_analog(pin, round(duty * full))
        self._remember(pin, duty)
        return pin

    def servo_write(self, pin: int, angle: int) -> int:
        if self.modes.get(pin) != SERVO:
            # SERVO_CONFIG also sets the mode; pyfirmata2's mode setter would first move to 0°.
            self.fb.send_sysex(SERVO_CONFIG, [pin, 544 % 128, 544 >> 7, 2400 % 128, 2400 >> 7])
            self.fb.digital[pin]._mode = SERVO
            self.modes[pin] = SERVO
        if pin < 16:
            self.fb.digital[pin].value = None
            self.fb.digital[pin].write(angle)
        else:
            self._extended_analog(pin, angle)
        self._remember(pin, float(angle))
        return pin

    def digital_read(self, pin: int, mode: int) -> PinReading:
        self._set_mode(pin, mode)
        port = pin // 8
        mask = self._ask("port", port, self.fb.digital_ports[port].enable_reporting)
        level = (mask >> (pin % 8)) & 1
        self.values[pin] = level
        return PinReading(pin, MODE_NAMES[mode], level)

    def analog_read(self, pin: int) -> PinReading:
        channel = self.channels[pin]
        self._set_mode(pin, ANALOG)
        raw = self._ask("analog", channel, self.fb.analog[channel].enable_reporting)
        self.values[pin] = raw
        return PinReading(pin, "analog", raw, 2 ** self.caps[pin][ANALOG] - 1)

    def pin_state(self, pin: int) -> PinReading:
        self._ask("state", pin, lambda: self.fb.send_sysex(PIN_STATE_QUERY, [pin]))
        self._note_state(pin)
        mode = self.modes[pin]
        return PinReading(pin, MODE_NAMES.get(mode, str(mode)), self.values.get(pin, 0.0))

    def info(self) -> BoardInfo:
        pins = []
        for pin, caps in enumerate(self.caps):
            value, channel = self.values.get(pin), self.channels.get(pin, -1)
            if self.modes.get(pin) == ANALOG and self._has("analog", channel):
                value = self._payload("analog", channel)  # reporting keeps it fresh
            pins.append(
                PinInfo(
                    number=pin,
                    analog_channel=self.channels.get(pin),
                    capabilities={MODE_NAMES.get(m, str(m)): bits for m, bits in caps.items()},
                    mode=MODE_NAMES.get(self.modes[pin]) if pin in self.modes else None,
                    value=value,
                )
            )
        version = self.firmware_version
        return BoardInfo(self.port, self.firmware, version, self.protocol_version, tuple(pins))

    # -- plumbing ----------------------------------------------------------------------------

    def _set_mode(self, pin: int, mode: int) -> None:
        if mode not in (OUTPUT, PWM, SERVO):
            self.driven.discard(pin)
        if self.modes.get(pin) == mode:
            return
        if mode == ANALOG:  # pyfirmata2's analog pins would send their channel as the pin
            self.fb.sp.write(bytearray([SET_PIN_MODE, pin, ANALOG]))
            if self.fb.digital[pin].mode != -1:  # so its port writes leave the pin alone
                self.fb.digital[pin]._mode, self.fb.digital[pin].value = ANALOG, None
        else:
            self.fb.digital[pin].mode = mode  # input modes also switch on port reporting
        self.modes[pin] = mode
        self.values[pin] = 0.0  # Firmata clears a pin's state when its mode changes

    def _remember(self, pin: int, value: float) -> None:
        self.values[pin] = value
        self.driven.add(pin)
        self._ask(None)  # returns once the board has taken the write: it answers in order

    def _extended_analog(self, pin: int, value: int) -> None:
        self.fb.send_sysex(EXTENDED_ANALOG, [pin, value & 0x7F, (value >> 7) & 0x7F])

    def _note_state(self, pin: int) -> None:
        """Adopt the mode and value the board reported, so port writes keep other pins as
        they are and board_info shows the truth."""
        mode, *state_bytes = self._payload("state", pin) or (INPUT,)
        state = sum(b << (7 * i) for i, b in enumerate(state_bytes))
        self.modes[pin] = mode
        target = self.fb.digital[pin] if pin < len(self.fb.digital) else None
        if mode == PWM:
            self.values[pin] = state / (2 ** self.caps[pin].get(PWM, 8) - 1)
        elif mode in (OUTPUT, SERVO):
            self.values[pin] = float(state)
        if target is not None and target.mode != -1 and mode in (INPUT, OUTPUT, PWM, SERVO, PULLUP):
            target._mode = mode
            target.value = state if mode == OUTPUT else None

    def _ask(self, kind: str | None, key: int = 0, send: Callable[[], object] | None = None) -> Any:
        """Ping the board, send a request, and return the first `kind` message after the pong.

        The board answers in order, so that message tells how things stood after this call
        began, not a report that was already on its way.
        """
        with self._cond:
            start = self._seq
        self.fb.sp.write(bytearray([REPORT_VERSION]))
        if send is not None:
            send()

        def fresh() -> bool:
            pong = self._seq_of("version", 0)
            return pong > start and (kind is None or self._seq_of(kind, key) > pong)

        self._wait(fresh, f"a {kind or 'sync'} request")
        return None if kind is None else self._payload(kind, key)

    def _wait(self, ready: Callable[[], bool], what: str, step: float | None = None) -> None:
        while True:
            left = self._deadline - time.monotonic()
            with self._cond:
                ok = self._cond.wait_for(
                    lambda: self.broken is not None or ready(),
                    max(0.0, left if step is None else min(left, step)),
                )
            if self.broken is not None:
                raise BoardError(self._lost())
            if ok:
                return
            if step is None or time.monotonic() >= self._deadline:
                self._fail(f"no answer to {what} within {self.timeout:g} s")
                raise BoardError(self._lost())
            return  # a step passed: let the caller ask again

    def seen(self, kind: str, key: int, payload: Any) -> None:
        """Called by the reader thread for each message of interest."""
        with self._cond:
            self._seq += 1
            self._last[(kind, key)] = (self._seq, payload)
            if kind == "firmware":
                self.firmware, self.firmware_version = payload
            elif kind == "version":
                self.protocol_version = f"{payload[0]}.{payload[1]}"
            self._cond.notify_all()

    def _has(self, kind: str, key: int = 0) -> bool:
        return (kind, key) in self._last

    def _seq_of(self, kind: str, key: int) -> int:
        return self._last.get((kind, key), (0, None))[0]

    def _payload(self, kind: str, key: int = 0) -> Any:
        with self._cond:
            return self._last.get((kind, key), (0, None))[1]

    def _read(self) -> None:
        try:
            while self._running:
                self.fb.iterate()
        except Exception as exc:  # the port vanished, or closing interrupted a read
            if self._running:
                self._fail(_brief(exc))

    def _fail(self, reason: str) -> None:
        with self._cond:
            if self.broken is None:
                self.broken = reason
            self._cond.notify_all()

    def _lost(self) -> str:
        return (
            f"Lost the board on {self.port} ({self.broken}). Is it still plugged in? "
            "The next hardware call reconnects."
        )


def _brief(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
