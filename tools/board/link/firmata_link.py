"""The Firmata link on the worker thread: one open port, the messages the board sends, and
requests answered in order.

pyfirmata2's board setup busy-waits five seconds, never checks that a Firmata board
answered, and mis-reads the capability report of current StandardFirmata (it finds two
digital pins on an Uno). So the link opens the port itself (tools/board/link/serial_port.py), waits
for
the board to name its firmware (a board that reset on open announces itself about two
seconds later; one that did not is asked), reads its capabilities and analog mapping, and
lets pyfirmata2 (tools/board/link/pyfirmata_adapter.py) only parse. No fixed sleeps: every wait ends
when the board's answer arrives, or at the deadline of the current operation.

StandardFirmata answers in the order it reads, so a request is preceded by a sync token: a
PIN_STATE_QUERY for a pin number the board does not have, which it echoes alone. An answer
of the kind asked that arrives after the echo was made after the request began.

A board that resets announces its firmware unsolicited. Once the handshake is done, such an
announcement marks the link `reset_pending`: waiting requests end with BoardReset, and the
Board (tools/board/board.py) re-reads the pins and restores what it had set.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from tools.board.link.firmata_types import (
    ANALOG_MAPPING_QUERY,
    CAPABILITY_QUERY,
    PIN_STATE_QUERY,
    QUERY_FIRMWARE,
    REPORT_ANALOG,
    REPORT_VERSION,
    SAMPLING_INTERVAL,
    SETUP_HELP,
    BoardError,
    BoardReset,
    parse_capabilities,
)
from tools.board.link.pyfirmata_adapter import firmata_class
from tools.board.link.serial_port import CountingPort, open_port
from tools.config import network_port

log = logging.getLogger(__name__)
T = TypeVar("T")
TOKENS = range(100, 128)  # sync tokens: pin numbers past any AVR board's pins
STATE_BATCH = 16
Listener = Callable[[str, int, Any], None]  # (kind, key, payload), on the reader thread


class FirmataLink:
    """One open serial port and what the board said about itself; used on the worker thread.

    The reader thread feeds every message to `seen`; requests wait on the condition for an
    answer, never longer than the deadline of the current operation. `listener` hears
    analog and port reports, resets ("reset") and the loss of the port ("lost").
    """

    def __init__(self, sp: CountingPort, port: str, timeout: float) -> None:
        self.port, self.timeout = port, timeout
        self.broken: str | None = None
        self.firmware = self.firmware_version = self.protocol_version = ""
        self.caps: list[dict[int, int]] = []  # per pin: mode -> resolution
        self.channels: dict[int, int] = {}  # pin -> analog channel
        self.ready = False  # handshake done: an unsolicited firmware report is a reset
        self.reset_pending = False
        self.resets = 0
        self.listener: Listener | None = None
        self.reporting: set[tuple[int, int]] = set()  # (REPORT_ANALOG|REPORT_DIGITAL, n)
        self._sp = sp
        self._cond = threading.Condition()
        self._seq = 0
        self._last: dict[tuple[str, int], tuple[int, Any]] = {}  # (kind, key) -> (seq, payload)
        self._deadline = time.monotonic() + timeout
        self.last_heard = time.monotonic()  # when the board last said anything
        self._running = True
        self._token = 0
        self.fb = firmata_class()(sp, self)
        self._reader = threading.Thread(target=self._read, name=f"firmata {port}", daemon=True)
        self._reader.start()

    @classmethod
    def open(cls, port: str, *, baud: int, timeout: float, sampling_ms: int) -> FirmataLink:
        sp, path = open_port(port, baud=baud, timeout=timeout)
        link = cls(sp, path, timeout)
        try:
            link.guard(lambda: link._handshake(sampling_ms))
        except BoardError:
            link.close()
            raise BoardError(link._why_not(baud)) from None
        return link

    def _handshake(self, sampling_ms: int) -> None:
        while not self._has("firmware"):
            # A board that just reset announces itself; one that did not must be asked.
            self.send(bytes([REPORT_VERSION]))
            self.sysex(QUERY_FIRMWARE, [])
            self._wait(lambda: self._has("firmware"), "the firmware query", step=0.5)
        caps = self.ask("caps", 0, lambda: self.sysex(CAPABILITY_QUERY, []))
        mapping = self.ask("mapping", 0, lambda: self.sysex(ANALOG_MAPPING_QUERY, []))
        self.caps = parse_capabilities(caps)
        self.channels = {p: ch for p, ch in enumerate(mapping[: len(self.caps)]) if ch != 127}
        if not self.usable:
            raise BoardError(f"{self.firmware} reported no usable pins")
        self.set_sampling(sampling_ms)
        self.ready = True  # every answer to the queries above has arrived (the ask synced)

    def _why_not(self, baud: int) -> str:
        if self.firmware:
            return (
                f"{self.firmware} on {self.port} did not describe its pins ({self.broken}); "
                "pinclaw needs StandardFirmata 2.5 or later."
            )
        if self._sp.received:
            return (
                f"Something on {self.port} sends data ({self._sp.received} bytes within "
                f"{self.timeout:g} s) but does not answer as a Firmata board: the board runs "
                "another sketch, or talks at another speed. Upload StandardFirmata (Arduino "
                "IDE: File > Examples > Firmata > StandardFirmata) and check that [hardware] "
                f"baud ({baud}) matches it (StandardFirmata uses 57600)."
            )
        return (
            f"No Firmata board answered on {self.port} within {self.timeout:g} s. Is "
            f"StandardFirmata uploaded, and does [hardware] baud ({baud}) match it "
            f"(StandardFirmata uses 57600)? {SETUP_HELP}"
        )

    @property
    def usable(self) -> list[int]:
        return [pin for pin, caps in enumerate(self.caps) if caps]

    def recover(self, sampling_ms: int) -> None:
        """After a reset: the board forgot its sampling interval and what it reported."""
        with self._cond:
            self.reset_pending = False
            self.resets += 1
        self.reporting.clear()
        self.set_sampling(sampling_ms)

    def guard(self, fn: Callable[[], T]) -> T:
        """Run one operation under a fresh deadline; a serial error marks the link broken."""
        import serial

        self._deadline = time.monotonic() + self.timeout
        try:
            return fn()
        except serial.SerialException as exc:
            self._fail(_brief(exc))
            raise BoardError(self._lost()) from None
        except OSError as exc:
            self._fail(_brief(exc))
            raise BoardError(self._lost()) from None

    def close(self) -> None:
        self._running = False
        if self.broken is None:
            with contextlib.suppress(Exception):
                for command, number in sorted(self.reporting):
                    self.send(bytes([command | number, 0]))
        with contextlib.suppress(Exception):
            self._sp.cancel_read()
        self._reader.join(timeout=1.0)
        with contextlib.suppress(Exception):
            self._sp.close()

    # -- requests ----------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self._sp.write(data)

    def sysex(self, command: int, data: Sequence[int]) -> None:
        self.fb.send_sysex(command, list(data))

    def set_sampling(self, ms: int) -> None:
        self.sysex(SAMPLING_INTERVAL, [ms & 0x7F, ms >> 7 & 0x7F])

    def report(self, command: int, number: int, on: bool = True) -> None:
        """Switch REPORT_ANALOG (a channel) or REPORT_DIGITAL (a port) on or off."""
        self.send(bytes([command | number, int(on)]))
        (self.reporting.add if on else self.reporting.discard)((command, number))

    def reporting_analog(self, channel: int) -> bool:
        return (REPORT_ANALOG, channel) in self.reporting

    def ask(self, kind: str | None, key: int = 0, send: Callable[[], object] | None = None) -> Any:
        """Sync, send a request, and return the first `kind` message after the sync's echo.

        The echo comes after everything the board sent before it read the request, so the
        message tells how things stood after this call began, not a report on its way.
        """
        token = TOKENS[self._token % len(TOKENS)]
        self._token += 1
        with self._cond:
            start = self._seq
        self.sysex(PIN_STATE_QUERY, [token])
        if send is not None:
            send()

        def fresh() -> bool:
            echo = self._seq_of("state", token)
            return echo > start and (kind is None or self._seq_of(kind, key) > echo)

        self._wait(fresh, f"a {kind or 'sync'} request")
        return None if kind is None else self.payload(kind, key)

    def pin_state(self, pin: int) -> tuple[int, int]:
        """The pin's mode and Firmata state, asked after whatever was sent before.

        No sync token: a pin-state answer is never sent unasked, and an unanswered query
        breaks the link, so the first answer for the pin after this call is to this query.
        """
        with self._cond:
            start = self._seq
        self.sysex(PIN_STATE_QUERY, [pin])
        self._wait(lambda: self._seq_of("state", pin) > start, "a pin state query")
        return decode_state(self.payload("state", pin))

    def pin_states(self, pins: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Each pin's mode and Firmata state as the board holds them, 16 pins a round trip:
        the answers outgrow the questions, and a board's 64-byte buffers must not overflow."""
        wanted = list(pins)
        for first in range(0, len(wanted), STATE_BATCH):
            batch = wanted[first : first + STATE_BATCH]
            with self._cond:
                start = self._seq
            for pin in batch:
                self.sysex(PIN_STATE_QUERY, [pin])
            self._wait(functools.partial(self._answered, batch, start), "pin states")
        return {pin: decode_state(self.payload("state", pin)) for pin in wanted}

    def _answered(self, pins: list[int], since: int) -> bool:
        return all(self._seq_of("state", pin) > since for pin in pins)

    def _wait(self, ready: Callable[[], bool], what: str, step: float | None = None) -> None:
        while True:
            left = self._deadline - time.monotonic()
            with self._cond:
                ok = self._cond.wait_for(
                    lambda: self.broken is not None or self.reset_pending or ready(),
                    max(0.0, left if step is None else min(left, step)),
                )
            if self.broken is not None:
                raise BoardError(self._lost())
            if self.reset_pending:
                raise BoardReset(f"The board on {self.port} reset")
            if ok:
                return
            if step is None or time.monotonic() >= self._deadline:
                self._fail(f"no answer to {what} within {self.timeout:g} s")
                raise BoardError(self._lost())
            return  # a step passed: let the caller ask again

    # -- what the board says -----------------------------------------------------------------

    def seen(self, kind: str, key: int, payload: Any) -> None:
        """Called by the reader thread for each message of interest."""
        reset = False
        self.last_heard = time.monotonic()
        with self._cond:
            self._seq += 1
            self._last[(kind, key)] = (self._seq, payload)
            if kind == "firmware":
                self.firmware, self.firmware_version = payload
                reset = self.ready and not self.reset_pending
                self.reset_pending = self.reset_pending or self.ready
            elif kind == "version":
                self.protocol_version = f"{payload[0]}.{payload[1]}"
            self._cond.notify_all()
        listener = self.listener
        if listener is not None and (reset or kind in ("analog", "port")):
            listener("reset" if reset else kind, key, payload)

    def payload(self, kind: str, key: int = 0) -> Any:
        with self._cond:
            return self._last.get((kind, key), (0, None))[1]

    def _has(self, kind: str, key: int = 0) -> bool:
        return (kind, key) in self._last

    def _seq_of(self, kind: str, key: int) -> int:
        return self._last.get((kind, key), (0, None))[0]

    def _read(self) -> None:
        try:
            while self._running:
                self.fb.iterate()
        except Exception as exc:  # the port vanished, or closing interrupted a read
            if self._running:
                self._fail(_brief(exc))

    def _fail(self, reason: str) -> None:
        with self._cond:
            first = self.broken is None
            if first:
                self.broken = reason
            self._cond.notify_all()
        listener = self.listener
        if first and listener is not None and self._running:
            listener("lost", 0, reason)

    def _lost(self) -> str:
        if network_port(self.port):
            return (
                f"Lost the board at {self.port} ({self.broken}). Is it still powered and on "
                "the network? The next hardware call reconnects."
            )
        return (
            f"Lost the board on {self.port} ({self.broken}). Is it still plugged in? "
            "The next hardware call reconnects."
        )


def decode_state(payload: Sequence[int] | None) -> tuple[int, int]:
    """A PIN_STATE_RESPONSE body after the pin: (mode, state), the state in 7-bit groups."""
    mode, *state_bytes = payload or (0,)
    return mode, sum(b << (7 * i) for i, b in enumerate(state_bytes))


def _brief(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
