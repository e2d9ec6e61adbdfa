"""One chat completion through LiteLLM, for every model on neither direct road (see
agent/model/profiles/routes.py's road_of): the request's arguments, the call, a stream put
back together, and LiteLLM's price."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from agent.config import LLMSettings
from agent.model.profiles.litellm_facts import explicit_cache_control, price_of
from agent.model.profiles.litellm_import import load_litellm
from agent.model.responses import LLMResponse, Message, Tools, to_response

# LiteLLM's own switch (its MCP handlers set it on their inner calls), popped before sending.
SKIP_MCP_PROBE = "_skip_mcp_handler"


def request(
    litellm: ModuleType,
    settings: LLMSettings,
    model: str,
    messages: list[Message],
    tools: Tools = None,
    *,
    capped: bool = True,
) -> dict[str, Any]:
    """The keyword arguments of one `litellm.acompletion` call: what every call sends, and
    what the warm-up (agent/daemon/warmup.py) primes LiteLLM's code path with; not
    `capped`: without the default reply cap (a server refused it as too long)."""
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
    if cap := settings.reply_cap(model) if capped else settings.max_tokens:
        kwargs["max_tokens"] = cap
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key is not None:
        kwargs["api_key"] = settings.api_key.get_secret_value()
    return kwargs


class LiteLLMCall:
    """The Transport (agent/model/client.py) through LiteLLM."""

    def __init__(self, settings: LLMSettings) -> None:
        self._settings = settings
        self._litellm = load_litellm()

    async def send(
        self, model: str, messages: list[Message], tools: Tools, *, stream: bool, capped: bool
    ) -> Any:
        kwargs = request(self._litellm, self._settings, model, messages, tools, capped=capped)
        if stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        return await self._litellm.acompletion(**kwargs)

    def response(self, reply: Any, model: str) -> LLMResponse:
        found = to_response(reply, model, None)
        return replace(found, cost_usd=price_of(self._litellm, reply, model))

    def assembled(self, chunks: list[Any], model: str, messages: list[Message]) -> LLMResponse:
        return self.response(self._litellm.stream_chunk_builder(chunks, messages=messages), model)
