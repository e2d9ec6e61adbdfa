"""Approvals on Telegram: the question with Approve / Deny / Always allow inline buttons, and
the button presses that answer it.

One ``TelegramApprovals`` per channel keeps the questions still waiting, by the key their
buttons carry, so a press finds its question however many are open. The channel sends the
message (it knows the chat, the thread and the retry rules); this module decides what the
buttons say, who may press them and what the message shows afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import (
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    Update,
)

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

CALLBACK_PATTERN = rf"^{PREFIX}:[yna]:"  # callback data: "approval:<code>:<key>"
MAX_KEY_BYTES = 40  # prefix, code and key stay well under Telegram's 64-byte callback data
MAX_TEXT = 4096 - 64  # room for the outcome line under Telegram's message limit

SendQuestion = Callable[[str, InlineKeyboardMarkup], Awaitable[Message]]
# A question and its edits never preview a link (an edit without it previews again): the
# question quotes the model's action, whose URL may carry the owner's data.
NO_PREVIEWS = LinkPreviewOptions(is_disabled=True)


def keyboard(key: str, question: ApprovalQuestion) -> InlineKeyboardMarkup:
    """One row: Approve, Deny (and Always allow); each press carries the answer and the key."""
    row = [
        InlineKeyboardButton(label, callback_data=f"{PREFIX}:{code}:{key}")
        for label, code in buttons_of(question)
    ]
    return InlineKeyboardMarkup([row])


def shown(question: ApprovalQuestion, outcome: str = "") -> str:
    """The question as the chat shows it, with its outcome below once there is one."""
    text = question.text or "An action needs your approval."
    if _units(text) > MAX_TEXT:  # Telegram counts UTF-16 code units
        while (excess := _units(text) - (MAX_TEXT - 1)) > 0:
            text = text[: len(text) - excess]
        text += "…"
    return with_outcome(text, outcome)


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class TelegramApprovals:
    """Questions waiting for a press, and the handler of the presses."""

    def __init__(self) -> None:
        self._waiting = WaitingQuestions()

    async def ask(
        self, send: SendQuestion, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons and wait for an allowed press. A cancelled wait
        (the caller's timeout) turns the message into its unanswered line, then re-raises."""
        key = button_key(question.id, MAX_KEY_BYTES)
        with self._waiting.waiting(key, question, may_answer) as pending:
            try:
                message = await send(shown(question), keyboard(key, question))
            except Exception:
                log.exception("telegram: could not ask for approval of %s", question.id)
                raise
            try:
                return await pending.future
            except asyncio.CancelledError:
                # Without reply_markup the edit also removes the buttons.
                text = shown(question, unanswered(question))
                edit = message.edit_text(text, link_preview_options=NO_PREVIEWS)
                await _best_effort(edit, "time out")
                raise

    async def on_press(self, update: Update) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        query = update.callback_query
        if query is None or not query.data or not re.match(CALLBACK_PATTERN, query.data):
            return
        _, code, key = query.data.split(":", 2)
        user = query.from_user
        press = self._waiting.press(key, code, str(user.id), user.username or "")
        if press.verdict == "not_yours":
            log.info("telegram: approval button pressed by %s, who may not answer", user.id)
        if press.verdict != "answer" or press.pending is None:
            await _tell(query, press.toast)
            return
        try:
            await _tell(query, press.toast)
            text = shown(press.pending.question, OUTCOMES[press.answer])
            edit = query.edit_message_text(text, link_preview_options=NO_PREVIEWS)
            await _best_effort(edit, "show the answer")
        finally:
            settle(press)


async def _tell(query: CallbackQuery, text: str) -> None:
    """Answer the press (the presser sees `text`); a failure only costs the toast."""
    await _best_effort(query.answer(text), "answer a button press")


async def _best_effort(call: Awaitable[Any], what: str) -> None:
    try:
        async with asyncio.timeout(EDIT_TIMEOUT_S):
            await call
    except Exception as exc:
        log.warning("telegram: could not %s: %s", what, exc)
