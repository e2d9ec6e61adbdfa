"""The calls a model makes again within one turn.

A small model often answers a tool's result by making the same call once more: a second
schedule, an edit that now fails because it is done. So a call that changes the world and
would change it again (not `repeat_safe`) is not run twice while nothing else changed the
world in between: a reply asking only for such work again ends the turn on what it returned
(agent/turns/loop.py); beside other calls, the model gets the first result back. Any other
call may run three times (a sensor polled, a file read again); the fourth identical one is
refused and ends the turn's tools.

What a call made again returned is kept: a bare "I can't assist with that" after it gives
way to that result (agent/turns/honesty.py's done_anyway).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from agent.durable.tool_journal import canonical
from agent.model.responses import ToolCall
from tools.base import ToolRegistry, ToolResult, has_effects, is_repeat_safe

MAX_SAME_CALL = 3  # the fourth identical call in a turn is refused


@dataclass(frozen=True)
class NotRun:
    """Why a call is not run, as the model reads it; `ends_tools`: the turn stops looping."""

    result: ToolResult
    ends_tools: bool
    ran_before: str | None = None  # made again after it ran: what it returned then


class Repeats:
    """One turn's record of its calls."""

    def __init__(self, tools: ToolRegistry) -> None:
        self._tools = tools
        self._seen: Counter[tuple[str, str]] = Counter()
        self._done: dict[tuple[str, str], str] = {}  # effects that ran, and what they said
        self.asked_again: list[tuple[str, str]] = []  # (tool, what it returned) of repeats

    def check(self, call: ToolCall) -> NotRun | None:
        """Why `call` is not run (None: run it); counts it either way."""
        key = _key(call)
        self._seen[key] += 1
        if self._seen[key] > MAX_SAME_CALL:
            return NotRun(
                ToolResult.error(
                    f"Not run: {call.name} was already called {MAX_SAME_CALL} times with these "
                    "same arguments in this turn and it would not change the outcome. Answer "
                    "the user now."
                ),
                ends_tools=True,
            )
        if key in self._done:
            self.asked_again.append((call.name, self._done[key]))
            return NotRun(  # its result first: a small model may answer with it verbatim
                ToolResult.success(
                    f"{self._done[key]}\n\n(Not run again: this same {call.name} call already "
                    "ran in this turn, and the above is what it did. Answer the user from it.)"
                ),
                ends_tools=False,
                ran_before=self._done[key],
            )
        return None

    def ran(self, call: ToolCall, result: ToolResult) -> None:
        """Note a call that ran: one with effects changes what an earlier call would do."""
        if self._seen[_key(call)] > 1 and result.ok:
            self.asked_again.append((call.name, result.output))
        tool = self._tools.get(call.name)
        if tool is None or not has_effects(tool):
            return
        self._done.clear()
        if result.ok and not is_repeat_safe(tool):
            self._done[_key(call)] = result.output


def _key(call: ToolCall) -> tuple[str, str]:
    return call.name, canonical(call.arguments)
