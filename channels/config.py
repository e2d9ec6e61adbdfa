"""Settings of the channels (plain pydantic, no platform import)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_strings(value: object) -> object:
    """Allow-lists accept bare numbers in TOML (`allowed_users = [12345]`) as well as strings."""
    if isinstance(value, list):
        return [
            str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            for item in value
        ]
    return value


class TelegramSettings(_Section):
    enabled: bool = False
    bot_token: SecretStr | None = None
    allowed_users: list[str] = Field(default_factory=list)
    pairing: bool = True  # a stranger's private message asks the owner (a code, buttons)
    group_mode: Literal["mention", "all"] = "mention"
    stream_replies: bool = False
    transcription_model: str = ""
    api_base: str = "https://api.telegram.org/bot"
    file_api_base: str = "https://api.telegram.org/file/bot"

    _strings = field_validator("allowed_users", mode="before")(_as_strings)


class DiscordSettings(_Section):
    enabled: bool = False
    bot_token: SecretStr | None = None
    allowed_users: list[str] = Field(default_factory=list)
    pairing: bool = True  # a stranger's direct message asks the owner (a code, buttons)
    allowed_guilds: list[str] = Field(default_factory=list)
    allowed_channels: list[str] = Field(default_factory=list)
    guild_mode: Literal["mention", "all"] = "mention"
    stream_replies: bool = False
    register_slash_commands: bool = False
    transcription_model: str = ""
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg"

    _strings = field_validator(
        "allowed_users", "allowed_guilds", "allowed_channels", mode="before"
    )(_as_strings)


class ChannelsSettings(_Section):
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    max_message_chars: int = Field(default=20_000, ge=100)
    max_attachment_mb: float = Field(default=20.0, gt=0)
    download_timeout_s: float = Field(default=120.0, gt=0)
    delivery_deadline_s: float = Field(default=3600.0, gt=0)
    # A part whose fate a crash or a timeout left unknown, on a platform that cannot tell
    # (Telegram): "at_most_once" logs it as possibly lost; "at_least_once" sends it again
    # with a visible "(sent again …)" marker.
    delivery: Literal["at_most_once", "at_least_once"] = "at_most_once"
    max_parts: int = Field(default=8, ge=1)  # a longer reply goes as a document + summary
