"""The toy channel's facts: what a new channel declares (channels/kind.py), here for a
platform whose people and chats have lower-case names ("alice", "#garden")."""

from __future__ import annotations

import re

from channels.capabilities import ChannelCapabilities
from channels.kind import ChannelKind

TOY = ChannelKind(
    name="toy",
    capabilities=ChannelCapabilities(display_name="Toy", max_message_chars=500),
    delivery_instructions="Delivery on Toy: text only, no files.",
    has_groups=True,
    private_chat="user_id",  # a person's private chat is named after them
    user_id=re.compile(r"[a-z]+"),
    chat_id=re.compile(r"#?[a-z]+"),  # a group's starts with "#"
    chat_id_example="#garden",
    token=None,  # nothing to log in with
    package="pinclaw-toy",  # never imported: the adapter is ours, in memory
    library="toy_platform",
    settings="toy_channel.channel:ToySettings",
    adapter="toy_channel.channel:ToyChannel",
)
