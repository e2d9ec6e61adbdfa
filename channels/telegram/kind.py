"""Telegram's facts for the core (channels/kind.py): light, no python-telegram-bot here."""

from __future__ import annotations

import re

from channels.capabilities import MEDIA_KINDS, MEDIA_MARKERS, ChannelCapabilities
from channels.kind import ChannelKind, TokenShape

TELEGRAM = ChannelKind(
    name="telegram",
    capabilities=ChannelCapabilities(
        display_name="Telegram",
        markup="html",
        max_message_chars=4096,
        media=frozenset(MEDIA_KINDS),
        voice_caption_chars=1024,
    ),
    delivery_instructions=(
        "Delivery on Telegram: to send a file or a URL as an attachment, put one media marker "
        f"per attachment in your reply, written exactly as {MEDIA_MARKERS}. A path is relative "
        "to the workspace. Keep the text for the user outside the markers, and never put a "
        "marker inside a code block."
    ),
    has_groups=True,
    private_chat="user_id",  # a private chat's id is the user's id
    user_id=re.compile(r"\d+"),
    chat_id=re.compile(r"-?\d+"),  # a group's is negative
    chat_id_example="-1001234567890",
    token=TokenShape(
        re.compile(r"[0-9]+:[A-Za-z0-9_-]{35}"),
        "in BotFather's form <digits>:<35 characters>",
        "copy it whole from @BotFather",
        scheme="bot",
    ),
    package="python-telegram-bot",
    library="telegram",
    settings="channels.config:TelegramSettings",
    adapter="channels.telegram.channel:TelegramChannel",
)
