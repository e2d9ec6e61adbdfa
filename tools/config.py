"""Settings of the tools (plain pydantic, no heavy imports: loading the config stays fast)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

RECALL_THRESHOLD = 0.3  # memory search scores below this are "not about the same thing"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


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
    """"read_only", "supervised" or "full\""""
    allowed_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_COMMANDS))
    """programs shell may run (not checked when autonomy is "full")"""
    forbidden_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_FORBIDDEN_PATHS))
    """refused as paths by the file tools and the shell, also inside the workspace (the home's
    config.toml, state.db and logs always are); the sandbox shows of them only what programs need
    to run"""
    # Workspace files only the owner's own private turns may read or write (with
    # MEMORY.md and USER.md, which are always private): e.g. ["diary.md", "finance/"].
    owner_private: list[str] = Field(default_factory=list)
    """workspace files only your own private chats may touch, besides MEMORY.md and USER.md, e.g.
    ["diary.md"]"""
    sandbox: SandboxSetting = "auto"
    """OS sandbox around every command: "auto", "bubblewrap", "landlock" or "off\""""
    sandbox_network: bool = True
    """false: commands get no network at all"""
    approval_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """supervised: an approval nobody answers within this is a denial"""

    @field_validator("owner_private")
    @classmethod
    def _inside_the_workspace(cls, names: list[str]) -> list[str]:
        for name in names:
            parts = name.replace("\\", "/").split("/")
            if not name.strip() or name.startswith(("/", "~")) or ".." in parts:
                raise ValueError(f"{name!r}: a path relative to the workspace, without ..")
        return names


class ShellSettings(_Section):
    """The shell tool's limits per command: time, output, memory."""

    timeout_s: float = Field(default=30.0, gt=0)
    """seconds a command may run before it is killed"""
    max_output_chars: int = Field(default=20_000, ge=200)
    """output kept (head and tail); the middle is elided"""
    # Address space per process (RLIMIT_AS; a cgroup's memory.max for the whole command
    # where one can be made with the memory controller); 0 = none. A JVM wants 4096.
    memory_mb: int = Field(default=1024, ge=0)
    """address space per process of a command (0 = no limit; a JVM wants 4096)"""


class MemorySettings(_Section):
    """Long-term memory (tools/memory/store.py): the tools, embeddings, recall per turn."""

    enabled: bool = True
    """register the memory tools"""
    max_recall: int = Field(default=5, ge=1, le=100)
    """memories memory_recall returns unless the model asks for fewer or more"""
    embedding_model: str = ""
    """LiteLLM embedding model, e.g. "openai/text-embedding-3-small"; "" = words only"""
    auto_recall: bool = True
    """add the memories relevant to each message to it"""
    recall_limit: int = Field(default=3, ge=1, le=20)
    """at most this many memories added to a message"""
    recall_threshold: float = Field(default=RECALL_THRESHOLD, ge=0.0, le=1.0)
    """score (0-1) a memory needs to be added; see README "Memory\""""
    share_group_memories: bool = False
    """true: what was remembered in groups is recalled in private chats too"""


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
    `safe` is where the pin goes at start, after a lost link or a reset, and at a clean stop;
    `max_on_s` is how long an output (or a PWM above 0) may stay on before pinclaw turns it off.
    """

    pin: int | str = Field(examples=[9])
    """the pin: a digital pin number (9) or an analog name ("A0")"""
    mode: PinMode = Field(default="output", examples=["pwm"])
    """"output", "input", "input_pullup", "pwm", "analog" or "servo\""""
    description: str = Field(default="", examples=["ceiling fan"])
    """what it drives, told to the model (\"ceiling fan\")"""
    safe: float | None = Field(default=None, examples=[0])
    """where it goes at start, after a lost link or reset, and at a clean stop"""
    max_on_s: float | None = Field(default=None, gt=0, le=7 * 24 * 3600, examples=[600])
    """pinclaw turns it off after this long on (kept across restarts)"""

    @field_validator("pin")
    @classmethod
    def _pin_shape(cls, value: int | str) -> int | str:
        return pin_token(value)

    @model_validator(mode="after")
    def _fits_the_mode(self) -> PinSettings:
        safe, mode = self.safe, self.mode
        if safe is not None:
            bounds = {"output": (0, 1), "pwm": (0, 1), "servo": (0, 180)}.get(mode)
            if bounds is None:
                raise ValueError(
                    f"safe: a pin wired as {mode} is not driven, so it has no safe value"
                )
            if not bounds[0] <= safe <= bounds[1] or (mode == "output" and safe not in (0, 1)):
                shape = {"output": "0 or 1", "pwm": "a duty 0 to 1", "servo": "an angle 0 to 180"}
                raise ValueError(f"safe = {safe:g} does not fit a {mode} pin: give {shape[mode]}")
        if self.max_on_s is not None and mode not in ("output", "pwm"):
            raise ValueError(f"max_on_s: only an output or pwm pin is switched on, not {mode}")
        return self


PORT_SHAPE = (
    'a serial device ("/dev/ttyACM0"), "auto", rfc2217://host:port (a board shared by ser2net) '
    "or socket://host:port (a Wi-Fi or Ethernet board's Firmata, port 3030)"
)
_NETWORK_PORT = re.compile(r"^(rfc2217|socket)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$")


def network_port(port: str) -> bool:
    """An rfc2217:// or socket:// address, not a device on this machine."""
    return port.startswith(("rfc2217://", "socket://"))


class BoardSettings(_Section):
    """One board running StandardFirmata: on a serial port of this machine, shared by ser2net
    (RFC 2217), or on the network itself (StandardFirmataWiFi/Ethernet); tools touch only the
    pins listed. `[hardware]` is one of these, named "board"; `[boards.NAME]` are more."""

    enabled: bool = True
    """a [boards.NAME] board is on unless this says false"""
    port: str = "auto"
    """serial port, e.g. "/dev/ttyACM0"; "auto": detect; or "rfc2217://pi.lan:2000" (ser2net),
    "socket://esp32.lan:3030" (StandardFirmataWiFi)"""
    baud: int = Field(default=57_600, gt=0)
    """StandardFirmata's speed"""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=120)
    """give up connecting to the board after this long"""
    sampling_interval_ms: int = Field(default=100, ge=1, le=16_383)
    """how often the board reports analog inputs"""
    connect_on_start: bool = False
    """connect when `agent run` starts instead of on first use"""
    require_approval: bool = False
    """supervised: ask the owner in the chat before any pin write"""
    restore_after_reset: bool = True
    """when the board resets, put back the outputs pinclaw set (else: say they were lost)"""
    allowed_pins: list[int | str] = Field(default_factory=list)
    """pins the tools may touch, e.g. [13, "A0"]; named pins are allowed too"""
    pins: dict[str, PinSettings] = Field(default_factory=dict)
    """named pins, one [hardware.pins.NAME] table each; the tools accept the name"""
    # Named pins (or allowed ones) never on together: [["heater", "fan_off"]].
    interlocks: list[list[str]] = Field(default_factory=list)
    """named pins never on together, e.g. [["heater", "fan_off"]]"""
    # A network board silent this long is asked for a sign of life (0: never).
    heartbeat_s: float = Field(default=5.0, ge=0, le=3600)
    """a network board silent this long is asked for a sign of life (0: never)"""
    keep_readings_s: float = Field(default=10.0, ge=0)
    """a watched pin's reading is kept at most this often, for plot_pin (0: none)"""
    keep_readings_days: float = Field(default=7.0, gt=0, le=366)
    """and for this long"""

    @field_validator("port")
    @classmethod
    def _port_shape(cls, value: str) -> str:
        value = value.strip()
        if "://" in value:
            match = _NETWORK_PORT.match(value)
            if match is None or not 0 < int(match.group(3)) < 65536:
                raise ValueError(f"port {value!r}: give {PORT_SHAPE}")
        elif not value:
            raise ValueError(f"port is empty: give {PORT_SHAPE}")
        return value

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

    @model_validator(mode="after")
    def _interlocked_pins_exist(self) -> BoardSettings:
        for group in self.interlocks:
            if len(set(group)) < 2:
                raise ValueError(f"interlocks: {group} needs two or more different pins")
            for name in group:
                pin = self.pins.get(name)
                if pin is None:
                    raise ValueError(f"interlocks: {name!r} is not a named pin of this board")
                if pin.mode not in ("output", "pwm"):
                    raise ValueError(f"interlocks: {name!r} is not switched on ({pin.mode})")
        return self


class HardwareSettings(BoardSettings):
    """`[hardware]`: the one board of most setups, named "board"; off until enabled."""

    enabled: bool = False
    """register the Arduino (Firmata) tools; this board is named "board\""""


DEFAULT_BOARD = "board"  # the name [hardware] goes by among [boards.NAME]


def check_board_names(boards: Mapping[str, BoardSettings]) -> None:
    """ValueError for a [boards.NAME] name that is not a short lowercase word."""
    for name in boards:
        if not _PIN_NAME.match(name):
            raise ValueError(
                f"board name {name!r}: use lowercase letters, digits, '_' or '-' ('garage')"
            )


def configured_boards(
    hardware: HardwareSettings, boards: Mapping[str, BoardSettings]
) -> dict[str, BoardSettings]:
    """Every enabled board by name: [hardware] as "board", then [boards.NAME] in order."""
    found: dict[str, BoardSettings] = {DEFAULT_BOARD: hardware} if hardware.enabled else {}
    for name, board in boards.items():
        if name in found:
            raise ValueError(
                f"boards.{name}: [hardware] is already the board named {name!r}; pick another name"
            )
        if board.enabled:
            found[name] = board
    return found


SearchProvider = Literal["", "searxng", "brave", "tavily"]
_HOST_ENTRY = re.compile(
    r"^(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[^\s/:@\[\]]+))(?::(?P<port>\d{1,5}))?$"
)


def host_entry(text: str) -> tuple[str, int | None]:
    """An `allow_hosts` entry as (host, port): "nas.lan", "nas.lan:8080", "10.0.0.5:80",
    "[fd00::1]:8080", or a bare IPv6 address; the host in lower case, no trailing dot."""
    entry = text.strip().lower()
    if entry.count(":") > 1 and not entry.startswith("["):
        entry = f"[{entry}]"
    match = _HOST_ENTRY.match(entry)
    port = int(match.group("port")) if match and match.group("port") else None
    if match is None or (port is not None and not 0 < port < 65536):
        raise ValueError(f"{text!r}: write a host or host:port, e.g. 'nas.lan' or 'nas.lan:8080'")
    return (match.group("v6") or match.group("name")).rstrip("."), port


class WebSettings(_Section):
    """web_fetch and web_search (tools/web/). Pages come only from public addresses unless
    the owner lists a host here; search providers' keys come from the environment."""

    enabled: bool = True
    """register web_fetch and web_search (also off when [security] sandbox_network = false)"""
    # Hosts on this machine or the LAN that web_fetch may reach ("nas.lan",
    # "homeassistant.local:8123"); every other address must be public.
    allow_hosts: list[str] = Field(default_factory=list)
    """hosts web_fetch may reach on this machine or the LAN, e.g. ["nas.lan",
    "homeassistant.local:8123"]; others must be public addresses"""
    max_bytes: int = Field(default=2_000_000, ge=1000)
    """bytes of a page read at most; the rest is cut, with a note"""
    max_chars: int = Field(default=20_000, ge=500)
    """characters of a page's text handed to the model at most, with a note when cut"""
    timeout_s: float = Field(default=20.0, gt=0, le=300)
    """seconds for one fetch or search, redirects included"""
    search_provider: SearchProvider = ""
    """web_search's provider: "searxng", "brave" or "tavily"; "" = none"""
    search_count: int = Field(default=5, ge=1, le=20)
    """results web_search returns unless the model asks for another number (at most 20)"""
    searxng_url: str = ""
    """your SearXNG instance (JSON output enabled in its settings.yml), e.g.
    "http://127.0.0.1:8888\""""
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    """Brave Search's API address"""
    brave_api_key: SecretStr | None = None
    """environment only: PINCLAW_WEB__BRAVE_API_KEY"""
    tavily_url: str = "https://api.tavily.com/search"
    """Tavily's API address"""
    tavily_api_key: SecretStr | None = None
    """environment only: PINCLAW_WEB__TAVILY_API_KEY"""

    @field_validator("allow_hosts")
    @classmethod
    def _host_entries(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            host_entry(entry)
        return entries
