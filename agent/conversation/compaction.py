"""The history a turn sends: recent whole turns, and a summary of what came before.

When the turns since the last summary would pass the token budget (or the message count),
the oldest are summarised by the model into one message that stands in for them; the newest
half stays word for word, so the next turns run for a while before summarising again. The
originals stay in state.db, marked compacted. When the summary cannot be made, the oldest
whole turns are dropped instead (the old behaviour), with a log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from agent.durable.sessions import SessionStore, Turn
from agent.model.responses import Message, ModelClient

log = logging.getLogger(__name__)

SUMMARY_HEADING = "[Summary of the earlier conversation]"
Summariser = Callable[[str, list[Turn]], Awaitable[str]]


async def history_for(
    sessions: SessionStore,
    chat_key: str,
    *,
    max_messages: int,
    budget_tokens: int,
    summarise: Summariser | None,
    session: int | None = None,
) -> list[Message]:
    """`session`: the one the turn read (None: the current one), where its summary goes."""
    recent = await sessions.recent(chat_key, session)
    turns = recent.turns
    costs = [sum(turn.tokens) for turn in turns]
    summary = recent.summary
    if sum(costs) + _cost(sessions, summary) > budget_tokens or _count(turns) > max_messages:
        keep = _newest(turns, costs, budget_tokens // 2, max_messages // 2)
        folded = turns[: len(turns) - len(keep)]
        if folded:
            summary = await _fold(sessions, chat_key, session, summary, folded, summarise)
        turns = keep
    return ([_summary_message(summary)] if summary else []) + [
        message for turn in turns for message in turn.messages
    ]


async def _fold(
    sessions: SessionStore,
    chat_key: str,
    session: int | None,
    summary: str,
    folded: list[Turn],
    summarise: Summariser | None,
) -> str:
    """The new summary, stored; or the old one when none could be made (the folded turns
    are then simply left out)."""
    if summarise is None:
        return summary
    try:
        text = (await summarise(summary, folded)).strip()
        if not text:
            raise ValueError("the summary came back empty")
    except Exception as exc:
        log.warning(
            "%s: could not summarise %d turns (%s); leaving them out", chat_key, len(folded), exc
        )
        return summary
    await sessions.save_summary(chat_key, folded[-1].number, text, session=session)
    log.info("%s: %d turns summarised", chat_key, len(folded))
    return text


def _newest(turns: list[Turn], costs: list[int], budget: int, max_messages: int) -> list[Turn]:
    kept: list[Turn] = []
    spent = count = 0
    for turn, cost in zip(reversed(turns), reversed(costs), strict=True):
        if kept and (spent + cost > budget or count + len(turn.messages) > max_messages):
            break
        if not kept and cost > budget * 2:
            break  # even the newest turn alone is over the whole budget
        kept.insert(0, turn)
        spent += cost
        count += len(turn.messages)
    return kept


def _count(turns: list[Turn]) -> int:
    return sum(len(turn.messages) for turn in turns)


def _cost(sessions: SessionStore, summary: str) -> int:
    return sessions.tokens(_summary_message(summary)) if summary else 0


def _summary_message(summary: str) -> Message:
    return {"role": "user", "content": f"{SUMMARY_HEADING}\n{summary}"}


def transcript(turns: list[Turn], *, max_tool_chars: int = 300) -> str:
    """The turns as plain lines for the summariser; tool results shortened."""
    lines: list[str] = []
    for turn in turns:
        for message in turn.messages:
            role = message.get("role", "")
            content = message.get("content") or ""
            if not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False)
            if role == "tool":
                lines.append(f"(tool result: {content[:max_tool_chars]})")
            elif message.get("tool_calls"):
                calls = ", ".join(
                    f"{c['function']['name']}({c['function']['arguments'][:max_tool_chars]})"
                    for c in message["tool_calls"]
                )
                lines.append(f"Assistant called: {calls}" + (f" — {content}" if content else ""))
            elif content:
                lines.append(f"{role.capitalize()}: {content}")
    return "\n".join(lines)


SUMMARY_INSTRUCTIONS = (
    "You keep a running summary of a conversation between a user and their assistant. "
    "Merge the earlier summary (if any) and the new part into one compact summary that keeps "
    "every fact, name, number, decision, preference, open question and promise that may "
    "matter later, and drops small talk. Write it in the conversation's language, as short "
    "notes, with no preamble."
)


def model_summariser(llm: ModelClient, scrub: Callable[[str], str]) -> Summariser:
    """Summaries written by the chat's own model."""

    async def summarise(summary: str, turns: list[Turn]) -> str:
        text = f"Earlier summary:\n{summary or '(none)'}\n\nNew part:\n{transcript(turns)}"
        response = await llm.complete(
            [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": text}]
        )
        return scrub(response.content)

    return summarise
