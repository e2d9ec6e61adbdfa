"""The chat channels pinclaw knows: one line registers each (its kind, channels/<name>/kind.py).
The core asks here instead of naming a channel.

Read the registration through these functions, never by importing CHANNEL_KINDS by name:
they read it when called, so a channel registered later (a test's toy channel, set with
monkeypatch) is seen everywhere. Pure data, like the kinds: importing this is cheap.
"""

from __future__ import annotations

from channels.capabilities import TERMINAL, ChannelCapabilities
from channels.discord.kind import DISCORD
from channels.kind import ChannelKind
from channels.telegram.kind import TELEGRAM

CHANNEL_KINDS: tuple[ChannelKind, ...] = (TELEGRAM, DISCORD)  # the order they are asked in


def channel_kinds() -> tuple[ChannelKind, ...]:
    return CHANNEL_KINDS


def channel_names() -> list[str]:
    return [kind.name for kind in CHANNEL_KINDS]


def kind_named(name: str) -> ChannelKind | None:
    """The chat channel `name`; None for the terminal ("cli") and anything unknown."""
    return next((kind for kind in CHANNEL_KINDS if kind.name == name), None)


def capabilities_of(name: str) -> ChannelCapabilities:
    """What channel `name` can show; the terminal's for "cli" (KeyError: no such channel)."""
    if name == "cli":
        return TERMINAL
    kind = kind_named(name)
    if kind is None:
        raise KeyError(name)
    return kind.capabilities


def delivery_of(name: str) -> str | None:
    """Channel `name`'s delivery instructions (the terminal has none)."""
    kind = kind_named(name)
    return None if kind is None else kind.delivery_instructions


def has_groups(name: str) -> bool:
    """Chats of channel `name` can be groups (the terminal's is one person's)."""
    kind = kind_named(name)
    return kind is not None and kind.has_groups


def kind_of_library(module: str) -> ChannelKind | None:
    """The channel whose adapter needs `module` (a missing package is named after it)."""
    return next((kind for kind in CHANNEL_KINDS if kind.library == module), None)
