"""Discord's facts for the core (channels/kind.py): light, no discord.py here."""

from __future__ import annotations

import re

from channels.capabilities import MEDIA_KINDS, MEDIA_MARKERS, ChannelCapabilities
from channels.kind import ChannelKind, TokenShape

DISCORD = ChannelKind(
    name="discord",
    capabilities=ChannelCapabilities(
        display_name="Discord",
        markup="markdown",
        max_message_chars=2000,
        media=frozenset(MEDIA_KINDS),
    ),
    delivery_instructions=(
        "Delivery on Discord: to attach a file, put one media marker per attachment in your "
        f"reply, written exactly as {MEDIA_MARKERS}. A path is relative to the workspace; a URL "
        "is downloaded and attached. Files over Discord's upload limit cannot be sent. Keep "
        "the text outside the markers, and never put a marker inside a code block."
    ),
    has_groups=True,  # servers' channels and threads
    private_chat="inbox",  # a DM has an id of its own: the one the person last wrote in
    user_id=re.compile(r"\d+"),
    chat_id=re.compile(r"\d+"),  # snowflakes
    chat_id_example="123456789012345678",
    token=TokenShape(
        re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"),
        "three parts joined by dots",
        "copy it again from the Developer Portal's Bot tab",
        scheme="Bot ",
    ),
    package="discord.py",
    library="discord",
    settings="channels.config:DiscordSettings",
    adapter="channels.discord.channel:DiscordChannel",
)
