"""In-process doubles of the model: `ScriptedModel` and `FunctionModel` satisfy
`agent.model.responses.ModelClient` as `LLMClient` does, and answer in this event loop with
no HTTP, no LiteLLM and no thread.

Use them where the model is only a scripted counterpart: the tool-call loop, the turn,
approvals, the channels and the runtime behind them (the daemon in this process takes one
through the `model` fixture of tests/conftest.py). Use the HTTP double (`llm_server.py`,
reached through the real LiteLLM) where the wire is the subject: LiteLLM itself, retries,
fallbacks and outages, streaming over SSE, provider-specific bodies (Anthropic's cache
marks), transcription and embeddings, subprocesses (`agent run` as a process, the
durability tests), and one end-to-end test per channel.

The outcome vocabulary is the HTTP double's (`text`, `tool_calls`, `error`, `delay`, `echo`),
so a test moves by swapping `fake_llm` for `model`. What the double does with it:

- `text`/`tool_calls`: an LLMResponse; tool calls without an id get `call_1`, `call_2`...
  With `on_text` the content is handed over in up to three pieces, as a stream would.
- `error(400, ...)`: LLMRequestRejected (the provider refused this request); any other
  status: LLMError, as LLMClient raises once its retries are spent. Wire shapes (`cut`,
  `no_choices`) are refused: their tests belong on the HTTP double.
- `delay_s` and `latency_s` are awaited, so /stop and deadlines cancel a slow answer.
  Nothing is retried, so `on_retry` is never called: outages belong on the HTTP double.

`requests` holds every call as the HTTP double records a body: `messages` (a JSON copy, so
what could not be sent fails here too), `model`, and `tools` and `stream: True` only when
given. Usage is counted as the HTTP double counts it (a token per four characters), so
/status and usage still show plausible numbers; `health` moves as LLMClient's does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fakes.llm_server import (
    SYSTEM_NOT_FIRST,
    TOOLS_UNSUPPORTED,
    Error,
    Outcome,
    _pieces,
    delay,
    echo,
    error,
    text,
    tool_calls,
)

from agent.model.responses import (
    LLMError,
    LLMRequestRejected,
    LLMResponse,
    Message,
    ModelClient,
    OnRetry,
    OnText,
    ProviderHealth,
    ToolCall,
    Tools,
)

__all__ = [
    "DEFAULT_MODEL",
    "FunctionModel",
    "ScriptedModel",
    "delay",
    "echo",
    "error",
    "text",
    "tool_calls",
]

DEFAULT_MODEL = "openai/test-model"  # tests/conftest.py's TEST_MODEL
Request = dict[str, Any]  # the shape of the HTTP double's request bodies
Respond = Callable[[Request], "Outcome | str"]


class FunctionModel:
    """A model whose every answer is `respond(request)`: an outcome, or a str for `text()`.
    Set `responder`, `latency_s`, `reject_tools` or `reject_non_leading_system` at any time;
    they are read per call."""

    def __init__(
        self, respond: Respond = echo, *, model: str = DEFAULT_MODEL, latency_s: float = 0.0
    ) -> None:
        self.responder = respond
        self.latency_s = latency_s
        self.reject_non_leading_system = False  # as the HTTP double: a 400 for these
        self.reject_tools = False
        self.health = ProviderHealth()
        self.requests: list[Request] = []
        self._model = model
        self._ids = itertools.count(1)

    @property
    def model(self) -> str:
        return self._model

    def _refusal(self, request: Request) -> Error | None:
        """The 400 the HTTP double answers for a refused shape, when this one is refused."""
        messages = request["messages"]
        if self.reject_non_leading_system and any(m["role"] == "system" for m in messages[1:]):
            return Error(400, SYSTEM_NOT_FIRST)
        if self.reject_tools and request.get("tools"):
            return Error(400, TOOLS_UNSUPPORTED)
        return None

    def _decide(self, request: Request) -> Outcome | str:
        return self._refusal(request) or self.responder(request)

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Tools = None,
        on_text: OnText = None,
        on_retry: OnRetry = None,
        model: str | None = None,
    ) -> LLMResponse:
        request: Request = {"model": model or self._model}  # a chat's /model choice first
        request["messages"] = json.loads(json.dumps(messages))
        if tools:
            request["tools"] = json.loads(json.dumps(tools))
        if on_text is not None:
            request["stream"] = True
        self.requests.append(request)
        health = self.health
        health.calls += 1
        call = health.calls
        health.started[call] = time.monotonic()
        try:
            response = await self._answer(request, on_text)
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

    async def _answer(self, request: Request, on_text: OnText) -> LLMResponse:
        outcome = self._decide(request)
        reply = text(outcome) if isinstance(outcome, str) else outcome
        started = time.monotonic()
        wait = self.latency_s + reply.delay_s
        if wait > 0:
            await asyncio.sleep(wait)
        if isinstance(reply, Error):
            if reply.status == 400:
                raise LLMRequestRejected(reply.message, status=400)
            raise LLMError(
                f"no model answered: {self._model}: {reply.message}", status=reply.status
            )
        if reply.shape != "whole":
            raise ValueError(f"a {reply.shape!r} reply is a wire shape: use the HTTP double")
        content = reply.content or ""
        first_token_s = None
        if on_text is not None:
            first_token_s = time.monotonic() - started
            for piece in _pieces(content) if content else []:
                on_text(piece)
                await asyncio.sleep(0)  # pieces arrive one by one, as a stream's would
        calls = tuple(
            ToolCall(c.id or f"call_{next(self._ids)}", c.name, c.arguments) for c in reply.calls
        )
        prompt = json.dumps(request["messages"]) + json.dumps(request.get("tools", []))
        written = len(content) + sum(len(c.arguments) for c in calls)
        return LLMResponse(
            content=content,
            tool_calls=calls,
            model=request["model"],
            prompt_tokens=max(1, len(prompt) // 4),
            completion_tokens=max(1, written // 4),
            cost_usd=None,  # a model LiteLLM has no price for, as on the HTTP double
            first_token_s=first_token_s,
        )


class ScriptedModel(FunctionModel):
    """Queued outcomes, served in order; then `responder` (`echo` unless given), as the
    HTTP double's `script()` and `responder` work."""

    def __init__(
        self,
        *outcomes: Outcome | str,
        respond: Respond = echo,
        model: str = DEFAULT_MODEL,
        latency_s: float = 0.0,
    ) -> None:
        super().__init__(respond, model=model, latency_s=latency_s)
        self._script: deque[Outcome | str] = deque(outcomes)

    def script(self, *outcomes: Outcome | str) -> None:
        """Queue outcomes, served before falling back to `responder`."""
        self._script.extend(outcomes)

    @property
    def pending(self) -> int:
        """Outcomes queued and not yet served: 0 when the test's script was all used."""
        return len(self._script)

    def _decide(self, request: Request) -> Outcome | str:
        """Refusals first (a refused request takes nothing off the script), then the script,
        then `responder`."""
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return self._script.popleft() if self._script else self.responder(request)


if TYPE_CHECKING:  # `MYPYPATH=tests mypy tests/fakes/model_double.py`: both are ModelClients
    _scripted: ModelClient = ScriptedModel()
    _function: ModelClient = FunctionModel()
