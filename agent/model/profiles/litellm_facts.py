"""What LiteLLM knows of a model: its window, token counts, function calling, vision, price
and whether its prompt cache must be asked for — each answered by the model's road
(agent/model/profiles/routes.py):

- a model at a server of one's own is never asked about: its window is what its server
  gives (agent/model/server_probe.py asks), it is assumed to take tool calls and no images;
- a model at OpenAI is looked up in LiteLLM's table, read as data (litellm_map.py);
- every other model is asked of LiteLLM itself.

The two direct roads count tokens without LiteLLM (stand_in_tokenizer.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agent.config import LLMSettings
from agent.model.profiles.litellm_import import load_litellm
from agent.model.profiles.litellm_map import Listing, listing
from agent.model.profiles.routes import Road, road_of, wire_name

# Models LiteLLM has no price for: asked once per process (its cost map does not change).
_UNPRICED: set[str] = set()


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
    """`context_window` of `model` (the main one by default); None for a model at a server
    of one's own, whose window is what its server gives (agent/model/server_probe.py asks)."""
    model = model or llm.model
    road = road_of(llm, model)
    if road is Road.OPENAI:
        listed = _listed(model)
        return listed.window if listed is not None else None
    return None if road is Road.OWN_SERVER else context_window(model)


def _listed(model: str) -> Listing | None:
    return listing(wire_name(model))


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model` by LiteLLM's counter (a tiktoken fallback when unknown)."""
    litellm = load_litellm()
    return int(litellm.token_counter(model=model or "gpt-4o", text=text))


def token_counter(llm: LLMSettings, model: str | None = None) -> Callable[[str], int]:
    """How prompts for `model` are counted: by LiteLLM's counter, and for a model on a direct
    road by the tokenizer LiteLLM counts an `openai/` name with (cl100k_base), loaded
    without LiteLLM."""
    model = model or llm.model
    count = count_tokens if road_of(llm, model) is Road.LITELLM else _count_directly
    return functools.partial(count, model)


def _count_directly(model: str, text: str) -> int:
    from agent.model.stand_in_tokenizer import stand_in_counter

    counter = stand_in_counter()  # loaded on the first count, not before
    return counter(text) if counter is not None else count_tokens(model, text)


def supports_native_tools(llm: LLMSettings, model: str) -> bool:
    """False only when LiteLLM positively knows the model lacks function calling (an
    Ollama model that does not teaches it with a refusal: agent/durable/learned_model_facts.py)."""
    road = road_of(llm, model)
    if road is Road.OPENAI:
        listed = _listed(model)
        return listed is None or listed.function_calling
    return road is Road.OWN_SERVER or _native_tools(model)


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
    """True when LiteLLM knows the model takes images; unknown models, and those at a server
    of one's own, are assumed not to (llm.vision = "on" says otherwise)."""
    road = road_of(llm, model)
    if road is Road.OPENAI:
        listed = _listed(model)
        return listed is not None and listed.vision
    return road is Road.LITELLM and _vision(model)


@functools.cache
def _vision(model: str) -> bool:
    if _asks_ollama(model):
        return False  # llm.vision = "on" says otherwise
    litellm = load_litellm()
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:
        return False
