"""Where a person is reached privately, and the owner's private chat: worked out here alone,
for the schedule book, the scheduler, `agent send` and each channel's doorkeeper.

How depends on the channel's kind (channels/kind.py): on some a private chat's id is the
user's id (Telegram); on others it is the private chat they last wrote in, looked up in the
inbox (Discord: a DM has an id of its own), and there is none before they have written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from agent.durable.inbox import Inbox
from channels.base import ChatRef
from channels.config import PersonSettings
from channels.registry import channel_kinds, kind_named


@dataclass(frozen=True)
class OwnerChat:
    """The owner's private chat on a channel, and who the owner is there."""

    chat: ChatRef
    sender_id: str
    name: str  # their [people] name

    @property
    def where(self) -> str:
        kind = kind_named(self.chat.channel)
        shown = kind.capabilities.display_name if kind else self.chat.channel
        return f"the owner's private {shown} chat"


async def private_chat(inbox: Inbox, channel: str, user_id: str) -> ChatRef | None:
    """`user_id`'s private chat with the bot on `channel` (None: not known yet)."""
    kind = kind_named(channel)
    if kind is None:
        return None
    if kind.private_chat == "user_id":
        return ChatRef(channel, user_id)
    key = await inbox.last_private_chat(channel, user_id)
    return ChatRef.parse(key) if key is not None else None


async def owner_chat(
    people: Mapping[str, PersonSettings], inbox: Inbox, channels: Collection[str]
) -> OwnerChat | None:
    """The owner's private chat on the first of `channels` where it is known: the owners in
    the order [people] lists them, each one's channels in the registry's order."""
    for name, person in people.items():
        if not person.owner:
            continue
        for kind in channel_kinds():
            user_id = person.id_on(kind.name)
            if kind.name not in channels or not user_id:
                continue
            chat = await private_chat(inbox, kind.name, user_id)
            if chat is not None:
                return OwnerChat(chat, user_id, name)
    return None
