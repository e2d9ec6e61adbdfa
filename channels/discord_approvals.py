"""Approvals on Discord: the question with Approve / Deny / Always allow buttons, and the
presses (component interactions) that answer it.

The buttons are described with a ``discord.ui.View`` but answered by one listener
(``on_interaction``) that finds the question by the key in the button's custom_id: the view is
stopped before it is sent, so discord.py does not keep it in its view store, and a press on
a question that no longer waits (a timeout, a restart) still gets an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import discord

from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

log = logging.getLogger(__name__)

PREFIX = "approval"
CUSTOM_ID = re.compile(rf"^{PREFIX}:([yna]):(.+)$")  # custom_id: "approval:<code>:<key>"
MAX_KEY_CHARS = 80  # Discord allows 100 characters of custom_id
MAX_TEXT = 2000 - 64  # room for the outcome line under Discord's message limit
EDIT_TIMEOUT_S = 10.0

BUTTONS: tuple[tuple[str, str, discord.ButtonStyle], ...] = (
    ("Approve", "y", discord.ButtonStyle.success),
    ("Deny", "n", discord.ButtonStyle.danger),
    ("Always allow", "a", discord.ButtonStyle.primary),
)
CODES: dict[str, ApprovalAnswer] = {"y": "approve", "n": "deny", "a": "always"}
OUTCOMES: dict[ApprovalAnswer, str] = {
    "approve": "✅ Approved",
    "deny": "❌ Denied",
    "always": "✅ Always allowed",
}
TIMED_OUT = "⌛ No answer in time: denied"
NOT_YOURS = "Only the owner can answer this."
EXPIRED = "This question has expired."
ANSWERED = "This question is already answered."


def button_key(question_id: str) -> str:
    """The question's id, or a digest of it when it would not fit in the custom_id."""
    if len(question_id) <= MAX_KEY_CHARS:
        return question_id
    return hashlib.sha256(question_id.encode()).hexdigest()[:MAX_KEY_CHARS]


def buttons(key: str) -> discord.ui.View:
    """The three buttons as a view that only describes them (see the module docstring)."""
    view = discord.ui.View(timeout=None)
    for label, code, style in BUTTONS:
        view.add_item(
            discord.ui.Button(label=label, style=style, custom_id=f"{PREFIX}:{code}:{key}")
        )
    view.stop()
    return view


def shown(question: ApprovalQuestion, outcome: str = "") -> str:
    """The question as the chat shows it, with its outcome below once there is one."""
    text = question.text or "An action needs your approval."
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return f"{text}\n\n{outcome}" if outcome else text


@dataclass
class _Pending:
    question: ApprovalQuestion
    may_answer: MayAnswer
    future: asyncio.Future[ApprovalAnswer]
    claimed: bool = False  # an allowed press is being shown; later presses are too late


class DiscordApprovals:
    """Questions waiting for a press, and the listener of the presses."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    async def ask(
        self, channel: Any, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons to `channel` (a DM, text channel or thread) and
        wait for an allowed press. A cancelled wait (the caller's timeout) turns the message
        into a denial note without buttons, then re-raises."""
        key = button_key(question.id)
        if key in self._pending:
            raise ValueError(f"approval question {question.id!r} is already waiting")
        pending = _Pending(question, may_answer, asyncio.get_running_loop().create_future())
        self._pending[key] = pending
        try:
            try:
                message = await channel.send(shown(question), view=buttons(key))
            except Exception:
                log.exception("discord: could not ask for approval of %s", question.id)
                raise
            try:
                return await pending.future
            except asyncio.CancelledError:
                edit = message.edit(content=shown(question, TIMED_OUT), view=None)
                await _best_effort(edit, "time out")
                raise
        finally:
            if self._pending.get(key) is pending:
                del self._pending[key]

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: Any = interaction.data or {}
        found = CUSTOM_ID.match(str(data.get("custom_id", "")))
        if found is None:
            return
        code, key = found.groups()
        pending = self._pending.get(key)
        response = interaction.response
        if pending is None or pending.future.done():
            await _best_effort(response.send_message(EXPIRED, ephemeral=True), "answer a press")
            return
        user = interaction.user
        if not pending.may_answer(str(user.id), user.name):
            log.info("discord: approval button pressed by %s, who may not answer", user.id)
            await _best_effort(response.send_message(NOT_YOURS, ephemeral=True), "refuse")
            return
        if pending.claimed:
            await _best_effort(response.send_message(ANSWERED, ephemeral=True), "answer a press")
            return
        pending.claimed = True
        answer = CODES[code]
        try:
            outcome = shown(pending.question, OUTCOMES[answer])
            await _best_effort(response.edit_message(content=outcome, view=None), "show it")
        finally:
            if not pending.future.done():
                pending.future.set_result(answer)


async def _best_effort(call: Awaitable[Any], what: str) -> None:
    try:
        await asyncio.wait_for(call, EDIT_TIMEOUT_S)
    except Exception as exc:
        log.warning("discord: could not %s: %s", what, exc)
