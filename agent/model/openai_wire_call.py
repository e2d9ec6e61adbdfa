"""One chat completion in OpenAI's chat-completions protocol, sent with httpx, for the models
on the two direct roads of agent/model/profiles/routes.py — an OpenAI-protocol server of the
owner's own, and OpenAI itself: the request LiteLLM would send, without its import. A model
at one's own server has no price; one at OpenAI is priced from LiteLLM's table
(agent/model/profiles/litellm_map.py).

Why not the OpenAI SDK's client: `import openai` loads every resource and type of the API
(realtime, assistants, evals...), about 0.6 s of CPU and 40 MiB, three quarters of a cold
one-shot on this road, though a turn uses one endpoint. What the SDK adds there — a JSON
POST, server-sent events, the status codes — is this file. Its error classes stay the
vocabulary of failures (agent/model/failures.py reads them for both transports: LiteLLM's
are their subclasses), so a failure raises the SDK's own class, imported only then.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import httpx  # imported by the first call: a CLI command that makes none never pays for it

# Each provider's key variable (LiteLLM reads the same), read when llm.api_key is not set.
KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "hosted_vllm": "HOSTED_VLLM_API_KEY",
    "lm_studio": "LM_STUDIO_API_KEY",
}
# A server of one's own that checks no key ignores this one; OpenAI itself is never sent a
# request without a key (MISSING_KEY is raised instead, as the SDK and LiteLLM do).
NO_KEY = "no-key"
_SCOPES = (("OpenAI-Organization", "OPENAI_ORGANIZATION"), ("OpenAI-Project", "OPENAI_PROJECT_ID"))
MISSING_KEY = "Missing credentials. No API key was found for OpenAI."


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's TLS context (its CA bundle), made once for every client: 15-20 ms each time."""
    import httpx

    return httpx.create_ssl_context()


class Fields:
    """A JSON object of a reply read as the SDK's models read: by attribute, None where the
    server left a field out (to_response and `joined` read both transports' replies)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return _fields(self._data.get(name))


def _fields(value: Any) -> Any:
    if isinstance(value, dict):
        return Fields(value)
    if isinstance(value, list):
        return [_fields(item) for item in value]
    return value


class OpenAIWireCall:
    """The Transport (agent/model/client.py) over httpx. Its HTTP client is made on the
    first call and kept for the event loop it was made in."""

    def __init__(self, settings: LLMSettings) -> None:
        self._settings = settings
        self._made: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None

    def prepare(self) -> None:
        """Make the TLS context: what the first call would do, outside its time limits."""
        tls_context()

    def warm_up(self) -> None:
        """What the first call loads, without an event loop or a request: the TLS context,
        the tokenizer the prompt is counted with, and the model's price."""
        from agent.model.stand_in_tokenizer import stand_in_counter

        self.prepare()
        self._listing(self._settings.model)
        counter = stand_in_counter()
        if counter is not None:
            counter("warming up")

    def _client(self) -> httpx.AsyncClient:
        """Made in the call's own event loop: one made in a loop now closed (a reload, a
        test) would try to close itself there."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._made is None or self._made[0] is not loop:
            self._made = (loop, httpx.AsyncClient(verify=tls_context()))
        return self._made[1]

    def _headers(self, model: str) -> dict[str, str]:
        """llm.api_key, else the provider's variable; else a stand-in for a server of one's
        own. At OpenAI with no key the call fails here, before anything is sent."""
        settings = self._settings
        key = settings.api_key.get_secret_value() if settings.api_key is not None else ""
        variable = KEY_VARIABLES.get(provider_of(model))
        key = key or (os.environ.get(variable, "") if variable else "")
        if not key and road_of(settings, model) is Road.OPENAI:
            import openai

            raise openai.OpenAIError(MISSING_KEY)
        headers = {"Authorization": f"Bearer {key or NO_KEY}"}
        # The organization and project, from the variables the SDK and LiteLLM read.
        for header, scope_variable in _SCOPES:
            if value := os.environ.get(scope_variable):
                headers[header] = value
        return headers

    async def send(
        self,
        model: str,
        messages: list[Message],
        tools: Tools,
        *,
        stream: bool,
        capped: bool,
        max_tokens: int | None = None,
    ) -> Any:
        """The request; `max_tokens` instead of the reply cap (a read-ahead asks for one);
        not `capped`: without the default cap (a server refused it as too long)."""
        import httpx

        settings = self._settings
        body: dict[str, Any] = {
            "model": wire_name(model),
            "messages": messages,
            "temperature": settings.temperature,
        }
        if tools:
            body["tools"] = tools
        if cap := max_tokens or (settings.reply_cap(model) if capped else settings.max_tokens):
            body["max_tokens"] = cap
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        url = openai_base(settings.api_base).rstrip("/") + "/chat/completions"
        client = self._client()
        request = client.build_request(
            "POST",
            url,
            json=body,
            headers=self._headers(model),
            timeout=settings.call_limit_s(model),  # per read: backs up LLMClient's limits
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise _timed_out(request) from exc
        except httpx.TransportError as exc:
            raise _unreachable(request) from exc
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _status_error(response)
        if stream:
            return _events(response)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return _fields(response.json())

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


async def _events(response: httpx.Response) -> AsyncIterator[Fields]:
    """The chunks of a streamed reply: each server-sent event's data, up to `[DONE]`. An
    event carrying an `error` is raised as the SDK raises it."""
    import httpx

    data: list[str] = []
    try:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
                continue
            if line or not data:
                continue  # a comment, an event name, an id; or blank lines between events
            payload, data = "\n".join(data), []
            if payload.startswith("[DONE]"):
                return
            yield _chunk(payload, response)
        if data and not data[0].startswith("[DONE]"):
            yield _chunk("\n".join(data), response)
    except httpx.TimeoutException as exc:
        raise _timed_out(response.request) from exc
    finally:
        await response.aclose()


def _chunk(payload: str, response: httpx.Response) -> Fields:
    found = json.loads(payload)
    if isinstance(found, dict) and found.get("error"):
        import openai

        error = found["error"]
        said = error.get("message") if isinstance(error, dict) else None
        message = said if isinstance(said, str) and said else "An error occurred during streaming"
        raise openai.APIError(message, response.request, body=error)
    return Fields(found) if isinstance(found, dict) else Fields({})


def _status_error(response: httpx.Response) -> Exception:
    """The SDK's class for this status, with its words: "Error code: 429 - {body}"."""
    import openai

    text = response.text.strip()
    try:
        body: Any = json.loads(text)
        message = f"Error code: {response.status_code} - {body}"
    except ValueError:
        body, message = text, text or f"Error code: {response.status_code}"
    data = body.get("error", body) if isinstance(body, dict) else body
    classes: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }
    server = openai.InternalServerError if response.status_code >= 500 else None
    kind = classes.get(response.status_code) or server or openai.APIStatusError
    return kind(message, response=response, body=data)


def _timed_out(request: httpx.Request) -> Exception:
    import openai

    return openai.APITimeoutError(request=request)


def _unreachable(request: httpx.Request) -> Exception:
    import openai

    return openai.APIConnectionError(request=request)


def joined(chunks: list[Any], model: str) -> LLMResponse:
    """A streamed reply put back together: its text, each tool call's name and arguments
    (sent in pieces under the call's index) and the usage of the last chunk that has it."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage = None
    answered = False  # a chunk with a choice came: else the provider answered nothing
    finish = None
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        finish = getattr(chunk.choices[0], "finish_reason", None) or finish
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
    return response_of("".join(text), tool_calls, usage, model, None, cut=finish == "length")
