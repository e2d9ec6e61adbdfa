"""LLMClient: the one place that calls LiteLLM for a chat completion — retries with backoff,
fallback models, streaming with a first-token limit, usage and cost.

A call is tried again after a 429, a 5xx, a timeout, a dropped connection or a 200 that
carries no choice (never after a key missing or refused: agent/model/failures.py); the caller
hears of the first such failure (`on_retry`) so the person waiting is told early. A stream cut
and tried again shows only what goes beyond the text already shown, so the preview is not
written twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

from agent.config import LLMSettings
from agent.model.facts import explicit_cache_control, load_litellm, price_of
from agent.model.failures import failure_line, is_auth
from agent.model.responses import (
    LLMError,
    LLMRequestRejected,
    LLMResponse,
    Message,
    OnRetry,
    OnText,
    ProviderHealth,
    ToolCall,
    Tools,
)

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
# LiteLLM's own switch (its MCP handlers set it on their inner calls), popped before sending.
SKIP_MCP_PROBE = "_skip_mcp_handler"


class EmptyReply(Exception):
    """A 200 whose body holds no choice, or a stream with no chunk: the provider answered
    nothing, which a second try usually mends."""


def request(
    litellm: ModuleType,
    settings: LLMSettings,
    model: str,
    messages: list[Message],
    tools: Tools = None,
) -> dict[str, Any]:
    """The keyword arguments of one `litellm.acompletion` call: what every call sends, and
    what the warm-up (agent/daemon/warmup.py) primes LiteLLM's code path with."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": settings.temperature,
        # The HTTP client's own limit (per read) only backs up the limits of LLMClient._call.
        "timeout": settings.call_limit_s(model),
        "num_retries": 0,
        "max_retries": 0,
    }
    if tools:
        kwargs["tools"] = tools
        # Our tools are plain functions: LiteLLM's probe for MCP gateway tools imports its
        # MCP client (0.6 s on the first call) only to find none. tests/test_llm_cold_path.py
        # fails when a LiteLLM release stops honouring this.
        kwargs[SKIP_MCP_PROBE] = True
    if explicit_cache_control(litellm, model):
        # The byte-stable system prompt is billed as cached from the second turn on.
        kwargs["cache_control_injection_points"] = [{"location": "message", "role": "system"}]
    if settings.max_tokens:
        kwargs["max_tokens"] = settings.max_tokens
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key is not None:
        kwargs["api_key"] = settings.api_key.get_secret_value()
    return kwargs


class ShownOnce:
    """Streamed text of one completion across its attempts: an attempt's text reaches the
    preview only past what an earlier, cut attempt already showed."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self._shown = 0  # characters shown so far, by any attempt
        self._attempt = ""

    def new_attempt(self) -> None:
        self._attempt = ""

    def __call__(self, delta: str) -> None:
        self._attempt += delta
        if len(self._attempt) > self._shown:
            self._on_text(self._attempt[self._shown :])
            self._shown = len(self._attempt)


class LLMClient:
    def __init__(self, settings: LLMSettings, *, sleep: Callable[[float], Any] = asyncio.sleep):
        self.settings = settings
        self._sleep = sleep
        self.health = ProviderHealth()

    @property
    def model(self) -> str:
        return self.settings.model

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Tools = None,
        on_text: OnText = None,
        on_retry: OnRetry = None,
        model: str | None = None,
    ) -> LLMResponse:
        """One completion; with `on_text` the reply is streamed and each delta handed to it.
        Retries 429, 5xx, timeouts, connection errors and empty replies with exponential
        backoff (awaiting `on_retry` with the reason first), then tries each fallback model.
        `model` (a chat's choice) is asked first; the configured chain follows it."""
        health = self.health
        health.calls += 1
        call = health.calls
        health.started[call] = time.monotonic()
        try:
            response = await self._complete(messages, tools, on_text, on_retry, model)
        except LLMRequestRejected:
            raise
        except LLMError as exc:
            if health.failing_since is None:
                health.failing_since = time.monotonic()
            health.last_error = str(exc)
            raise
        finally:
            health.started.pop(call, None)
        health.failing_since = None
        return response

    def chain(self, first: str | None = None) -> list[str]:
        """The models asked in turn: `first` (else the main one), then the rest of the
        configured chain."""
        configured = [self.settings.model, *self.settings.fallback_models]
        first = first or self.settings.model
        return [first, *(name for name in configured if name != first)]

    async def _complete(
        self,
        messages: list[Message],
        tools: Tools,
        on_text: OnText,
        on_retry: OnRetry,
        first: str | None,
    ) -> LLMResponse:
        litellm = load_litellm()
        errors: list[str] = []
        failed: dict[str, Exception] = {}  # each model's last failure, said once at the end
        status: int | None = None  # the last HTTP status seen
        shown = ShownOnce(on_text) if on_text is not None else None
        for model in self.chain(first):
            for attempt in range(self.settings.num_retries + 1):
                try:
                    if shown is not None:
                        shown.new_attempt()
                    kwargs = request(litellm, self.settings, model, messages, tools)
                    return await self._call(litellm, kwargs, shown)
                except Exception as exc:
                    code = getattr(exc, "status_code", None)
                    status = code if isinstance(code, int) else status
                    errors.append(f"{model}: {_short(exc)}")
                    failed[model] = exc
                    if _is_rejection(litellm, exc):
                        raise LLMRequestRejected(_short(exc), status=status) from exc
                    if not _is_transient(litellm, exc):
                        break  # auth, unknown model...: this model will not answer
                    if on_retry is not None and not isinstance(exc, EmptyReply):
                        await on_retry(errors[-1])  # an empty reply is retried quietly
                    if attempt < self.settings.num_retries:
                        delay = min(self.settings.retry_backoff_s * 2**attempt, MAX_BACKOFF_S)
                        log.warning(
                            "model %s failed (%s); retrying in %.1f s", model, _short(exc), delay
                        )
                        await self._sleep(delay)
            log.warning("model %s gave up: %s", model, errors[-1])
        said = (failure_line(litellm, self.settings, m, exc) for m, exc in failed.items())
        raise LLMError("no model answered: " + "; ".join(said), status=status)

    async def _call(
        self, litellm: ModuleType, kwargs: dict[str, Any], on_text: OnText
    ) -> LLMResponse:
        model = kwargs["model"]
        if on_text is None:
            async with asyncio.timeout(self.settings.call_limit_s(model)):
                return _to_response(litellm, await litellm.acompletion(**kwargs), model)
        response, first_token_s = await self._stream(litellm, kwargs, on_text)
        return replace(_to_response(litellm, response, model), first_token_s=first_token_s)

    async def _stream(
        self, litellm: ModuleType, kwargs: dict[str, Any], on_text: Callable[[str], None]
    ) -> tuple[Any, float | None]:
        """The first token within the model's first-token limit, then no pause between chunks
        over llm.timeout_s: a reply that keeps coming is never cut for its length."""
        loop = asyncio.get_running_loop()
        started, first_token_s = loop.time(), None
        chunks = []
        async with asyncio.timeout(self.settings.first_token_limit_s(kwargs["model"])) as limit:
            stream = await litellm.acompletion(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                chunks.append(chunk)
                delta = chunk.choices[0].delta if chunk.choices else None
                if first_token_s is None and _carries_token(delta):
                    first_token_s = loop.time() - started
                if first_token_s is not None:
                    limit.reschedule(loop.time() + self.settings.timeout_s)
                if delta is not None and delta.content:
                    on_text(delta.content)
        if not chunks:  # (LiteLLM gives choice-less chunks an empty choice: an empty reply)
            raise EmptyReply("the stream ended before its first chunk")
        return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"]), first_token_s


def _carries_token(delta: Any) -> bool:
    """A chunk with something the model generated (not the opening role chunk)."""
    names = ("content", "tool_calls", "reasoning_content")
    return delta is not None and any(getattr(delta, name, None) for name in names)


def _to_response(litellm: ModuleType, response: Any, model: str) -> LLMResponse:
    if response is None or not getattr(response, "choices", None):
        raise EmptyReply("the provider answered with no choices")
    message = response.choices[0].message
    calls = tuple(
        ToolCall(id=call.id, name=call.function.name or "", arguments=call.function.arguments or "")
        for call in (message.tool_calls or [])
    )
    usage = getattr(response, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)  # cached: OpenAI's and Anthropic's
    return LLMResponse(
        content=message.content or "",
        tool_calls=calls,
        model=model,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost_usd=price_of(litellm, response, model),
        cached_tokens=getattr(details, "cached_tokens", 0) or 0,
    )


def _is_transient(litellm: ModuleType, exc: Exception) -> bool:
    """Worth another try; never a key missing or refused, however LiteLLM wraps it."""
    if is_auth(litellm, exc):
        return False
    transient: tuple[type[Exception], ...] = (TimeoutError, EmptyReply, litellm.RateLimitError)
    transient += (litellm.Timeout, litellm.APIConnectionError, litellm.InternalServerError)
    transient += (litellm.ServiceUnavailableError,)
    status = getattr(exc, "status_code", None)
    return isinstance(exc, transient) or (isinstance(status, int) and status >= 500)


def _is_rejection(litellm: ModuleType, exc: Exception) -> bool:
    return isinstance(exc, litellm.BadRequestError) and not isinstance(
        exc, litellm.ContextWindowExceededError
    )


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
