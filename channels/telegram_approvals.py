"""Approvals on Telegram: the question with Approve / Deny / Always allow inline buttons, and
the button presses that answer it.

One ``TelegramApprovals`` per channel keeps the questions still waiting, by the key their
buttons carry, so a press finds its question however many are open. The channel sends the
message (it knows the chat, the thread and the retry rules); this module decides what the
buttons say, who may press them and what the message shows afterwards.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update

from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

log = logging.getLogger(__name__)

PREFIX = "approval"
CALLBACK_PATTERN = rf"^{PREFIX}:[yna]:"  # callback data: "approval:<code>:<key>"
MAX_KEY_BYTES = 40  # prefix, code and key stay well under Telegram's 64-byte callback data
MAX_TEXT = 4096 - 64  # room for the outcome line under Telegram's message limit
EDIT_TIMEOUT_S = 10.0

BUTTONS: tuple[tuple[str, str], ...] = (("Approve", "y"), ("Deny", "n"), ("Always allow", "a"))
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

SendQuestion = Callable[[str, InlineKeyboardMarkup], Awaitable[Message]]


def button_key(question_id: str) -> str:
    """The question's id, or a digest of it when it would not fit in the callback data."""
    if len(question_id.encode()) <= MAX_KEY_BYTES:
        return question_id
    return hashlib.sha256(question_id.encode()).hexdigest()[:MAX_KEY_BYTES]


def keyboard(key: str) -> InlineKeyboardMarkup:
    """One row: Approve, Deny, Always allow; each press carries the answer and the key."""
    row = [
        InlineKeyboardButton(label, callback_data=f"{PREFIX}:{code}:{key}")
        for label, code in BUTTONS
    ]
    return InlineKeyboardMarkup([row])


def shown(question: ApprovalQuestion, outcome: str = "") -> str:
    """The question as the chat shows it, with its outcome below once there is one."""
    text = question.text or "An action needs your approval."
    if _units(text) > MAX_TEXT:  # Telegram counts UTF-16 code units
        while (excess := _units(text) - (MAX_TEXT - 1)) > 0:
            text = text[: len(text) - excess]
        text += "…"
    return f"{text}\n\n{outcome}" if outcome else text


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class _Pending:
    question: ApprovalQuestion
    may_answer: MayAnswer
    future: asyncio.Future[ApprovalAnswer]
    claimed: bool = False  # an allowed press is being shown; later presses are too late


class TelegramApprovals:
    """Questions waiting for a press, and the handler of the presses."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    async def ask(
        self, send: SendQuestion, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons and wait for an allowed press. A cancelled wait
        (the caller's timeout) turns the message into a denial note, then re-raises."""
        key = button_key(question.id)
        if key in self._pending:
            raise ValueError(f"approval question {question.id!r} is already waiting")
        pending = _Pending(question, may_answer, asyncio.get_running_loop().create_future())
        self._pending[key] = pending
        try:
            try:
                message = await send(shown(question), keyboard(key))
            except Exception:
                log.exception("telegram: could not ask for approval of %s", question.id)
                raise
            try:
                return await pending.future
            except asyncio.CancelledError:
                # Without reply_markup the edit also removes the buttons.
                await _best_effort(message.edit_text(shown(question, TIMED_OUT)), "time out")
                raise
        finally:
            if self._pending.get(key) is pending:
                del self._pending[key]

    async def on_press(self, update: Update) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        query = update.callback_query
        if query is None or not query.data or not re.match(CALLBACK_PATTERN, query.data):
            return
        _, code, key = query.data.split(":", 2)
        pending = self._pending.get(key)
        if pending is None or pending.future.done():
            await _tell(query, EXPIRED)
            return
        user = query.from_user
        if not pending.may_answer(str(user.id), user.username or ""):
            log.info("telegram: approval button pressed by %s, who may not answer", user.id)
            await _tell(query, NOT_YOURS)
            return
        if pending.claimed:
            await _tell(query, ANSWERED)
            return
        pending.claimed = True
        answer = CODES[code]
        try:
            await _tell(query, OUTCOMES[answer])
            edit = query.edit_message_text(shown(pending.question, OUTCOMES[answer]))
            await _best_effort(edit, "show the answer")
        finally:
            if not pending.future.done():
                pending.future.set_result(answer)


async def _tell(query: CallbackQuery, text: str) -> None:
    """Answer the press (the presser sees `text`); a failure only costs the toast."""
    await _best_effort(query.answer(text), "answer a button press")


async def _best_effort(call: Awaitable[Any], what: str) -> None:
    try:
        await asyncio.wait_for(call, EDIT_TIMEOUT_S)
    except Exception as exc:
        log.warning("telegram: could not %s: %s", what, exc)
