"""What a model call gives back, and the one interface the turn machinery calls a model
through: `ModelClient`, which LLMClient satisfies and the tests' in-process doubles do too."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

Message = dict[str, Any]
Tools = list[dict[str, Any]] | None  # the `tools=` list, or None
OnText = Callable[[str], None] | None  # streamed text goes here, delta by delta
# Told why a call is being tried again, before the wait: the runtime says early that the
# model is not answering, instead of at the turn's deadline.
OnRetry = Callable[[str], Awaitable[None]] | None


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it
    cut: bool = False  # the reply reached its length limit while these were written


@dataclass(frozen=True)
class LLMResponse:
    content: str
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # LiteLLM's price; None when it has none (a model of your own)
    first_token_s: float | None = None  # a streamed reply: seconds until its first token
    cached_tokens: int = 0  # of prompt_tokens, those the provider read from its prompt cache
    cut: bool = False  # it stopped at its length limit (finish_reason "length")


@dataclass
class Usage:
    """Totals over the calls of one turn; the cost is unknown (None) when a call's was."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0

    def add(self, response: LLMResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        known = self.cost_usd is not None and response.cost_usd is not None
        self.cost_usd = (self.cost_usd or 0.0) + (response.cost_usd or 0.0) if known else None


# A reply that opens with the model's reasoning in tags (local reasoning models write it in
# the content): taken out, as LiteLLM does, so nothing drafted in it is shown or run.
_REASONING = re.compile(
    r"<(?:think|thinking|budget:thinking)>.*?</(?:think|thinking|budget:thinking)>", re.S
)


# Said after a reply the model could not finish: the person knows it is not the whole answer.
CUT_NOTE = "\n\n[This reply reached its length limit and stops here (llm.max_tokens).]"
# Said instead of a reply cut while the model was still reasoning (no answer was written).
CUT_REASONING = (
    "[I was still thinking when my reply reached its length limit (llm.max_tokens), so there "
    "is no answer yet: ask again, perhaps in smaller steps.]"
)
_REASONING_OPENS = re.compile(r"<(?:think|thinking|budget:thinking)>")


def without_reasoning(content: str) -> str:
    """`content` without the reasoning block it opens with, if it opens with one."""
    found = _REASONING.match(content)
    return content[found.end() :] if found else content


def to_response(reply: Any, model: str, cost_usd: float | None) -> LLMResponse:
    """LLMResponse from a completion in OpenAI's shape (the SDK's and LiteLLM's alike)."""
    if reply is None or not getattr(reply, "choices", None):
        raise EmptyReply("the provider answered with no choices")
    choice = reply.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(id=call.id, name=call.function.name or "", arguments=call.function.arguments or "")
        for call in (message.tool_calls or [])
    )
    usage = getattr(reply, "usage", None)
    cut = getattr(choice, "finish_reason", None) == "length"
    return response_of(message.content or "", calls, usage, model, cost_usd, cut=cut)


def response_of(
    content: str,
    calls: tuple[ToolCall, ...],
    usage: Any,
    model: str,
    cost_usd: float | None,
    *,
    cut: bool = False,
) -> LLMResponse:
    """LLMResponse from a reply's text, its calls and its usage block (OpenAI's shape); `cut`:
    it stopped at its length limit, which its text then says (CUT_NOTE), or, when it ends in
    a call, that call's arguments were cut short (the loop tells the model why they fail)."""
    if cut and not calls:
        unclosed = _REASONING_OPENS.match(content) and not _REASONING.match(content)
        content = CUT_REASONING if unclosed else content.rstrip() + CUT_NOTE
    elif cut:
        calls = (*calls[:-1], replace(calls[-1], cut=True))
    details = getattr(usage, "prompt_tokens_details", None)  # cached: OpenAI's and Anthropic's
    return LLMResponse(
        content=without_reasoning(content),
        tool_calls=calls,
        model=model,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost_usd=cost_usd,
        cached_tokens=getattr(details, "cached_tokens", 0) or 0,
        cut=cut,
    )


class EmptyReply(Exception):
    """A 200 whose body holds no choice, or a stream with no chunk: the provider answered
    nothing, which a second try usually mends."""


class LLMError(Exception):
    """No model could answer. `status` is the last HTTP status seen, when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BudgetSpent(LLMError):
    """A call not made: a spending limit is reached (agent/runtime/owner/budget.py). The message is
    the line the person reads: which limit, and when it resets."""


class LLMRequestRejected(LLMError):
    """The provider refused the request itself (HTTP 400): retrying the same one is useless,
    but the caller may change it (move a system message, drop `tools=`) and send it again."""


@dataclass
class ProviderHealth:
    """How the provider is doing, for /status: calls under way, and since when it fails."""

    started: dict[int, float] = field(default_factory=dict)  # call number -> monotonic start
    failing_since: float | None = None  # monotonic
    last_error: str = ""
    calls: int = 0

    def describe(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        parts = []
        if self.failing_since is not None:
            since = now - self.failing_since
            parts.append(f"unreachable for {since:.0f} s; last error: {self.last_error[:160]}")
        if self.started:
            oldest = now - min(self.started.values())
            parts.append(f"{len(self.started)} call(s) under way, the oldest for {oldest:.0f} s")
        return "; ".join(parts) or "answering"


class ModelClient(Protocol):
    """A model the turn can call: one completion, streamed when `on_text` is given, retried
    as the client sees fit; LLMError when no model answered. `model`: a configured model to
    ask first instead of the main one (a chat's /model choice)."""

    health: ProviderHealth

    @property
    def model(self) -> str: ...

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Tools = None,
        on_text: OnText = None,
        on_retry: OnRetry = None,
        model: str | None = None,
    ) -> LLMResponse: ...
