"""LLMClient: the one place a chat completion is asked for — retries with backoff, fallback
models, streaming with a first-token limit, usage and cost — through one of two transports:
OpenAI's protocol over httpx for a model at a server of one's own or at OpenAI itself,
LiteLLM for the rest (agent/model/profiles/routes.py's `road_of` chooses).

A call is tried again after a 429, a 5xx, a timeout, a dropped connection or a 200 that
carries no choice (never after a key missing or refused: agent/model/failures.py); the caller
hears of the first such failure (`on_retry`) so the person waiting is told early. A stream cut
and tried again shows only what goes beyond the text already shown, so the preview is not
written twice.

A provider's error may quote the key the call sent ("Incorrect API key provided: <key>"):
every failure's text is scrubbed here, where it is made, of that key and every other secret
known, before it reaches a log line, `on_retry`, the LLMError a turn stores and tells, or
/status (`health.last_error`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from agent.config import LLMSettings
from agent.model.failures import failure_line, is_rejection, is_too_long, is_transient, short
from agent.model.openai_wire_call import OpenAIWireCall
from agent.model.profiles.routes import Road, road_of
from agent.model.responses import (
    EmptyReply,
    LLMError,
    LLMRequestRejected,
    LLMResponse,
    Message,
    OnRetry,
    OnText,
    ProviderHealth,
    Tools,
)
from agent.security import Scrubber

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


class Transport(Protocol):
    """How a completion is sent and read back: agent/model/openai_wire_call.py and
    agent/model/litellm_call.py."""

    async def send(
        self, model: str, messages: list[Message], tools: Tools, *, stream: bool, capped: bool
    ) -> Any: ...

    def response(self, reply: Any, model: str) -> LLMResponse: ...

    def assembled(self, chunks: list[Any], model: str, messages: list[Message]) -> LLMResponse: ...


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
        self._wire: OpenAIWireCall | None = None
        self._litellm: Transport | None = None

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

    async def read_ahead(self, messages: list[Message], tools: Tools) -> bool:
        """Send the main model `messages` (a first request's system prompt and an empty user
        message) for one token, so its server keeps them read: a server of one's own reuses a
        request's longest prefix it has read. False, nothing sent, for a model on another
        road: a hosted one would charge for it and keeps no prefix for us. Not retried."""
        model = self.settings.model
        if road_of(self.settings, model) is not Road.OWN_SERVER:
            return False
        wire = self._transport(model)
        assert isinstance(wire, OpenAIWireCall)  # the own-server road's transport
        async with asyncio.timeout(self.settings.first_token_limit_s(model)):
            await wire.send(model, messages, tools, stream=False, capped=True, max_tokens=1)
        return True

    def chain(self, first: str | None = None) -> list[str]:
        """The models asked in turn: `first` (else the main one), then the rest of the
        configured chain."""
        configured = [self.settings.model, *self.settings.fallback_models]
        first = first or self.settings.model
        return [first, *(name for name in configured if name != first)]

    def _transport(self, model: str) -> Transport:
        """OpenAI's protocol over httpx for a model on a direct road (kept: it holds the HTTP
        client), LiteLLM for the rest (imported on the first such call)."""
        if road_of(self.settings, model) is not Road.LITELLM:
            self._wire = self._wire or OpenAIWireCall(self.settings)
            self._wire.prepare()
            return self._wire
        from agent.model.litellm_call import LiteLLMCall

        self._litellm = self._litellm or LiteLLMCall(self.settings)
        return self._litellm

    async def _complete(
        self,
        messages: list[Message],
        tools: Tools,
        on_text: OnText,
        on_retry: OnRetry,
        first: str | None,
    ) -> LLMResponse:
        errors: list[str] = []
        failed: dict[str, Exception] = {}  # each model's last failure, said once at the end
        status: int | None = None  # the last HTTP status seen
        shown = ShownOnce(on_text) if on_text is not None else None
        for model in self.chain(first):
            # Outside the try: a client library that is missing is not the model's failure.
            transport = self._transport(model)
            for attempt in range(self.settings.num_retries + 1):
                try:
                    if shown is not None:
                        shown.new_attempt()
                    return await self._call(transport, model, messages, tools, shown)
                except Exception as exc:
                    code = getattr(exc, "status_code", None)
                    status = code if isinstance(code, int) else status
                    words = self._scrubbed(short(exc))
                    errors.append(f"{model}: {words}")
                    failed[model] = exc
                    if is_rejection(exc):
                        raise LLMRequestRejected(words, status=status) from exc
                    if not is_transient(exc):
                        break  # auth, unknown model...: this model will not answer
                    if on_retry is not None and not isinstance(exc, EmptyReply):
                        await on_retry(errors[-1])  # an empty reply is retried quietly
                    if attempt < self.settings.num_retries:
                        delay = min(self.settings.retry_backoff_s * 2**attempt, MAX_BACKOFF_S)
                        log.warning("model %s failed (%s); retrying in %.1f s", model, words, delay)
                        await self._sleep(delay)
            log.warning("model %s gave up: %s", model, errors[-1])
        said = "; ".join(failure_line(self.settings, m, exc) for m, exc in failed.items())
        raise LLMError(self._scrubbed("no model answered: " + said), status=status)

    def _scrubbed(self, text: str) -> str:
        """`text` without the key a call may have sent — llm.api_key, or the provider's
        variable (`from_environment` knows every *_API_KEY, also one agent.env put there
        after this client was made), nor any other secret of the environment. Made at each
        failure, so a key read later counts too."""
        configured = self.settings.api_key
        keys = [configured.get_secret_value()] if configured is not None else []
        return Scrubber.from_environment(extra=keys)(text)

    async def _call(
        self,
        transport: Transport,
        model: str,
        messages: list[Message],
        tools: Tools,
        on_text: OnText,
    ) -> LLMResponse:
        """One request; refused as too long under the default reply cap (`reply_cap`: vLLM
        and TGI refuse a prompt and a cap that together pass the window, where llama-server
        and Ollama stop at its end), sent once more without it."""
        try:
            return await self._sent(transport, model, messages, tools, on_text, capped=True)
        except Exception as exc:
            default_cap = not self.settings.max_tokens and self.settings.reply_cap(model)
            if not (default_cap and is_too_long(exc)):
                raise
        return await self._sent(transport, model, messages, tools, on_text, capped=False)

    async def _sent(
        self,
        transport: Transport,
        model: str,
        messages: list[Message],
        tools: Tools,
        on_text: OnText,
        *,
        capped: bool,
    ) -> LLMResponse:
        if on_text is None:
            async with asyncio.timeout(self.settings.call_limit_s(model)):
                reply = await transport.send(model, messages, tools, stream=False, capped=capped)
                return transport.response(reply, model)
        chunks, first_token_s = await self._stream(
            transport, model, messages, tools, on_text, capped=capped
        )
        response = transport.assembled(chunks, model, messages)
        return replace(response, first_token_s=first_token_s)

    async def _stream(
        self,
        transport: Transport,
        model: str,
        messages: list[Message],
        tools: Tools,
        on_text: Callable[[str], None],
        *,
        capped: bool,
    ) -> tuple[list[Any], float | None]:
        """The first token within the model's first-token limit, then no pause between chunks
        over llm.timeout_s: a reply that keeps coming is never cut for its length."""
        loop = asyncio.get_running_loop()
        started, first_token_s = loop.time(), None
        chunks = []
        async with asyncio.timeout(self.settings.first_token_limit_s(model)) as limit:
            stream = await transport.send(model, messages, tools, stream=True, capped=capped)
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
        return chunks, first_token_s


def _carries_token(delta: Any) -> bool:
    """A chunk with something the model generated (not the opening role chunk)."""
    names = ("content", "tool_calls", "reasoning_content")
    return delta is not None and any(getattr(delta, name, None) for name in names)
