"""Approvals on Discord: the question with Approve / Deny / Always allow buttons, and the
presses (component interactions) that answer it.

The buttons are described with a ``discord.ui.View`` but answered by one listener
(``on_interaction``) that finds the question by the key in the button's custom_id: the view is
stopped before it is sent, so discord.py does not keep it in its view store, and a press on
a question that no longer waits (a timeout, a restart) still gets an answer.

The question and every edit of it have their embeds suppressed: it quotes the model's
action, and an embed would have Discord fetch a URL that may carry the owner's data
(discord.py's Message.edit clears the flag unless it is passed again).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from typing import Any

import discord

from channels.approvals import (
    EDIT_TIMEOUT_S,
    OUTCOMES,
    PREFIX,
    WaitingQuestions,
    button_key,
    buttons_of,
    settle,
    unanswered,
    with_outcome,
)
from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

log = logging.getLogger(__name__)

CUSTOM_ID = re.compile(rf"^{PREFIX}:([yna]):(.+)$")  # custom_id: "approval:<code>:<key>"
MAX_KEY_BYTES = 80  # Discord allows 100 characters of custom_id
MAX_TEXT = 2000 - 64  # room for the outcome line under Discord's message limit
STYLES = {
    "y": discord.ButtonStyle.success,
    "n": discord.ButtonStyle.danger,
    "a": discord.ButtonStyle.primary,
}


def buttons(key: str, question: ApprovalQuestion) -> discord.ui.View:
    """The buttons as a view that only describes them (see the module docstring)."""
    view = discord.ui.View(timeout=None)
    for label, code in buttons_of(question):
        view.add_item(
            discord.ui.Button(label=label, style=STYLES[code], custom_id=f"{PREFIX}:{code}:{key}")
        )
    view.stop()
    return view


def shown(question: ApprovalQuestion, outcome: str = "") -> str:
    """The question as the chat shows it, with its outcome below once there is one."""
    text = question.text or "An action needs your approval."
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return with_outcome(text, outcome)


class DiscordApprovals:
    """Questions waiting for a press, and the listener of the presses."""

    def __init__(self) -> None:
        self._waiting = WaitingQuestions()

    async def ask(
        self, channel: Any, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons to `channel` (a DM, text channel or thread) and
        wait for an allowed press. A cancelled wait (the caller's timeout) turns the message
        into its unanswered line without buttons, then re-raises."""
        key = button_key(question.id, MAX_KEY_BYTES)
        with self._waiting.waiting(key, question, may_answer) as pending:
            try:
                message = await channel.send(
                    shown(question), view=buttons(key, question), suppress_embeds=True
                )
            except Exception:
                log.exception("discord: could not ask for approval of %s", question.id)
                raise
            try:
                return await pending.future
            except asyncio.CancelledError:
                text = shown(question, unanswered(question))
                edit = message.edit(content=text, view=None, suppress=True)
                await _best_effort(edit, "time out")
                raise

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: Any = interaction.data or {}
        found = CUSTOM_ID.match(str(data.get("custom_id", "")))
        if found is None:
            return
        code, key = found.groups()
        user = interaction.user
        press = self._waiting.press(key, code, str(user.id), user.name)
        response = interaction.response
        if press.verdict == "not_yours":
            log.info("discord: approval button pressed by %s, who may not answer", user.id)
        if press.verdict != "answer" or press.pending is None:
            await _best_effort(response.send_message(press.toast, ephemeral=True), "answer")
            return
        try:
            outcome = shown(press.pending.question, OUTCOMES[press.answer])
            edit = response.edit_message(content=outcome, view=None, suppress_embeds=True)
            await _best_effort(edit, "show it")
        finally:
            settle(press)


async def _best_effort(call: Awaitable[Any], what: str) -> None:
    try:
        async with asyncio.timeout(EDIT_TIMEOUT_S):
            await call
    except Exception as exc:
        log.warning("discord: could not %s: %s", what, exc)
