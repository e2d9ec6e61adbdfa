"""What a channel can show (ChannelCapabilities), what the terminal can show, the media
markers every channel's delivery instructions name, and the chat commands the platforms offer
in their menus. A chat channel's own capabilities
and delivery instructions are its kind's (channels/telegram/kind.py, channels/discord/kind.py).

Kept apart from the adapters so the prompt can be built (and inspected) without importing
python-telegram-bot or discord.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Markup = Literal["plain", "markdown", "html"]
MediaKind = Literal["IMAGE", "DOCUMENT", "VIDEO", "AUDIO", "VOICE"]
MEDIA_KINDS: tuple[MediaKind, ...] = ("IMAGE", "DOCUMENT", "VIDEO", "AUDIO", "VOICE")


@dataclass(frozen=True)
class ChannelCapabilities:
    """What a channel can show; the prompt's Channel Capabilities section reads it."""

    display_name: str
    markup: Markup = "plain"
    max_message_chars: int = 0  # 0: no limit
    media: frozenset[MediaKind] = frozenset()
    # How long the platform drops a message sent again with the same nonce (Discord does,
    # for a few minutes): within it a part whose fate is unknown is safely sent again. 0: never.
    nonce_window_s: float = 0.0
    # The text a voice note may carry as its caption; 0: none (the text follows it).
    voice_caption_chars: int = 0


TERMINAL = ChannelCapabilities(display_name="terminal (command line)", markup="markdown")

# How a reply asks for a file to be attached, written into the delivery instructions.
MEDIA_MARKERS = ", ".join(f"[{kind}:<path-or-url>]" for kind in MEDIA_KINDS)

# The chat commands the runtime answers itself, offered in each platform's command menu.
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "Start a fresh conversation"),
    ("stop", "Stop the current answer"),
    ("status", "Model, conversation length and last answer's cost"),
    ("jobs", "This chat's sub-agent jobs: running and finished"),
    ("model", "The models this chat may use; /model NAME switches"),
    ("voice", "Replies as voice notes: /voice always, when_spoken_to, never"),
    ("usage", "Tokens and cost today and this month (owner)"),
    ("budget", "Spending limits; /budget daily 5 sets one (owner)"),
    ("pair", "Let people in: /pair approve CODE, /pair here (owner)"),
    ("busy", "While I work: /busy queue, steer, interrupt or collect"),
    ("help", "What the bot can do"),
)
