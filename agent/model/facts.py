"""LiteLLM, imported once and lazily, and what it knows of a model: its window, token counts,
function calling, vision, price and whether its prompt cache must be asked for.

LiteLLM takes seconds to import, so it is imported on the first call, never at module
import: `agent --help`, `agent init` and config errors stay fast. A model on an
OpenAI-compatible server of the owner's own is called without it (`served_directly`,
agent/model/openai_sdk_call.py): LiteLLM knows nothing of such a model that the server does
not say better, so nothing here asks LiteLLM about one.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agent.config import LLMSettings, served_locally

# Providers whose requests are OpenAI's chat-completions protocol at llm.api_base: LiteLLM
# itself sends them through the OpenAI SDK.
OPENAI_PROTOCOL = ("openai", "hosted_vllm", "lm_studio")

# Models LiteLLM has no price for: asked once per process (its cost map does not change).
_UNPRICED: set[str] = set()


def load_litellm() -> ModuleType:
    """Import LiteLLM with its bundled price map, so the import never reaches the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def provider_of(model: str) -> str:
    """The provider prefix of a model name; a bare name (gpt-4o-mini) counts as OpenAI's."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def served_directly(llm: LLMSettings, model: str | None = None) -> bool:
    """Whether `model` (the main one by default) is called with the OpenAI SDK itself: an
    OpenAI-protocol model at an llm.api_base on this machine or the local network, unless
    llm.client says "litellm". LiteLLM would send it through the same SDK, knows no price
    for it, and costs 0.8 s of import and about 100 MiB before the first request."""
    model = model or llm.model
    return llm.client == "auto" and _at_own_server(model, llm.api_base)


def _at_own_server(model: str, api_base: str) -> bool:
    """An OpenAI-protocol model at an api_base on this machine or the local network."""
    return (
        provider_of(model) in OPENAI_PROTOCOL and bool(api_base) and served_locally(model, api_base)
    )


# Providers LiteLLM sends through the OpenAI SDK's client, whose resource modules (a quarter
# to half a second of imports) load on the first real request, past what `import litellm`
# and a dry run load.
_OPENAI_SDK_PROVIDERS = ("openai", "azure")


def load_first_call_modules(llm: LLMSettings) -> None:
    """Import now what the first request to the main model would import on its way out: the
    OpenAI SDK's resources, for the models called through that SDK (directly or by LiteLLM)."""
    if not served_directly(llm):
        try:
            _, provider, _, _ = load_litellm().get_llm_provider(llm.model)
        except Exception:  # a name LiteLLM cannot route: the call itself will say so
            return
        if provider not in _OPENAI_SDK_PROVIDERS:
            return
    import openai.resources.chat  # noqa: F401


def price_of(litellm: ModuleType, response: Any, model: str) -> float | None:
    """What the call cost in US dollars, None when LiteLLM has no price for the model (a
    local one). LiteLLM prices every response as it logs it and keeps the figure in
    `_hidden_params["response_cost"]` (None when it has no price): read it rather than
    pricing the response a second time. Only when it is missing is the price looked up
    here, and a model LiteLLM cannot price is looked up once, not per call."""
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        cost = hidden["response_cost"]
        return None if cost is None else float(cost)
    if model in _UNPRICED:
        return None
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown price: LiteLLM raises (and builds a traceback) every time
        _UNPRICED.add(model)
        return None


def explicit_cache_control(litellm: ModuleType, model: str) -> bool:
    """Providers that cache a prompt only where the request marks it (Anthropic's models,
    also through Bedrock and Vertex); the others cache by themselves or not at all."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:
        return False
    return provider == "anthropic" or (
        provider in ("bedrock", "vertex_ai") and "claude" in model.lower()
    )


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


def window_of(llm: LLMSettings, model: str | None = None) -> int | None:
    """`context_window` of `model` (the main one by default); None for a model served
    directly, whose window is what its server gives (agent/model/server_probe.py asks)."""
    model = model or llm.model
    return None if served_directly(llm, model) else context_window(model)


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model` by LiteLLM's counter (a tiktoken fallback when unknown)."""
    litellm = load_litellm()
    return int(litellm.token_counter(model=model or "gpt-4o", text=text))


def token_counter(llm: LLMSettings, model: str | None = None) -> Callable[[str], int]:
    """How prompts for `model` are counted: by LiteLLM's counter, and for a model served
    directly by the tokenizer LiteLLM would count it with, loaded without LiteLLM."""
    model = model or llm.model
    count = _count_directly if served_directly(llm, model) else count_tokens
    return functools.partial(count, model)


def _count_directly(model: str, text: str) -> int:
    from agent.model.stand_in_tokenizer import stand_in_counter

    counter = stand_in_counter()  # loaded on the first count, not before
    return counter(text) if counter is not None else count_tokens(model, text)


def supports_native_tools(llm: LLMSettings, model: str) -> bool:
    """False only when LiteLLM positively knows the model lacks function calling (an
    Ollama model that does not teaches it with a refusal: agent/durable/quirks.py)."""
    return served_directly(llm, model) or _native_tools(model)


@functools.cache
def _native_tools(model: str) -> bool:
    if _asks_ollama(model):
        return True
    litellm = load_litellm()
    try:
        litellm.get_model_info(model)  # raises for an unknown model: assume native
        return bool(litellm.supports_function_calling(model=model))
    except Exception:
        return True


def supports_vision(llm: LLMSettings, model: str) -> bool:
    """True when LiteLLM knows the model takes images; unknown models, and those served
    directly, are assumed not to (llm.vision = "on" says otherwise)."""
    return not served_directly(llm, model) and _vision(model)


@functools.cache
def _vision(model: str) -> bool:
    if _asks_ollama(model):
        return False  # llm.vision = "on" says otherwise
    litellm = load_litellm()
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:
        return False


# Where a provider's models answer when llm.api_base is not set and LiteLLM does not say.
DEFAULT_BASES = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama_chat": "http://localhost:11434",
    "openrouter": "https://openrouter.ai/api/v1",
    "cohere": "https://api.cohere.ai",
}


class Unroutable(ValueError):
    """LiteLLM cannot tell which provider serves a model name: every call would fail."""


def route(model: str, api_base: str = "") -> tuple[str, str]:
    """The provider LiteLLM sends `model` to and the address it calls (`api_base`, else the
    provider's own); Unroutable when the name names no provider LiteLLM knows. An
    OpenAI-protocol model at a server of one's own goes to `api_base`: LiteLLM is not asked."""
    if _at_own_server(model, api_base):
        return provider_of(model), api_base
    litellm = load_litellm()
    try:
        _, provider, _, found = litellm.get_llm_provider(model, api_base=api_base or None)
    except Exception as exc:
        raise Unroutable(" ".join(str(exc).split())[:200]) from None
    address = api_base or found or DEFAULT_BASES.get(provider, "its provider's default address")
    return str(provider), str(address)


def missing_keys(model: str) -> list[str]:
    """The variables LiteLLM expects for `model`'s provider and does not find set (for the
    providers pinclaw keeps no table of: Bedrock, Azure, Vertex...)."""
    try:
        found = load_litellm().validate_environment(model=model)
    except Exception:
        return []
    return [str(name) for name in found.get("missing_keys", [])]
