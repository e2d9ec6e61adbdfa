"""Settings of the channels (plain pydantic, no platform import): what every chat channel's
section holds, Telegram's and Discord's, the [channels] table, and a person's ids.

A section is there for each registered channel (channels/registry.py), checked by its kind's
model; a table or key that names no registered channel is an unknown key, reported at its
place like any other.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SecretStr,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from channels.kind import ChannelKind, loaded
from channels.registry import channel_kinds, kind_named


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _as_strings(value: object) -> object:
    """Allow-lists accept bare numbers in TOML (`allowed_users = [12345]`) as well as strings."""
    if isinstance(value, list):
        return [
            str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            for item in value
        ]
    return value


BusyMode = Literal["queue", "steer", "interrupt", "collect"]
BUSY_MODES: tuple[str, ...] = ("queue", "steer", "interrupt", "collect")
COLLECT_DEBOUNCE_MS = 1_500  # collect's default: messages this close are one turn
REACTIONS = ["👀", "✍️", "✅", "❌"]  # a message taken, being answered, answered, failed


class ChannelSection(_Section):
    """What every chat channel's [channels.NAME] holds; its kind's model adds its own keys."""

    enabled: bool = False
    """start this channel's bot with `agent run`"""
    bot_token: SecretStr | None = None
    """the bot's token, from the environment only (Telegram: @BotFather; Discord: the
    developer portal's Bot page)"""
    allowed_users: list[str] = Field(default_factory=list)
    """who may talk to the bot: user ids (on Telegram also "@usernames"); empty: nobody"""
    pairing: bool = True
    """a stranger's private message gets a code and asks the owner (buttons); false: the
    allow-list only"""
    stream_replies: bool = False
    """show the reply growing as it is written"""
    transcription_model: str = ""
    """LiteLLM speech-to-text model for voice notes and audio, e.g. "openai/whisper-1\""""
    busy: BusyMode | Literal[""] = ""
    """this channel's busy mode; "": [channels] busy"""
    debounce_ms: int = Field(default=-1, ge=-1, le=60_000)
    """this channel's debounce; -1: [channels] debounce_ms"""

    _strings = field_validator("allowed_users", mode="before")(_as_strings)


class TelegramSettings(ChannelSection):
    """The Telegram bot: who may talk to it, groups, and how updates arrive (polling or a
    webhook)."""

    group_mode: Literal["mention", "all"] = "mention"
    """in groups: "mention" (when mentioned or replied to) or "all\""""
    api_base: str = "https://api.telegram.org/bot"
    """Bot API root (the token is appended)"""
    file_api_base: str = "https://api.telegram.org/file/bot"
    """file download root (the token is appended)"""
    # "webhook": Telegram posts each update to `webhook_url` (https, a TLS proxy in front of
    # [http], which serves it at /channels/telegram/webhook); "polling" asks for them
    mode: Literal["polling", "webhook"] = "polling"
    """or "webhook": Telegram posts updates to webhook_url (needs [http] enabled)"""
    webhook_url: str = ""
    """webhook mode: the public https URL, e.g. "https://bot.example.org/channels/telegram/webhook",
    a TLS proxy passing it to [http] host:port at the same path"""

    @model_validator(mode="after")
    def _webhook_url(self) -> TelegramSettings:
        if self.mode == "webhook" and not self.webhook_url.startswith("https://"):
            raise ValueError(
                'mode = "webhook" needs webhook_url = "https://..." (Telegram\'s rule)'
            )
        return self


class DiscordSettings(ChannelSection):
    """The Discord bot: who may talk to it, in which servers and channels, its slash commands."""

    allowed_guilds: list[str] = Field(default_factory=list)
    """server ids; empty: any server"""
    allowed_channels: list[str] = Field(default_factory=list)
    """channel ids; empty: any channel"""
    guild_mode: Literal["mention", "all"] = "mention"
    """in servers: "mention" or "all\""""
    register_slash_commands: bool = False
    """register /new, /stop, /status, /help as application commands"""
    api_base: str = "https://discord.com/api/v10"
    """REST root"""
    gateway_url: str = "wss://gateway.discord.gg"
    """websocket gateway"""

    _lists = field_validator("allowed_guilds", "allowed_channels", mode="before")(_as_strings)


def section_model(kind: ChannelKind) -> type[ChannelSection]:
    """The model of `kind`'s [channels.NAME] section."""
    model = loaded(kind.settings)
    if not issubclass(model, ChannelSection):
        raise TypeError(f"{kind.settings} is not a ChannelSection")
    return model


class ChannelsSettings(BaseModel):
    """[channels]: the keys every channel shares, and each registered channel's section
    (`channels.telegram`), there with its defaults when the file has none."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)
    __pydantic_extra__: dict[str, SerializeAsAny[ChannelSection]] = Field(init=False)

    max_message_chars: int = Field(default=20_000, ge=100)
    """longer text is cut, with a note to the model"""
    max_attachment_mb: float = Field(default=20.0, gt=0)
    """bigger files are refused with a reply"""
    download_timeout_s: float = Field(default=120.0, gt=0)
    """per attachment; a slow one becomes a note, not a stuck chat"""
    delivery_deadline_s: float = Field(default=3600.0, gt=0)
    """a reply is retried this long, then marked expired"""
    # A part whose fate a crash or a timeout left unknown, on a platform that cannot tell
    # (Telegram): "at_most_once" logs it as possibly lost; "at_least_once" sends it again
    # with a visible "(sent again …)" marker.
    delivery: Literal["at_most_once", "at_least_once"] = "at_most_once"
    """a part a crash left unsure: "at_most_once" (logged) or "at_least_once" (resent, marked)"""
    max_parts: int = Field(default=8, ge=1)
    """a reply longer than this many messages is sent as a .md document"""
    # A message that comes while its chat's turn runs: "queue" it for the next turn, "steer"
    # the running turn with it, "interrupt" that turn and answer both, or "collect" it with
    # the others into one next turn. /busy MODE sets one chat's.
    busy: BusyMode = "queue"
    """a message while its chat's turn runs: "queue", "steer" (joins it), "interrupt" (stops it;
    both answered), "collect" (answered together); /busy MODE per chat"""
    debounce_ms: int = Field(default=-1, ge=-1, le=60_000)
    """messages this close (ms) are one turn; -1: 1500 in "collect", else 0"""
    reactions: list[str] = Field(default_factory=lambda: list(REACTIONS))
    """on your message: taken, being answered, answered, failed; [] for none"""

    @field_validator("reactions")
    @classmethod
    def _four_or_none(cls, value: list[str]) -> list[str]:
        if value and (len(value) != 4 or not all(item.strip() for item in value)):
            raise ValueError("four emoji (taken, answering, answered, failed), or [] for none")
        return value

    def busy_of(self, channel: str) -> str:
        """`channel`'s busy mode: its own, else [channels]'."""
        section = self.section(channel)
        return (section.busy if section else None) or self.busy

    def debounce_of(self, channel: str, mode: str) -> int:
        """How long (ms) `channel` waits for a burst's next message, in a chat of `mode`."""
        section = self.section(channel)
        own = section.debounce_ms if section else -1
        debounce = own if own >= 0 else self.debounce_ms
        if debounce < 0:
            return COLLECT_DEBOUNCE_MS if mode == "collect" else 0
        return debounce

    @model_validator(mode="wrap")
    @classmethod
    def _sections(
        cls, data: Any, handler: ModelWrapValidatorHandler[ChannelsSettings]
    ) -> ChannelsSettings:
        if not isinstance(data, dict):
            return handler(data)
        shared = {key: value for key, value in data.items() if key in cls.model_fields}
        errors = _unknown(data, shared)
        sections: dict[str, ChannelSection] = {}
        for kind in channel_kinds():
            model, value = section_model(kind), data.get(kind.name, {})
            try:
                sections[kind.name] = model.model_validate(value)
            except ValidationError as exc:
                errors += _nested(exc, kind.name)
        return _validated(cls, handler, {**shared, **sections}, errors)

    def section(self, name: str) -> ChannelSection | None:
        """[channels.NAME], or None when no channel of that name is registered."""
        return (self.model_extra or {}).get(name)

    def enabled(self) -> list[str]:
        """The registered channels whose section says enabled, in the registry's order."""
        found = self.model_extra or {}
        return [kind.name for kind in channel_kinds() if found.get(kind.name, _OFF).enabled]

    @classmethod
    def section_models(cls) -> dict[str, type[ChannelSection]]:
        return {kind.name: section_model(kind) for kind in channel_kinds()}


_OFF = ChannelSection()

VoiceReply = Literal["never", "when_spoken_to", "always"]


class VoiceSettings(_Section):
    """[voice]: replies as voice notes — when (`/voice` sets it per chat; "when_spoken_to":
    after a voice note), and the speech model that reads them: LiteLLM's speech API, or an
    OpenAI-compatible speech server of one's own at `api_base` (POST /v1/audio/speech)."""

    reply: VoiceReply = "never"
    """replies as voice notes: "never", "when_spoken_to" (after a voice note) or "always"; /voice
    sets it per chat"""
    model: str = "openai/gpt-4o-mini-tts"
    """LiteLLM text-to-speech model (any provider LiteLLM speaks to)"""
    voice: str = "alloy"
    """the speech model's voice"""
    api_base: str = ""
    """an OpenAI-compatible speech server of your own (POST /v1/audio/speech); empty: the
    provider's"""
    timeout_s: float = Field(default=60.0, gt=0)
    """a note not made within this goes as text, with a line why"""
    max_chars: int = Field(default=1500, ge=1)
    """a reply with more to read aloud is sent as text only"""


class PersonSettings(BaseModel):
    """[people.NAME]: one person's id on each channel they use (`telegram = "123"`, a key per
    registered channel), so their memories follow them across channels."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)
    __pydantic_extra__: dict[str, str] = Field(init=False)

    owner: bool = False
    """the owner's DMs also get MEMORY.md and USER.md, like the terminal"""

    @model_validator(mode="wrap")
    @classmethod
    def _ids(cls, data: Any, handler: ModelWrapValidatorHandler[PersonSettings]) -> PersonSettings:
        if not isinstance(data, dict):
            return handler(data)
        shared = {key: value for key, value in data.items() if key in cls.model_fields}
        errors = _unknown(data, shared)
        ids = {key: _as_text(value) for key, value in data.items() if kind_named(key)}
        return _validated(cls, handler, {**shared, **ids}, errors)

    def id_on(self, channel: str) -> str:
        """Their id on `channel` ("": none given)."""
        return str((self.model_extra or {}).get(channel, ""))


def _as_text(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _unknown(data: dict[str, Any], shared: dict[str, Any]) -> list[InitErrorDetails]:
    """A key that is neither the model's own nor a registered channel's."""
    return [
        InitErrorDetails(type="extra_forbidden", loc=(key,), input=value)
        for key, value in data.items()
        if key not in shared and kind_named(key) is None
    ]


def _nested(exc: ValidationError, *prefix: str) -> list[InitErrorDetails]:
    """`exc`'s errors, placed under `prefix`."""
    found: list[InitErrorDetails] = []
    for error in exc.errors():
        detail = InitErrorDetails(
            type=error["type"], loc=(*prefix, *error["loc"]), input=error["input"]
        )
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        found.append(detail)
    return found


M = TypeVar("M", bound=BaseModel)


def _validated(
    cls: type[M], handler: ModelWrapValidatorHandler[M], data: Any, errors: list[InitErrorDetails]
) -> M:
    """The model made of `data`, or one ValidationError with `errors` and its own."""
    try:
        made = handler(data)
    except ValidationError as exc:
        errors = errors + _nested(exc)
        made = None
    if errors or made is None:
        raise ValidationError.from_exception_data(cls.__name__, errors)
    return made
