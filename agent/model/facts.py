"""LiteLLM, imported once and lazily, and what it knows of a model: its window, token counts,
function calling, vision, price and whether its prompt cache must be asked for.

LiteLLM takes seconds to import, so it is imported on the first call, never at module
import: `agent --help`, `agent init` and config errors stay fast.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

# Models LiteLLM has no price for: asked once per process (its cost map does not change).
_UNPRICED: set[str] = set()


def load_litellm() -> ModuleType:
    """Import LiteLLM with its bundled price map, so the import never reaches the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


# Providers LiteLLM sends through the OpenAI SDK's client, whose resource modules (a quarter
# to half a second of imports) load on the first real request, past what `import litellm`
# and a dry run load.
_OPENAI_SDK_PROVIDERS = ("openai", "azure")


def load_first_call_modules(litellm: ModuleType, model: str) -> None:
    """Import now what the first request to `model` would import on its way out: the OpenAI
    SDK's resources, for the providers LiteLLM sends through that SDK."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:  # a name LiteLLM cannot route: the call itself will say so
        return
    if provider in _OPENAI_SDK_PROVIDERS:
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


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model` by LiteLLM's counter (a tiktoken fallback when unknown)."""
    litellm = load_litellm()
    return int(litellm.token_counter(model=model or "gpt-4o", text=text))


@functools.cache
def supports_native_tools(model: str) -> bool:
    """False only when LiteLLM positively knows the model lacks function calling (an
    Ollama model that does not teaches it with a refusal: agent/durable/quirks.py)."""
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
    provider's own); Unroutable when the name names no provider LiteLLM knows."""
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
