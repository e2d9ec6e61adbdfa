"""Approvals on Telegram: the question with inline buttons, and the callback queries of their
presses; the flow itself is channels/approvals.py.

The channel sends the message (it knows the chat, the thread and the retry rules); this
module draws the keyboard and answers a press the way Telegram does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, Message, Update

from channels.approvals import Button, ButtonApprovals, NewText, PressReply
from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

MAX_KEY_BYTES = 40  # prefix, code and key stay well under Telegram's 64-byte callback data
MAX_TEXT = 4096 - 64  # room for the outcome line under Telegram's message limit

SendQuestion = Callable[[str, InlineKeyboardMarkup], Awaitable[Message]]
# A question and its edits never preview a link (an edit without it previews again): the
# question quotes the model's action, whose URL may carry the owner's data.
NO_PREVIEWS = LinkPreviewOptions(is_disabled=True)


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup:
    """One row: Approve, Deny (and Always allow); each press carries the answer and the key."""
    row = [InlineKeyboardButton(button.label, callback_data=button.data) for button in buttons]
    return InlineKeyboardMarkup([row])


def utf16_units(text: str) -> int:
    """A text's length as Telegram counts it."""
    return len(text.encode("utf-16-le")) // 2


class TelegramApprovals:
    """Questions waiting for a press, and the handler of the presses."""

    def __init__(self) -> None:
        self._flow = ButtonApprovals(
            "telegram", max_key_bytes=MAX_KEY_BYTES, max_text=MAX_TEXT, units=utf16_units
        )

    async def ask(
        self, send: SendQuestion, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons and wait for an allowed press."""

        async def send_question(text: str, buttons: Sequence[Button]) -> NewText:
            message = await send(text, keyboard(buttons))
            # Without reply_markup the edit also removes the buttons.
            return lambda text: message.edit_text(text, link_preview_options=NO_PREVIEWS)

        return await self._flow.ask(send_question, question, may_answer)

    async def on_press(self, update: Update) -> None:
        """A press on one of our buttons: refused, too late, or the answer."""
        query = update.callback_query
        if query is None or not query.data:
            return
        reply = PressReply(
            toast=query.answer,
            new_text=lambda text: query.edit_message_text(text, link_preview_options=NO_PREVIEWS),
            toasts_the_outcome=True,
        )
        user = query.from_user
        await self._flow.on_press(query.data, str(user.id), user.username or "", reply)
