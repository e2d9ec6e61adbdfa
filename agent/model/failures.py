"""A failed model call as the person reads it: the model, the address it tried, the provider's
own words once and what to do — not LiteLLM's class names repeated for every attempt.
Which failures are authentication (never retried: a key does not mend itself) is said here too.
"""

from __future__ import annotations

import json
import re
from types import ModuleType

from agent.config import LLMSettings
from agent.model.facts import DEFAULT_BASES, Unroutable, route
from agent.model.keys import PROVIDER_KEYS, SETTING, provider_of

MAX_WORDS = 200
# LiteLLM's wrapping of the provider's text: "litellm.AuthenticationError: ", "OpenAIException - "
_WRAPPERS = re.compile(r"^(?:litellm\.\w+: |\w+Error: |\w+Exception - )+")
_TAILS = re.compile(r"\s*(?:Received Model Group|LiteLLM Retried|model_group=).*$", re.S)
_NO_KEY = re.compile(
    r"missing (?:credentials|[\w ]{0,20}api key)|api_key client option must be set", re.I
)
_UNREACHABLE = re.compile(
    r"connection error|cannot connect|connection refused|name or service not known|"
    r"nodename nor servname|network is unreachable|all connection attempts failed",
    re.I,
)


def provider_words(exc: BaseException) -> str:
    """What the provider (or the HTTP client) said, without LiteLLM's wrapping."""
    text = _TAILS.sub("", _WRAPPERS.sub("", " ".join(str(exc).split())))
    if text.startswith("{"):
        text = _message_of(text) or text
    return text[:MAX_WORDS].rstrip() or type(exc).__name__


def is_auth(litellm: ModuleType, exc: BaseException) -> bool:
    """A key missing or refused: LiteLLM raises some missing keys as 500s or connection
    errors (OpenAI's client, Gemini), so the words count as much as the class."""
    refused = (litellm.AuthenticationError, litellm.PermissionDeniedError)
    return isinstance(exc, refused) or bool(_NO_KEY.search(str(exc)))


def failure_line(litellm: ModuleType, llm: LLMSettings, model: str, exc: BaseException) -> str:
    """One model's failure: what happened at which address, and the next step."""
    words = provider_words(exc)
    url = _address(model, llm.api_base)
    status = getattr(exc, "status_code", None)
    if is_auth(litellm, exc):
        env = PROVIDER_KEYS.get(provider_of(model))
        key = SETTING if llm.api_key is not None or env is None else f"{env} (or {SETTING})"
        if isinstance(exc, litellm.PermissionDeniedError):
            return (
                f"{model} at {url} refused access (HTTP 403: {words}); check that {key} may use it"
            )
        verb = "needs an API key" if _NO_KEY.search(str(exc)) else "refused the API key"
        return f"{model} at {url} {verb} ({words}); check {key}"
    if isinstance(exc, TimeoutError | litellm.Timeout):
        first = llm.first_token_limit_s(model)
        limits = f"first token within {first:g} s, pauses of {llm.timeout_s:g} s"
        return (
            f"{model} at {url} did not answer in time ({limits}); a slow model may need a larger "
            "llm.first_token_timeout_s or llm.timeout_s"
        )
    if isinstance(exc, litellm.APIConnectionError) or _UNREACHABLE.search(words):
        where = "its server runs and llm.api_base is right" if llm.api_base else "you are online"
        return f"{model} could not be reached at {url} ({words}); check that {where}"
    if isinstance(exc, litellm.RateLimitError):
        return f"{model} at {url} is rate-limited (HTTP 429: {words}); wait a little and retry"
    if isinstance(exc, litellm.NotFoundError):
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
        body = json.loads(text)
    except ValueError:
        return None
    while isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body["message"])
        body = body.get("error")
    return None
