"""A chat channel's facts, as the core asks them: what it can show, whether it has groups,
how a person is reached privately, what its ids and its token look like, what it needs
installed, its settings section and how its adapter is built.

Pure data: a kind imports no platform library and no pydantic, so `agent --help` can list
the channels. Its settings model and its adapter are named as "module:Class" and imported
when first used (an import statement would close a circle: the adapter reads its
capabilities from its kind).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from channels.capabilities import ChannelCapabilities

if TYPE_CHECKING:
    from channels.base import Channel

# How a person's private chat with the bot is found: "user_id": its chat id is the user's
# id; "inbox": the private chat they last wrote in (none before they have).
PrivateChat = Literal["user_id", "inbox"]


@dataclass(frozen=True)
class TokenShape:
    """What the channel's bot token looks like, for `agent doctor`."""

    pattern: re.Pattern[str]
    described: str  # "in BotFather's form <digits>:<35 characters>"
    fix: str  # where to copy it from again
    scheme: str = ""  # pasted from an Authorization header, it starts with this ("Bot ")


@dataclass(frozen=True)
class ChannelKind:
    name: str  # the settings section [channels.NAME], a person's key, the chats' "NAME:..."
    capabilities: ChannelCapabilities  # what it can show: the prompt's Channel Capabilities
    delivery_instructions: str | None  # added after each user message (None: nothing)
    has_groups: bool  # chats of several people, where not every message is for the bot
    private_chat: PrivateChat
    user_id: re.Pattern[str]  # a person's id on the platform
    chat_id: re.Pattern[str]  # a chat's id, as `agent send --to` takes it
    chat_id_example: str  # one such id, for the help text
    token: TokenShape | None  # None: no bot token to check
    package: str  # the Python distribution its adapter needs ("python-telegram-bot")
    library: str  # the module that distribution provides (and its loggers' name)
    settings: str  # "module:Class" of its section, a channels.config.ChannelSection
    adapter: str  # "module:Class" of its Channel, made with its section

    @property
    def token_variable(self) -> str:
        """The environment variable its bot token is read from."""
        return f"PINCLAW_CHANNELS__{self.name.upper()}__BOT_TOKEN"

    def build(self, section: object) -> Channel:
        """The adapter, made with this channel's settings section (its library imported
        now; ValueError when the section cannot make one, e.g. no token)."""
        return cast("Channel", loaded(self.adapter)(section))


def loaded(reference: str) -> type:
    """The class a "module:Class" reference names, its module imported."""
    module, _, name = reference.partition(":")
    found = getattr(importlib.import_module(module), name)
    if not isinstance(found, type):
        raise TypeError(f"{reference} is not a class")
    return found
