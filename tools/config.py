"""Settings of the tools (plain pydantic, no heavy imports: loading the config stays fast)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RECALL_THRESHOLD = 0.3  # memory search scores below this are "not about the same thing"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Autonomy = Literal["read_only", "supervised", "full"]


def _names(text: str) -> tuple[str, ...]:
    """A list of short names written as one line of text, in order."""
    return tuple(text.split())


DEFAULT_ALLOWED_COMMANDS = _names(
    "ls cat head tail wc grep find echo pwd date du df sort uniq diff mkdir touch cp mv git"
)

# Refused as paths by the file tools and the shell's parser. The OS sandbox exposes none of
# them but what programs need to run: /proc (the command's own processes), /dev (null,
# zero, urandom, tty) and the files of /etc listed in tools/sandbox/etc_files.py (the loader
# cache, name lookups, passwd and group for user names, certificates, the time zone), which
# a program may read without naming them (`ls -l` reads /etc/passwd).
DEFAULT_FORBIDDEN_PATHS = _names(
    "/etc /root /proc /sys /boot /dev /var ~/.ssh ~/.gnupg ~/.aws ~/.config"
)

SandboxSetting = Literal["auto", "bubblewrap", "landlock", "off"]


class SecuritySettings(_Section):
    """What the tools may touch: enforced by the tools, and summarised in the prompt."""

    autonomy: Autonomy = "supervised"
    allowed_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_COMMANDS))
    forbidden_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_FORBIDDEN_PATHS))
    # Workspace files only the owner's own private turns may read or write (with
    # MEMORY.md and USER.md, which are always private): e.g. ["diary.md", "finance/"].
    owner_private: list[str] = Field(default_factory=list)
    sandbox: SandboxSetting = "auto"
    sandbox_network: bool = True
    approval_timeout_s: float = Field(default=120.0, gt=0, le=3600)

    @field_validator("owner_private")
    @classmethod
    def _inside_the_workspace(cls, names: list[str]) -> list[str]:
        for name in names:
            parts = name.replace("\\", "/").split("/")
            if not name.strip() or name.startswith(("/", "~")) or ".." in parts:
                raise ValueError(f"{name!r}: a path relative to the workspace, without ..")
        return names


class ShellSettings(_Section):
    timeout_s: float = Field(default=30.0, gt=0)
    max_output_chars: int = Field(default=20_000, ge=200)
    # Address space per process (RLIMIT_AS; a cgroup's memory.max for the whole command
    # where one can be made with the memory controller); 0 = none. A JVM wants 4096.
    memory_mb: int = Field(default=1024, ge=0)


class MemorySettings(_Section):
    """Long-term memory (tools/memory/store.py): the tools, embeddings, recall per turn."""

    enabled: bool = True
    max_recall: int = Field(default=5, ge=1, le=100)  # memory_recall's results by default
    embedding_model: str = ""  # LiteLLM model; "" = search by words only
    auto_recall: bool = True  # relevant memories added to each user message
    recall_limit: int = Field(default=3, ge=1, le=20)
    recall_threshold: float = Field(default=RECALL_THRESHOLD, ge=0.0, le=1.0)
    share_group_memories: bool = False


PinMode = Literal["output", "input", "input_pullup", "pwm", "analog", "servo"]

_ANALOG_NAME = re.compile(r"^A(\d{1,2})$")
_DIGITAL_NAME = re.compile(r"^D?(\d{1,3})$")
_PIN_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_PIN_SHAPE = "a pin is a digital pin number (13) or an analog name ('A0')"


def pin_token(value: int | str) -> int | str:
    """One spelling per pin, so `allowed_pins` and named pins compare equal: 13 or "A0".

    "13" and "D13" become 13, "a0" becomes "A0"; anything else is a ValueError.
    """
    if isinstance(value, bool):
        raise ValueError(_PIN_SHAPE)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(_PIN_SHAPE)
        return value
    text = value.strip().upper()
    if match := _ANALOG_NAME.match(text):
        return f"A{int(match.group(1))}"
    if match := _DIGITAL_NAME.match(text):
        return int(match.group(1))
    raise ValueError(_PIN_SHAPE)


class PinSettings(_Section):
    """A named pin: `[hardware.pins.fan] pin = 9, mode = "pwm", description = "ceiling fan"`.

    The mode says how it is wired, so a tool that would drive it another way is refused.
    """

    pin: int | str
    mode: PinMode = "output"
    description: str = ""

    @field_validator("pin")
    @classmethod
    def _pin_shape(cls, value: int | str) -> int | str:
        return pin_token(value)


class HardwareSettings(_Section):
    """An Arduino running StandardFirmata on a serial port; tools touch only the pins listed."""

    enabled: bool = False
    port: str = "auto"  # "auto": the first port that looks like an Arduino, or a path
    baud: int = Field(default=57_600, gt=0)
    connect_timeout_s: float = Field(default=10.0, gt=0, le=120)
    sampling_interval_ms: int = Field(default=100, ge=1, le=16_383)
    connect_on_start: bool = False
    require_approval: bool = False  # supervised: every pin write asks the owner in the chat
    restore_after_reset: bool = True  # a board that reset gets back the outputs pinclaw set
    allowed_pins: list[int | str] = Field(default_factory=list)
    pins: dict[str, PinSettings] = Field(default_factory=dict)

    @field_validator("allowed_pins")
    @classmethod
    def _allowed_shape(cls, value: list[int | str]) -> list[int | str]:
        return list(dict.fromkeys(pin_token(item) for item in value))

    @field_validator("pins")
    @classmethod
    def _names(cls, value: dict[str, PinSettings]) -> dict[str, PinSettings]:
        owners: dict[int | str, str] = {}
        for name, pin in value.items():
            if not _PIN_NAME.match(name):
                raise ValueError(
                    f"pin name {name!r}: use lowercase letters, digits, '_' or '-' ('fan')"
                )
            if _ANALOG_NAME.match(name.upper()) or _DIGITAL_NAME.match(name.upper()):
                raise ValueError(f"pin name {name!r} reads like a pin; pick a word ('fan')")
            if pin.pin in owners:
                raise ValueError(f"pin {pin.pin} is named both {owners[pin.pin]!r} and {name!r}")
            owners[pin.pin] = name
        return value
