"""What a Firmata board is, in plain data: pin modes, the board's own description, errors.

Shared by the link (tools/board/link/firmata_link.py), the Board (tools/board/board.py) and the
tools
(tools/board/pin_tools.py); no I/O and no pyfirmata2 here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

PinToken = int | str  # 13 or "A0", as tools.config.pin_token spells pins

INPUT, OUTPUT, ANALOG, PWM, SERVO, PULLUP = 0, 1, 2, 3, 4, 11
MODE_NAMES = {
    0: "input",
    1: "output",
    2: "analog",
    3: "pwm",
    4: "servo",
    5: "shift",
    6: "i2c",
    7: "onewire",
    8: "stepper",
    9: "encoder",
    10: "serial",
    11: "input_pullup",
    127: "ignore",
}
MODE_CODES = {name: code for code, name in MODE_NAMES.items()}
# Firmata message bytes not in pyfirmata2's public names.
ANALOG_MAPPING_QUERY, ANALOG_MAPPING_RESPONSE, CAPABILITY_QUERY = 0x69, 0x6A, 0x6B
CAPABILITY_RESPONSE, PIN_STATE_QUERY, PIN_STATE_RESPONSE = 0x6C, 0x6D, 0x6E
EXTENDED_ANALOG, SERVO_CONFIG, QUERY_FIRMWARE, SAMPLING_INTERVAL = 0x6F, 0x70, 0x79, 0x7A
ANALOG_MESSAGE, REPORT_ANALOG, REPORT_DIGITAL = 0xE0, 0xC0, 0xD0
SET_PIN_MODE, SET_DIGITAL_PIN_VALUE, REPORT_VERSION = 0xF4, 0xF5, 0xF9

SETUP_HELP = (
    "Plug the board in over USB with StandardFirmata uploaded (Arduino IDE: File > Examples > "
    'Firmata > StandardFirmata), then set port = "auto" or a path such as "/dev/ttyACM0" '
    "under [hardware] in config.toml."
)


class FirmataListener(Protocol):
    """Who hears the messages the protocol parser decodes (the link, in
    tools/board/link/firmata_link.py)."""

    port: str

    def seen(self, kind: str, key: int, payload: Any) -> None: ...


class BoardError(Exception):
    """A failure the model can report and the user can act on: the message says what to do."""


class BoardReset(BoardError):
    """The board announced itself again mid-session: it reset, and forgot every pin."""


@dataclass(frozen=True)
class PinInfo:
    """One pin as the board reported it, with the mode and value pinclaw last saw."""

    number: int
    analog_channel: int | None
    capabilities: dict[str, int]  # mode name -> resolution in bits
    mode: str | None
    value: float | None  # a level (0/1), a PWM duty (0..1), an angle or a raw analog reading
    note: str = ""  # why the chip does not do what the mode says (a timer held by servos)

    @property
    def label(self) -> str:
        if self.analog_channel is None:
            return f"pin {self.number}"
        return f"A{self.analog_channel} (pin {self.number})"


@dataclass(frozen=True)
class BoardInfo:
    """The board as it describes itself: what `agent doctor` and hardware_board_info show."""

    port: str
    firmware: str
    firmware_version: str
    protocol_version: str
    pins: tuple[PinInfo, ...]
    model: str = ""  # "Arduino Uno/Nano (ATmega328P)", or "" when not recognised
    timer_groups: str = ""  # "Timer0: 5, 6; Timer1: 9, 10 (servos); ..."
    resets: str = ""  # what the last reset seen did to pinclaw's outputs, or ""

    @property
    def pin_count(self) -> int:
        return len(self.pins)


@dataclass(frozen=True)
class PinReading:
    pin: int
    mode: str
    value: float  # a level (input, output), a duty (pwm), an angle (servo), a raw reading (analog)
    full_scale: int = 1  # 1023 for a 10-bit analog input
    note: str = ""  # why the chip does not do what the mode says


def parse_capabilities(data: Sequence[int]) -> list[dict[int, int]]:
    """Per pin, mode -> resolution: (mode, bits) pairs, each pin ended by 127."""
    pins: list[dict[int, int]] = []
    current: dict[int, int] = {}
    pair: list[int] = []
    for byte in data:
        if byte == 127:
            pins.append(current)
            current, pair = {}, []
            continue
        pair.append(byte)
        if len(pair) == 2:
            current[pair[0]] = pair[1]
            pair = []
    return pins


def pin_runs(pins: Sequence[int]) -> str:
    """2, 3, 4, 5, 9 -> "2–5, 9"."""
    runs: list[list[int]] = []
    for pin in sorted(pins):
        if runs and pin == runs[-1][-1] + 1:
            runs[-1].append(pin)
        else:
            runs.append([pin])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
