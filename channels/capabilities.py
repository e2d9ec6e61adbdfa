"""What each channel can show, and the delivery instructions it adds after a user message.

Kept apart from the adapters so the prompt can be built (and inspected) without importing
python-telegram-bot or discord.py.
"""

from __future__ import annotations

from channels.base import MEDIA_KINDS, ChannelCapabilities

TERMINAL = ChannelCapabilities(display_name="terminal (command line)", markup="markdown")

TELEGRAM = ChannelCapabilities(
    display_name="Telegram",
    markup="html",
    max_message_chars=4096,
    media=frozenset(MEDIA_KINDS),
)

DISCORD = ChannelCapabilities(
    display_name="Discord",
    markup="markdown",
    max_message_chars=2000,
    media=frozenset(MEDIA_KINDS),
)

_MARKERS = ", ".join(f"[{kind}:<path-or-url>]" for kind in MEDIA_KINDS)

TELEGRAM_DELIVERY = (
    "Delivery on Telegram: to send a file or a URL as an attachment, put one media marker per "
    f"attachment in your reply, written exactly as {_MARKERS}. A path is relative to the "
    "workspace. Keep the text for the user outside the markers, and never put a marker inside "
    "a code block."
)

DISCORD_DELIVERY = (
    "Delivery on Discord: to attach a file, put one media marker per attachment in your "
    f"reply, written exactly as {_MARKERS}. A path is relative to the workspace; a URL is "
    "downloaded and attached. Files over Discord's upload limit cannot be sent. Keep the text "
    "outside the markers, and never put a marker inside a code block."
)

BY_NAME = {"cli": TERMINAL, "telegram": TELEGRAM, "discord": DISCORD}
DELIVERY_BY_NAME: dict[str, str | None] = {
    "cli": None,
    "telegram": TELEGRAM_DELIVERY,
    "discord": DISCORD_DELIVERY,
}

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
