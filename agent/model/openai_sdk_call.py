"""One chat completion through the OpenAI SDK's own client, for the models on the two direct
roads of agent/model/profiles/routes.py — an OpenAI-protocol server of the owner's own, and
OpenAI itself: the request LiteLLM would send through the same SDK, without its import. A
model at one's own server has no price; one at OpenAI is priced from LiteLLM's table
(agent/model/profiles/litellm_map.py)."""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from dataclasses import replace
from typing import Any

from agent.config import LLMSettings
from agent.model.profiles.litellm_map import Listing, listing
from agent.model.profiles.routes import Road, openai_base, provider_of, road_of, wire_name
from agent.model.responses import (
    EmptyReply,
    LLMResponse,
    Message,
    ToolCall,
    Tools,
    response_of,
    to_response,
)

# Each provider's key variable (LiteLLM reads the same), read when llm.api_key is not set.
KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "hosted_vllm": "HOSTED_VLLM_API_KEY",
    "lm_studio": "LM_STUDIO_API_KEY",
}
# The SDK will not send a request without a key: a server of one's own that checks none
# ignores this one. (At OpenAI a missing key is said by the SDK itself, as through LiteLLM.)
NO_KEY = "no-key"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's TLS context (its CA bundle), made once for every client: 15-20 ms each time."""
    import httpx

    return httpx.create_ssl_context()


class OpenAISDKCall:
    """The Transport (agent/model/client.py) through the OpenAI SDK. Its HTTP client is
    made on the first call and kept for the event loop it was made in."""

    def __init__(self, settings: LLMSettings) -> None:
        self._settings = settings
        self._made: tuple[asyncio.AbstractEventLoop, tuple[str | None, str], Any] | None = None

    def prepare(self) -> None:
        """Import the SDK's client and chat modules and make the TLS context: what the first
        call would do, done outside the time limits of a call."""
        import openai.resources.chat  # noqa: F401
        from openai import AsyncOpenAI  # noqa: F401

        tls_context()

    def warm_up(self) -> None:
        """What the first call imports and loads, without an event loop or a request: the
        SDK's modules, the tokenizer the prompt is counted with, and the model's price."""
        from agent.model.stand_in_tokenizer import stand_in_counter

        self.prepare()
        self._listing(self._settings.model)
        counter = stand_in_counter()
        if counter is not None:
            counter("warming up")

    def _client(self, model: str) -> Any:
        """The SDK's client for `model`: made on the first call, in the call (a key missing
        at OpenAI fails there, as one missing through LiteLLM does)."""
        where = (self._key(model), openai_base(self._settings.api_base))
        loop = asyncio.get_running_loop()
        if self._made is None or self._made[0] is not loop or self._made[1] != where:
            self._made = (loop, where, self._new_client(*where))
        return self._made[2]

    def _new_client(self, key: str | None, base_url: str) -> Any:
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        # Its own HTTP client: the SDK's default one, dropped with a closed event loop (a
        # reload, a test), would try to close itself on that loop and log an error.
        client = AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            organization=os.environ.get("OPENAI_ORGANIZATION") or None,  # as LiteLLM reads it
            max_retries=0,
            http_client=DefaultAsyncHttpxClient(verify=tls_context()),
        )
        client.chat.completions  # noqa: B018 (imports the SDK's chat resources)
        return client

    def _key(self, model: str) -> str | None:
        """llm.api_key, else the provider's variable; else a stand-in for a server of one's
        own, and None at OpenAI (the SDK then says the key is missing)."""
        if self._settings.api_key is not None:
            return self._settings.api_key.get_secret_value()
        variable = KEY_VARIABLES.get(provider_of(model))
        found = os.environ.get(variable, "") if variable else ""
        at_openai = road_of(self._settings, model) is Road.OPENAI
        return found or (None if at_openai else NO_KEY)

    async def send(self, model: str, messages: list[Message], tools: Tools, *, stream: bool) -> Any:
        settings = self._settings
        body: dict[str, Any] = {
            "model": wire_name(model),
            "messages": messages,
            "temperature": settings.temperature,
            "timeout": settings.call_limit_s(model),  # per read: backs up LLMClient's limits
        }
        if tools:
            body["tools"] = tools
        if settings.max_tokens:
            body["max_tokens"] = settings.max_tokens
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return await self._client(model).chat.completions.create(**body)

    def response(self, reply: Any, model: str) -> LLMResponse:
        return self._priced(to_response(reply, model, None))

    def assembled(self, chunks: list[Any], model: str, messages: list[Message]) -> LLMResponse:
        return self._priced(joined(chunks, model))

    def _priced(self, found: LLMResponse) -> LLMResponse:
        """With the price LiteLLM's table gives a model at OpenAI; None for one at a server
        of one's own, or one the table does not list."""
        listed = self._listing(found.model)
        if listed is None:
            return found
        cost = listed.cost(found.prompt_tokens, found.cached_tokens, found.completion_tokens)
        return replace(found, cost_usd=cost)

    def _listing(self, model: str) -> Listing | None:
        if road_of(self._settings, model) is not Road.OPENAI:
            return None
        return listing(wire_name(model))


def joined(chunks: list[Any], model: str) -> LLMResponse:
    """A streamed reply put back together: its text, each tool call's name and arguments
    (sent in pieces under the call's index) and the usage of the last chunk that has it."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage = None
    answered = False  # a chunk with a choice came: else the provider answered nothing
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        answered = True
        text.append(delta.content or "")
        for part in delta.tool_calls or []:
            index = part.index if part.index is not None else max(calls, default=0)
            call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or part.id or ""
            if part.function is not None:
                call["name"] = call["name"] or part.function.name or ""
                call["arguments"] += part.function.arguments or ""
    if not answered:
        raise EmptyReply("the stream carried no choice")
    tool_calls = tuple(
        ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"])
        for index, call in sorted(calls.items())
    )
    return response_of("".join(text), tool_calls, usage, model, None)
