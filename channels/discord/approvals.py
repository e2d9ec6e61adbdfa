"""Approvals on Discord: the question with buttons, and the presses (component interactions)
that answer it; the flow itself is channels/approvals.py.

The buttons are described with a ``discord.ui.View`` but answered by one listener
(``on_interaction``) that finds the question by the key in the button's custom_id: the view is
stopped before it is sent, so discord.py does not keep it in its view store, and a press on
a question that no longer waits (a timeout, a restart) still gets an answer.

The question and every edit of it have their embeds suppressed: it quotes the model's
action, and an embed would have Discord fetch a URL that may carry the owner's data
(discord.py's Message.edit clears the flag unless it is passed again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import discord

from channels.approvals import Button, ButtonApprovals, NewText, PressReply
from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

MAX_KEY_BYTES = 80  # Discord allows 100 characters of custom_id
MAX_TEXT = 2000 - 64  # room for the outcome line under Discord's message limit
STYLES = {
    "y": discord.ButtonStyle.success,
    "n": discord.ButtonStyle.danger,
    "a": discord.ButtonStyle.primary,
}


def view_of(buttons: Sequence[Button]) -> discord.ui.View:
    """The buttons as a view that only describes them (see the module docstring)."""
    view = discord.ui.View(timeout=None)
    for button in buttons:
        style = STYLES[button.code]
        view.add_item(discord.ui.Button(label=button.label, style=style, custom_id=button.data))
    view.stop()
    return view


class DiscordApprovals:
    """Questions waiting for a press, and the listener of the presses."""

    def __init__(self) -> None:
        self._flow = ButtonApprovals("discord", max_key_bytes=MAX_KEY_BYTES, max_text=MAX_TEXT)

    async def ask(
        self, channel: Any, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons to `channel` (a DM, text channel or thread) and
        wait for an allowed press."""

        async def send_question(text: str, buttons: Sequence[Button]) -> NewText:
            message = await channel.send(text, view=view_of(buttons), suppress_embeds=True)
            return lambda text: message.edit(content=text, view=None, suppress=True)

        return await self._flow.ask(send_question, question, may_answer)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: Any = interaction.data or {}
        response = interaction.response
        reply = PressReply(
            toast=lambda text: response.send_message(text, ephemeral=True),
            new_text=lambda text: response.edit_message(
                content=text, view=None, suppress_embeds=True
            ),
            toasts_the_outcome=False,
        )
        user = interaction.user
        await self._flow.on_press(str(data.get("custom_id", "")), str(user.id), user.name, reply)
