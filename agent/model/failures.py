"""A failed model call as the person reads it: the model, the address it tried, the provider's
own words once and what to do — not LiteLLM's class names repeated for every attempt.
Which failures are worth another try, which are a refused request and which are
authentication (never retried: a key does not mend itself) is said here too.

The OpenAI SDK's error classes say it for both transports: LiteLLM's errors are subclasses of
them. The SDK is imported only once a call has failed.
"""

from __future__ import annotations

import json
import re

from agent.config import LLMSettings
from agent.model.keys import PROVIDER_KEYS, SETTING
from agent.model.profiles.routes import DEFAULT_BASES, Unroutable, provider_of, route
from agent.model.responses import EmptyReply

MAX_WORDS = 200
# LiteLLM's wrapping of the provider's text: "litellm.AuthenticationError: ", "OpenAIException - "
_WRAPPERS = re.compile(r"^(?:litellm\.\w+: |\w+Error: |\w+Exception - )+")
_TAILS = re.compile(r"\s*(?:Received Model Group|LiteLLM Retried|model_group=).*$", re.S)
_NO_KEY = re.compile(
    r"missing (?:credentials|[\w ]{0,20}api key)|api_key client option must be set", re.I
)
# A request longer than the model's window: LiteLLM's class for it, or a server's own words
# (llama.cpp's "exceeds the available context size", vLLM's "maximum context length").
_TOO_LONG = re.compile(
    r"ContextWindowExceeded|context (?:length|size|window)|maximum context|too many tokens", re.I
)
_UNREACHABLE = re.compile(
    r"connection error|cannot connect|connection refused|name or service not known|"
    r"nodename nor servname|network is unreachable|all connection attempts failed",
    re.I,
)


def provider_words(exc: BaseException) -> str:
    """What the provider (or the HTTP client) said: the message of the error body the
    OpenAI SDK parsed, else the text without LiteLLM's wrapping."""
    said = _message_in(getattr(exc, "body", None))
    text = said or _TAILS.sub("", _WRAPPERS.sub("", " ".join(str(exc).split())))
    if text.startswith("{"):
        text = _message_of(text) or text
    return " ".join(text.split())[:MAX_WORDS].rstrip() or type(exc).__name__


def is_auth(exc: BaseException) -> bool:
    """A key missing or refused: LiteLLM raises some missing keys as 500s or connection
    errors (OpenAI's client, Gemini), so the words count as much as the class."""
    import openai

    refused = (openai.AuthenticationError, openai.PermissionDeniedError)
    return isinstance(exc, refused) or bool(_NO_KEY.search(str(exc)))


def is_transient(exc: BaseException) -> bool:
    """Worth another try; never a key missing or refused, however it is wrapped."""
    import httpx
    import openai

    if is_auth(exc):
        return False
    transient: tuple[type[BaseException], ...] = (TimeoutError, EmptyReply)
    transient += (openai.RateLimitError, openai.APIConnectionError)
    transient += (httpx.TransportError,)  # a stream the SDK was reading, cut
    status = getattr(exc, "status_code", None)
    return isinstance(exc, transient) or (isinstance(status, int) and status >= 500)


def is_too_long(exc: BaseException) -> bool:
    """The provider refused the request as longer than the model's window."""
    return _TOO_LONG.search(str(exc)) is not None


def is_rejection(exc: BaseException) -> bool:
    """The provider refused the request itself (HTTP 400), not for its length."""
    import openai

    return isinstance(exc, openai.BadRequestError) and not is_too_long(exc)


def short(exc: BaseException) -> str:
    """The class and the first 300 characters of the words, on one line, for the log."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def failure_line(llm: LLMSettings, model: str, exc: BaseException) -> str:
    """One model's failure: what happened at which address, and the next step."""
    import openai

    words = provider_words(exc)
    url = _address(model, llm.api_base)
    status = getattr(exc, "status_code", None)
    if is_auth(exc):
        env = PROVIDER_KEYS.get(provider_of(model))
        key = SETTING if llm.api_key is not None or env is None else f"{env} (or {SETTING})"
        if isinstance(exc, openai.PermissionDeniedError):
            return (
                f"{model} at {url} refused access (HTTP 403: {words}); check that {key} may use it"
            )
        verb = "needs an API key" if _NO_KEY.search(str(exc)) else "refused the API key"
        return f"{model} at {url} {verb} ({words}); check {key}"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        first = llm.first_token_limit_s(model)
        limits = f"first token within {first:g} s, pauses of {llm.timeout_s:g} s"
        return (
            f"{model} at {url} did not answer in time ({limits}); a slow model may need a larger "
            "llm.first_token_timeout_s or llm.timeout_s"
        )
    if isinstance(exc, openai.APIConnectionError) or _UNREACHABLE.search(words):
        where = "its server runs and llm.api_base is right" if llm.api_base else "you are online"
        return f"{model} could not be reached at {url} ({words}); check that {where}"
    if isinstance(exc, openai.RateLimitError):
        return f"{model} at {url} is rate-limited (HTTP 429: {words}); wait a little and retry"
    if isinstance(exc, openai.NotFoundError):
        return f"{model} at {url} was not found ({words}); check llm.model"
    if isinstance(status, int) and status >= 500:
        return f"{model} at {url} failed (HTTP {status}: {words}); try again later"
    return f"{model} at {url}: {words}"


def _address(model: str, api_base: str) -> str:
    try:
        return route(model, api_base)[1]
    except Unroutable:
        return api_base or DEFAULT_BASES.get(provider_of(model), "its provider's default address")


def _message_of(text: str) -> str | None:
    """The `message` of a JSON error body ({"error": {"message": ...}} and the like)."""
    try:
        return _message_in(json.loads(text))
    except ValueError:
        return None


def _message_in(body: object) -> str | None:
    while isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body["message"])
        body = body.get("error")
    return None
