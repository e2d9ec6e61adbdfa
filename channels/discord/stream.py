"""DiscordStream: a reply shown while it is written, as one Discord message edited in place."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

from channels.base import ChatRef, OutgoingPart
from channels.stream import PacedStream

STREAM_EDIT_EVERY_S = 1.5
Target = Callable[[ChatRef], Awaitable[Any]]  # the chat's DM, text channel or thread


class DiscordStream(PacedStream[discord.Message]):
    """One message edited as the reply is written, at most once every 1.5 s. The draft
    always has its embeds suppressed: it is shown before anyone knows whether the turn will
    read untrusted content. discord.py's edit clears the flag unless told."""

    def __init__(self, target: Target, chat: ChatRef, reply_to: str, *, max_chars: int) -> None:
        super().__init__(chat, reply_to, interval_s=STREAM_EDIT_EVERY_S, max_chars=max_chars)
        self._target = target  # the chat's Discord channel, as the adapter finds it

    async def send(self, text: str) -> discord.Message:
        target = await self._target(self._chat)
        reference = reference_to(self._reply_to, target)
        sent: discord.Message = await target.send(
            text, reference=reference, mention_author=False, suppress_embeds=True
        )
        return sent

    async def edit(self, message: discord.Message, text: str) -> discord.Message:
        return await message.edit(content=text, suppress=True)

    async def delete(self, message: discord.Message) -> None:
        await message.delete()

    async def replace(self, message: discord.Message, first: OutgoingPart) -> None:
        """The reply in place of the draft: its embeds shown only if the reply allows them."""
        await message.edit(content=first.text, suppress=not first.previews)


def reference_to(message_id: str, channel: Any) -> discord.MessageReference | None:
    if not message_id.isdigit():  # none, or an interaction (answered through its followup)
        return None
    return discord.MessageReference(
        message_id=int(message_id), channel_id=channel.id, fail_if_not_exists=False
    )
