"""The one place that talks to LiteLLM: retries, fallbacks, streaming, usage and cost.

LiteLLM takes seconds to import, so it is imported on the first call, never at module
import: `agent --help`, `agent init` and config errors stay fast.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from agent.config import LLMSettings

log = logging.getLogger(__name__)

Message = dict[str, Any]
Tools = list[dict[str, Any]] | None  # the `tools=` list, or None
OnText = Callable[[str], None] | None  # streamed text goes here, delta by delta
MAX_BACKOFF_S = 30.0
# LiteLLM's own switch (its MCP handlers set it on their inner calls), popped before sending.
SKIP_MCP_PROBE = "_skip_mcp_handler"
# Models LiteLLM has no price for: asked once per process (its cost map does not change).
_UNPRICED: set[str] = set()


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it


@dataclass(frozen=True)
class LLMResponse:
    content: str
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    first_token_s: float | None = None  # a streamed reply: seconds until its first token


@dataclass
class Usage:
    """Totals over the calls of one turn."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, response: LLMResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.cost_usd += response.cost_usd


class LLMError(Exception):
    """No model could answer. `status` is the last HTTP status seen, when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMRequestRejected(LLMError):
    """The provider refused the request itself (HTTP 400): retrying the same one is useless,
    but the caller may change it (move a system message, drop `tools=`) and send it again."""


def load_litellm() -> ModuleType:
    """Import LiteLLM with its bundled price map, so the import never reaches the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def request(
    litellm: ModuleType,
    settings: LLMSettings,
    model: str,
    messages: list[Message],
    tools: Tools = None,
) -> dict[str, Any]:
    """The keyword arguments of one `litellm.acompletion` call: what every call sends, and
    what the warm-up (agent/cli/llm_warmup.py) primes LiteLLM's code path with."""
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
    if _explicit_cache_control(litellm, model):
        # The byte-stable system prompt is billed as cached from the second turn on.
        kwargs["cache_control_injection_points"] = [{"location": "message", "role": "system"}]
    if settings.max_tokens:
        kwargs["max_tokens"] = settings.max_tokens
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key is not None:
        kwargs["api_key"] = settings.api_key.get_secret_value()
    return kwargs


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


class LLMClient:
    def __init__(self, settings: LLMSettings, *, sleep: Callable[[float], Any] = asyncio.sleep):
        self.settings = settings
        self._sleep = sleep
        self.health = ProviderHealth()

    @property
    def model(self) -> str:
        return self.settings.model

    async def complete(
        self, messages: list[Message], *, tools: Tools = None, on_text: OnText = None
    ) -> LLMResponse:
        """One completion; with `on_text` the reply is streamed and each delta handed to it.
        Retries 429, 5xx, timeouts and connection errors with exponential backoff, then tries
        each fallback model in turn."""
        health = self.health
        health.calls += 1
        call = health.calls
        health.started[call] = time.monotonic()
        try:
            response = await self._complete(messages, tools, on_text)
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

    async def _complete(
        self, messages: list[Message], tools: Tools, on_text: OnText
    ) -> LLMResponse:
        litellm = load_litellm()
        errors: list[str] = []
        status: int | None = None  # the last HTTP status seen
        for model in [self.settings.model, *self.settings.fallback_models]:
            for attempt in range(self.settings.num_retries + 1):
                try:
                    kwargs = request(litellm, self.settings, model, messages, tools)
                    return await self._call(litellm, kwargs, on_text)
                except Exception as exc:
                    code = getattr(exc, "status_code", None)
                    status = code if isinstance(code, int) else status
                    errors.append(f"{model}: {_short(exc)}")
                    if _is_rejection(litellm, exc):
                        raise LLMRequestRejected(_short(exc), status=status) from exc
                    if not _is_transient(litellm, exc):
                        break  # auth, unknown model...: this model will not answer
                    if attempt < self.settings.num_retries:
                        delay = min(self.settings.retry_backoff_s * 2**attempt, MAX_BACKOFF_S)
                        log.warning(
                            "model %s failed (%s); retrying in %.1f s", model, _short(exc), delay
                        )
                        await self._sleep(delay)
            log.warning("model %s gave up: %s", model, errors[-1])
        raise LLMError("no model answered: " + "; ".join(errors[-3:]), status=status)

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
        return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"]), first_token_s


def _carries_token(delta: Any) -> bool:
    """A chunk with something the model generated (not the opening role chunk)."""
    names = ("content", "tool_calls", "reasoning_content")
    return delta is not None and any(getattr(delta, name, None) for name in names)


async def transcribe(name: str, data: bytes, model: str, *, api_base: str = "") -> str:
    """Speech to text through LiteLLM (e.g. model "openai/whisper-1"), from the bytes the
    channel fetched (the file saved in the workspace is not read again)."""
    litellm = load_litellm()
    kwargs: dict[str, Any] = {"model": model, "file": (name, data)}
    if api_base:
        kwargs["api_base"] = api_base
    response = await litellm.atranscription(**kwargs)
    return str(response.text).strip()


async def embed(
    texts: list[str],
    model: str,
    api_base: str = "",
    *,
    api_key: str | None = None,
    timeout_s: float = 30.0,
) -> list[list[float]]:
    """Embeddings of `texts` through LiteLLM (e.g. model "openai/text-embedding-3-small"),
    in the order of `texts`: what the memory store compares by meaning. No retries of our
    own (the provider's client may retry a 5xx twice): the store's timeout bounds the wait,
    it then searches by words and embeds what it missed on a later search."""
    litellm = load_litellm()
    kwargs: dict[str, Any] = {"model": model, "input": texts, "timeout": timeout_s}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key is not None:
        kwargs["api_key"] = api_key
    response = await litellm.aembedding(**kwargs)
    items = [item if isinstance(item, dict) else vars(item) for item in response.data]
    items.sort(key=lambda item: int(item.get("index", 0)))
    return [[float(x) for x in item["embedding"]] for item in items]


def _to_response(litellm: ModuleType, response: Any, model: str) -> LLMResponse:
    message = response.choices[0].message
    calls = tuple(
        ToolCall(id=call.id, name=call.function.name or "", arguments=call.function.arguments or "")
        for call in (message.tool_calls or [])
    )
    usage = getattr(response, "usage", None)
    return LLMResponse(
        content=message.content or "",
        tool_calls=calls,
        model=model,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost_usd=price_of(litellm, response, model),
    )


def price_of(litellm: ModuleType, response: Any, model: str) -> float:
    """What the call cost. LiteLLM prices every response as it logs it and keeps the figure
    in `_hidden_params["response_cost"]` (None when it has no price for the model): read it
    rather than pricing the response a second time. Only when it is missing is the price
    looked up here, and a model LiteLLM cannot price is looked up once, not per call."""
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        return float(hidden["response_cost"] or 0.0)
    if model in _UNPRICED:
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown price: LiteLLM raises (and builds a traceback) every time
        _UNPRICED.add(model)
        return 0.0


def _explicit_cache_control(litellm: ModuleType, model: str) -> bool:
    """Providers that cache a prompt only where the request marks it (Anthropic's models,
    also through Bedrock and Vertex); the others cache by themselves or not at all."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:
        return False
    return provider == "anthropic" or (
        provider in ("bedrock", "vertex_ai") and "claude" in model.lower()
    )


def _is_transient(litellm: ModuleType, exc: Exception) -> bool:
    transient: tuple[type[Exception], ...] = (TimeoutError, litellm.RateLimitError)
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


def _asks_ollama(model: str) -> bool:
    """LiteLLM answers questions about an Ollama model by asking the Ollama server at its
    default address (not pinclaw's api_base), in a blocking call: pinclaw does not ask."""
    return model.startswith(("ollama/", "ollama_chat/"))


def context_window(model: str) -> int | None:
    """The model's input window as LiteLLM knows it, or None for an unknown model (and an
    Ollama one, whose window is what its server was started with)."""
    if _asks_ollama(model):
        return None
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model` by LiteLLM's counter (a tiktoken fallback when unknown)."""
    litellm = load_litellm()
    return int(litellm.token_counter(model=model or "gpt-4o", text=text))


@functools.cache
def supports_native_tools(model: str) -> bool:
    """False only when LiteLLM positively knows the model lacks function calling (an
    Ollama model that does not teaches it with a refusal: agent/turns/quirks.py)."""
    if _asks_ollama(model):
        return True
    litellm = load_litellm()
    try:
        litellm.get_model_info(model)  # raises for an unknown model: assume native
        return bool(litellm.supports_function_calling(model=model))
    except Exception:
        return True


@functools.cache
def supports_vision(model: str) -> bool:
    """True when LiteLLM knows the model takes images; unknown models are assumed not to."""
    if _asks_ollama(model):
        return False  # llm.vision = "on" says otherwise
    litellm = load_litellm()
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:
        return False
