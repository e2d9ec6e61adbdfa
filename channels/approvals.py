"""The approval flow the Telegram and Discord buttons share: register the question, wait for
an allowed person's press, time out, settle, show the outcome, tell a refused presser.

A platform module only supplies its calls: send the question with its buttons, replace its
text, answer a press. Whether a press answers the question, comes too late, or comes from
someone who may not answer is decided here, once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

log = logging.getLogger(__name__)

PREFIX = "approval"  # button data: "approval:<code>:<key>"
PRESS_DATA = re.compile(rf"{PREFIX}:([yna]):(.*)", re.DOTALL)
BUTTONS: tuple[tuple[str, str], ...] = (("Approve", "y"), ("Deny", "n"), ("Always allow", "a"))
CODES: dict[str, ApprovalAnswer] = {"y": "approve", "n": "deny", "a": "always"}
OUTCOMES: dict[ApprovalAnswer, str] = {
    "approve": "✅ Approved",
    "deny": "❌ Denied",
    "always": "✅ Always allowed",
}
NO_TEXT = "An action needs your approval."
TIMED_OUT = "⌛ No answer in time: denied"
NOT_YOURS = "Only the owner can answer this."
EXPIRED = "This question has expired."
ANSWERED = "This question is already answered."
EDIT_TIMEOUT_S = 10.0

NewText = Callable[[str], Awaitable[object]]  # replace the question's text, buttons removed


@dataclass(frozen=True)
class Button:
    label: str
    code: str  # "y", "n" or "a"
    data: str  # what a press on it carries back: "approval:<code>:<key>"


SendQuestion = Callable[[str, Sequence[Button]], Awaitable[NewText]]


@dataclass(frozen=True)
class PressReply:
    """The platform's calls that answer one press."""

    toast: Callable[[str], Awaitable[object]]  # a note only the presser sees
    new_text: NewText  # the question's text once answered
    # Telegram answers the press apart from the edit (the presser also sees the outcome as
    # a toast); on Discord the edit is the press's one answer.
    toasts_the_outcome: bool


@dataclass
class Pending:
    question: ApprovalQuestion
    may_answer: MayAnswer
    future: asyncio.Future[ApprovalAnswer]
    claimed: bool = False  # an allowed press is being shown; later presses are too late


@dataclass(frozen=True)
class Press:
    """What a press means: the answer (and its outcome line), or the reason it is not one."""

    verdict: Literal["answer", "expired", "not_yours", "answered"]
    pending: Pending | None = None
    answer: ApprovalAnswer = "deny"

    @property
    def toast(self) -> str:
        """What the one who pressed is told."""
        texts = {"expired": EXPIRED, "not_yours": NOT_YOURS, "answered": ANSWERED}
        return OUTCOMES[self.answer] if self.verdict == "answer" else texts[self.verdict]


class ButtonApprovals:
    """One channel's questions still waiting for a press, by the key their buttons carry (so
    a press finds its question however many are open), and the flow around them."""

    def __init__(
        self,
        platform: str,
        *,
        max_key_bytes: int,
        max_text: int,
        units: Callable[[str], int] = len,
    ) -> None:
        self._platform = platform
        self._max_key_bytes = max_key_bytes  # what fits in a button's data
        self._max_text = max_text  # the message limit, less room for the outcome line
        self._units = units  # how the platform counts a message's length
        self._pending: dict[str, Pending] = {}

    async def ask(
        self, send: SendQuestion, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """Send the question with its buttons and wait for an allowed press. A cancelled wait
        (the caller's timeout) turns the message into its unanswered line, then re-raises."""
        key = button_key(question.id, self._max_key_bytes)
        offered = BUTTONS if question.always else BUTTONS[:2]  # "Always allow" only if it may
        buttons = [Button(label, code, f"{PREFIX}:{code}:{key}") for label, code in offered]
        with self._waiting(key, question, may_answer) as pending:
            try:
                new_text = await send(self.shown(question), buttons)
            except Exception:
                log.exception("%s: could not ask for approval of %s", self._platform, question.id)
                raise
            try:
                return await pending.future
            except asyncio.CancelledError:
                text = self.shown(question, question.unanswered or TIMED_OUT)
                await best_effort(
                    new_text(text), f"mark the question unanswered on {self._platform}"
                )
                raise

    async def on_press(self, data: str, user_id: str, username: str, reply: PressReply) -> None:
        """A press on a button (`data`: what it carries; not ours: ignored): refused, too
        late, or the answer, which the question then shows."""
        found = PRESS_DATA.fullmatch(data)
        if found is None:
            return
        code, key = found.groups()
        press = self._press(key, code, user_id, username)
        if press.verdict == "not_yours":
            log.info(
                "%s: approval button pressed by %s, who may not answer", self._platform, user_id
            )
        if press.verdict != "answer" or press.pending is None:
            await best_effort(reply.toast(press.toast), f"answer a press on {self._platform}")
            return
        # The answer first, then what shows it: a press made in time is not lost to the
        # deadline while the platform takes its time with the toast and the edit (the owner
        # read "Approved" while the turn was denied).
        if not press.pending.future.done():
            press.pending.future.set_result(press.answer)
        if reply.toasts_the_outcome:
            await best_effort(reply.toast(press.toast), f"answer a press on {self._platform}")
        text = self.shown(press.pending.question, OUTCOMES[press.answer])
        await best_effort(reply.new_text(text), f"show the answer on {self._platform}")

    def shown(self, question: ApprovalQuestion, outcome: str = "") -> str:
        """The question as the chat shows it, with its outcome below once there is one."""
        text = question.text or NO_TEXT
        if self._units(text) > self._max_text:
            while (excess := self._units(text) - (self._max_text - 1)) > 0:
                text = text[: len(text) - excess]
            text += "…"
        return f"{text}\n\n{outcome}" if outcome else text

    @contextmanager
    def _waiting(
        self, key: str, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> Iterator[Pending]:
        if key in self._pending:
            raise ValueError(f"approval question {question.id!r} is already waiting")
        pending = Pending(question, may_answer, asyncio.get_running_loop().create_future())
        self._pending[key] = pending
        try:
            yield pending
        finally:
            if self._pending.get(key) is pending:
                del self._pending[key]

    def _press(self, key: str, code: str, user_id: str, username: str) -> Press:
        """Decide a press; an answer claims the question (the caller then settles it and
        shows the outcome)."""
        pending = self._pending.get(key)
        if pending is None or pending.future.done():
            return Press("expired")
        if not pending.may_answer(user_id, username):
            return Press("not_yours", pending)
        if pending.claimed:
            return Press("answered", pending)
        pending.claimed = True
        return Press("answer", pending, CODES[code])


def button_key(question_id: str, max_length: int) -> str:
    """The question's id, or a digest of it when it would not fit in the button's data."""
    if len(question_id.encode()) <= max_length:
        return question_id
    return hashlib.sha256(question_id.encode()).hexdigest()[:max_length]


async def best_effort(call: Awaitable[Any], what: str) -> None:
    """Await a call whose failure (or a hang past EDIT_TIMEOUT_S) costs only what it shows:
    the flow goes on without it."""
    try:
        async with asyncio.timeout(EDIT_TIMEOUT_S):
            await call
    except Exception as exc:
        log.warning("could not %s: %s", what, exc)
