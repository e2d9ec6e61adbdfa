"""What the terminal can show, the media markers every channel's delivery instructions name,
and the chat commands the platforms offer in their menus. A chat channel's own capabilities
and delivery instructions are its kind's (channels/telegram/kind.py, channels/discord/kind.py).

Kept apart from the adapters so the prompt can be built (and inspected) without importing
python-telegram-bot or discord.py.
"""

from __future__ import annotations

from channels.base import MEDIA_KINDS, ChannelCapabilities

TERMINAL = ChannelCapabilities(display_name="terminal (command line)", markup="markdown")

# How a reply asks for a file to be attached, written into the delivery instructions.
MEDIA_MARKERS = ", ".join(f"[{kind}:<path-or-url>]" for kind in MEDIA_KINDS)

# The chat commands the runtime answers itself, offered in each platform's command menu.
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "Start a fresh conversation"),
    ("stop", "Stop the current answer"),
    ("status", "Model, conversation length and last answer's cost"),
    ("model", "The models this chat may use; /model NAME switches"),
    ("usage", "Tokens and cost today and this month (owner)"),
    ("budget", "Spending limits; /budget daily 5 sets one (owner)"),
    ("pair", "Let people in: /pair approve CODE, /pair here (owner)"),
    ("help", "What the bot can do"),
)
