"""What the Telegram and Discord approval buttons share: the answers, the texts, and the
questions still waiting, by the key their buttons carry.

A platform module only draws the buttons, sends and edits the message, and answers the press;
whether a press answers the question, comes too late, or comes from someone who may not
answer is decided here, once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from channels.base import ApprovalAnswer, ApprovalQuestion, MayAnswer

PREFIX = "approval"  # button data: "approval:<code>:<key>"
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
EDIT_TIMEOUT_S = 10.0


def button_key(question_id: str, max_length: int) -> str:
    """The question's id, or a digest of it when it would not fit in the button's data."""
    if len(question_id.encode()) <= max_length:
        return question_id
    return hashlib.sha256(question_id.encode()).hexdigest()[:max_length]


def buttons_of(question: ApprovalQuestion) -> tuple[tuple[str, str], ...]:
    """The buttons a question offers: all three, or Approve / Deny without "Always allow"."""
    return BUTTONS if question.always else BUTTONS[:2]


def unanswered(question: ApprovalQuestion) -> str:
    """What the question shows once nobody answered it in time (or it was closed)."""
    return question.unanswered or TIMED_OUT


def with_outcome(text: str, outcome: str) -> str:
    return f"{text}\n\n{outcome}" if outcome else text


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


class WaitingQuestions:
    """The questions of one channel still waiting for a press."""

    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}

    @contextmanager
    def waiting(
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

    def press(self, key: str, code: str, user_id: str, username: str) -> Press:
        """Decide a press; an answer claims the question (the caller then shows the outcome
        and calls `settle`)."""
        pending = self._pending.get(key)
        if pending is None or pending.future.done():
            return Press("expired")
        if not pending.may_answer(user_id, username):
            return Press("not_yours", pending)
        if pending.claimed:
            return Press("answered", pending)
        pending.claimed = True
        return Press("answer", pending, CODES[code])


def settle(press: Press) -> None:
    """Hand the answer to the waiting question."""
    if press.pending is not None and not press.pending.future.done():
        press.pending.future.set_result(press.answer)
