"""A job's model: the metered one (its calls kept under the trigger `job`, budgets
applied) in front of the job's own limits — its tokens, and a cancel asked from elsewhere
(`agent jobs cancel`), read before each call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent.model.responses import (
    LLMResponse,
    Message,
    ModelClient,
    OnRetry,
    OnText,
    ProviderHealth,
    Tools,
)

# A job marked to be cancelled in the store: by `agent jobs cancel`, or by a /stop taken by
# another process sharing the store (agent/runtime/commands.py).
CANCEL_ASKED = "cancelled (/stop or agent jobs cancel)"


class JobStopped(Exception):
    """The job ends here: its state ("stopped" or "cancelled") and the line that says why."""

    def __init__(self, state: str, why: str) -> None:
        super().__init__(why)
        self.state = state


class JobModel:
    """The model as one job sees it; `tokens` counts what its calls used."""

    def __init__(
        self, inner: ModelClient, token_limit: int, cancelled: Callable[[], Awaitable[bool]]
    ) -> None:
        self._inner = inner
        self.health: ProviderHealth = inner.health
        self._limit = token_limit
        self._cancelled = cancelled
        self.tokens = 0

    @property
    def model(self) -> str:
        return self._inner.model

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Tools = None,
        on_text: OnText = None,
        on_retry: OnRetry = None,
        model: str | None = None,
    ) -> LLMResponse:
        if await self._cancelled():
            raise JobStopped("cancelled", CANCEL_ASKED)
        response = await self._inner.complete(
            messages, tools=tools, on_text=on_text, on_retry=on_retry, model=model
        )
        self.tokens += response.prompt_tokens + response.completion_tokens
        if self.tokens > self._limit:
            raise JobStopped(
                "stopped",
                f"stopped: past its token limit ({self.tokens:,} of {self._limit:,} tokens)",
            )
        return response
