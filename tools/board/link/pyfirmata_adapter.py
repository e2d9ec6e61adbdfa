"""pyfirmata2, adapted: the one module that imports it (lazily, on first connect).

pyfirmata2's Board constructor busy-waits five seconds and mis-reads the capability report
of current StandardFirmata, and its pin objects write whole ports from what they remember
(wrong after a reset), so the adapted class skips both: pyfirmata2 only parses the incoming
bytes and frames sysex messages, and every message it parses is reported to the FirmataLink
that waits for it. Port autodetection follows pyfirmata2's rule without building
its board.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from tools.board.link.firmata_types import (
    ANALOG_MAPPING_RESPONSE,
    CAPABILITY_RESPONSE,
    PIN_STATE_RESPONSE,
    SETUP_HELP,
    BoardError,
    FirmataListener,
)


@functools.cache
def firmata_class() -> type[Any]:
    """pyfirmata2's Board as a parser only: it reads the port and reports each message to
    its listener; pinclaw keeps no pin objects of pyfirmata2's."""
    import pyfirmata2

    class Firmata(pyfirmata2.Board):  # type: ignore[misc]  # pyfirmata2 is untyped
        def __init__(self, sp: Any, link: FirmataListener) -> None:
            # Not Board.__init__: it busy-waits 5 s, then guesses or mis-parses the layout.
            self.sp, self.name, self.samplerThread, self._layout = sp, link.port, None, None
            self._command_handlers: dict[int, Any] = {}  # the base class shares one dict
            self.analog: list[Any] = []
            self.digital: list[Any] = []
            self.digital_ports: list[Any] = []
            self._link = link
            self._set_default_handlers()
            self.add_cmd_handler(CAPABILITY_RESPONSE, self._capabilities)
            self.add_cmd_handler(ANALOG_MAPPING_RESPONSE, self._mapping)
            self.add_cmd_handler(PIN_STATE_RESPONSE, self._pin_state)

        def __del__(self) -> None:
            """The base class writes to the port here, which may be gone; FirmataLink closes it."""

        def _handle_report_version(self, major: int, minor: int) -> None:
            super()._handle_report_version(major, minor)
            self._link.seen("version", 0, (major, minor))

        def _handle_report_firmware(self, *data: int) -> None:
            super()._handle_report_firmware(*data)
            version = ".".join(str(part) for part in self.firmware_version)
            self._link.seen("firmware", 0, (self.firmware, version))

        def _handle_digital_message(self, port: int, lsb: int, msb: int) -> None:
            self._link.seen("port", port, lsb | msb << 7)

        def _handle_analog_message(self, channel: int, lsb: int, msb: int) -> None:
            self._link.seen("analog", channel, lsb | msb << 7)

        def _capabilities(self, *data: int) -> None:
            self._link.seen("caps", 0, data)

        def _mapping(self, *data: int) -> None:
            self._link.seen("mapping", 0, data)

        def _pin_state(self, *data: int) -> None:
            if data:
                self._link.seen("state", data[0], data[1:])

    return Firmata


def autodetect_port() -> str:
    """pyfirmata2's autodetect rule, without constructing its board (which blocks for 5 s)."""
    from serial.tools import list_ports

    ports = list_ports.comports()
    if sys.platform.startswith("linux"):
        found = [p.device for p in ports if any(k in p.device for k in ("ACM", "usbserial", "USB"))]
    elif sys.platform == "win32":
        found = [
            p.device
            for p in ports
            if p.device
            and ("USB" in p.description or not p.description or "Arduino" in p.description)
        ]
    else:
        found = [p.device for p in ports if p.vid]
    if not found:
        raise BoardError(
            f"No Arduino board is connected (no serial port looks like one). {SETUP_HELP}"
        )
    return str(sorted(found)[0])
