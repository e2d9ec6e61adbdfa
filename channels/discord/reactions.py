"""The bot's emoji reaction on a person's message (pinclaw's 👀 taken, ✍️ working, ✅ / ❌),
the one before it taken off so one stands at a time."""

from __future__ import annotations

import discord

from channels.base import ChatRef


async def react(
    client: discord.Client, chat: ChatRef, message_id: str, emoji: str, previous: str
) -> None:
    """Add `emoji` to the message, then remove the bot's `previous` one ("" none)."""
    channel = client.get_partial_messageable(int(chat.chat_id))
    message = channel.get_partial_message(int(message_id))
    await message.add_reaction(emoji)
    if previous and client.user is not None:
        await message.remove_reaction(previous, client.user)
