"""Approvals: a tool's request asked of the owner in the chat it came from, with a deadline.

"Always allow" answers are remembered per workspace in state.db — outside the workspace, so
no command can grant itself one — and `agent doctor` lists them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from pathlib import Path

from channels.base import ApprovalAnswer, ApprovalQuestion, Channel, ChatRef, MayAnswer
from tools.base import ASK_EACH_TIME, ApprovalRequest, Approver

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    workspace TEXT NOT NULL,
    rule TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, rule)
);
"""


class AlwaysAllowed:
    """The remembered "Always allow" rules of one workspace. Rare and tiny: plain sqlite3."""

    def __init__(self, db_path: Path, workspace: Path) -> None:
        self._path = db_path
        self._workspace = str(workspace)

    def _connect(self) -> sqlite3.Connection:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, timeout=5)
        db.executescript(_SCHEMA)
        return db

    def rules(self) -> list[str]:
        if not self._path.exists():
            return []
        with self._connect() as db:
            rows = db.execute(
                "SELECT rule FROM approvals WHERE workspace = ? ORDER BY rule", (self._workspace,)
            ).fetchall()
        return [rule for (rule,) in rows]

    def remember(self, rule: str) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT OR IGNORE INTO approvals VALUES (?, ?, ?)",
                (self._workspace, rule, time.time()),
            )


def question_text(request: ApprovalRequest) -> str:
    """The question as the owner reads it, with what "Always allow" would cover from now on
    (said before the button is pressed, never after)."""
    text = f"Approve {request.tool}: {request.action}\n(Why I ask: {request.reason})"
    if request.always_covers:
        text += f"\n({request.always_covers})"
    return text


def chat_approver(
    channel: Channel,
    chat: ChatRef,
    may_answer: MayAnswer,
    *,
    always: AlwaysAllowed,
    timeout_s: float,
) -> Approver:
    """An Approver that asks in `chat`: a remembered rule passes at once; no answer within
    `timeout_s` is a denial; only people `may_answer` allows can answer."""

    async def approve(request: ApprovalRequest) -> bool:
        remembered = await asyncio.to_thread(always.rules)
        each_time = any(rule.startswith(ASK_EACH_TIME) for rule in request.rules)
        if request.rules and not each_time and set(request.rules) <= set(remembered):
            return True
        question = ApprovalQuestion(uuid.uuid4().hex[:16], question_text(request))
        answer: ApprovalAnswer
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: it can lose a /stop
                answer = await channel.ask_approval(chat, question, may_answer)
        except TimeoutError:
            log.info("%s: no answer to %r within %g s: denied", chat.key, request.action, timeout_s)
            return False
        if answer == "always":
            for rule in (r for r in request.rules if not r.startswith(ASK_EACH_TIME)):
                await asyncio.to_thread(always.remember, rule)
        log.info("%s: %s %r", chat.key, answer, request.action)
        return answer in ("approve", "always")

    return approve
