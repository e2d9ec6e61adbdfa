"""Which way a model's calls go — the one decision, `road_of` — and, for each way, the
provider, the address it calls, the keys it needs and what its first call imports:

- an OpenAI-protocol model at a server of the owner's own goes straight to it in OpenAI's
  protocol over httpx (agent/model/openai_wire_call.py); LiteLLM knows nothing of it that its server
  does not say better, so nothing asks LiteLLM about one (its window is its server's, it
  has no price);
- an OpenAI model at OpenAI itself, whose request LiteLLM would send unchanged through the
  OpenAI SDK, goes straight there too; what LiteLLM knows of it (window, price, tools,
  vision) is read from LiteLLM's table as data (litellm_map.py), not from LiteLLM;
- every other model (Anthropic, Gemini, OpenRouter, Bedrock, Ollama, OpenAI's reasoning
  models...) goes through LiteLLM to its provider, and so does every model when
  llm.client says "litellm".
"""

from __future__ import annotations

import enum
import os

from agent.config import LLMSettings, served_locally
from agent.model.profiles.litellm_import import load_litellm
from agent.model.profiles.litellm_map import listing, sends_unchanged

# Providers whose requests are OpenAI's chat-completions protocol at llm.api_base: LiteLLM
# itself sends them through the OpenAI SDK.
OPENAI_PROTOCOL = ("openai", "hosted_vllm", "lm_studio")
OPENAI_BASE = "https://api.openai.com/v1"


class Road(enum.Enum):
    """Which way a model's calls go."""

    OWN_SERVER = "an OpenAI-protocol server of one's own, in OpenAI's protocol over httpx"
    OPENAI = "OpenAI itself, in its protocol over httpx"
    LITELLM = "its provider, through LiteLLM"


def provider_of(model: str) -> str:
    """The provider prefix of a model name; a bare name (gpt-4o-mini) counts as OpenAI's."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def wire_name(model: str) -> str:
    """The name the server knows: LiteLLM's name without its provider prefix."""
    return model.split("/", 1)[1] if "/" in model else model


def road_of(llm: LLMSettings, model: str | None = None) -> Road:
    """The way `model` (the main one by default) goes; LiteLLM for every model when
    llm.client says "litellm". Importing LiteLLM is most of a cold start (1.7 s) and about
    100 MiB of a daemon: the two other roads never import it."""
    model = model or llm.model
    return _road(model, llm.api_base) if llm.client == "auto" else Road.LITELLM


def _road(model: str, api_base: str) -> Road:
    if _at_own_server(model, api_base):
        return Road.OWN_SERVER
    if _at_openai(model, api_base):
        return Road.OPENAI
    return Road.LITELLM


def _at_own_server(model: str, api_base: str) -> bool:
    """An OpenAI-protocol model at an api_base on this machine or the local network."""
    return (
        provider_of(model) in OPENAI_PROTOCOL and bool(api_base) and served_locally(model, api_base)
    )


def _at_openai(model: str, api_base: str) -> bool:
    """An OpenAI model (openai/NAME, or a bare name LiteLLM's table lists as OpenAI's) at
    OpenAI's own address (no api_base, or OPENAI_BASE), whose request LiteLLM would send
    unchanged."""
    if provider_of(model) != "openai" or api_base.rstrip("/") not in ("", OPENAI_BASE):
        return False
    name = wire_name(model)
    return sends_unchanged(name) and ("/" in model or listing(name) is not None)


def openai_base(api_base: str) -> str:
    """Where a model at OpenAI is called: llm.api_base, else OPENAI_BASE_URL or
    OPENAI_API_BASE (which the SDK and LiteLLM read as well), else OpenAI's own."""
    env = os.environ
    return api_base or env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_BASE") or OPENAI_BASE


# Providers LiteLLM sends through the OpenAI SDK's client, whose resource modules (a quarter
# to half a second of imports) load on the first real request, past what `import litellm`
# and a dry run load.
_OPENAI_SDK_PROVIDERS = ("openai", "azure")


def load_first_call_modules(llm: LLMSettings) -> None:
    """Import now what the first request to the main model would import on its way out:
    httpx on a direct road; the OpenAI SDK's resources for the models LiteLLM sends through
    that SDK."""
    if road_of(llm) is not Road.LITELLM:
        import httpx  # noqa: F401

        return
    try:
        _, provider, _, _ = load_litellm().get_llm_provider(llm.model)
    except Exception:  # a name LiteLLM cannot route: the call itself will say so
        return
    if provider in _OPENAI_SDK_PROVIDERS:
        import openai.resources.chat  # noqa: F401


# Where a provider's models answer when llm.api_base is not set and LiteLLM does not say.
DEFAULT_BASES = {
    "openai": OPENAI_BASE,
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
    provider's own); Unroutable when the name names no provider LiteLLM knows. LiteLLM is
    not asked about a model on one of the two direct roads (whatever llm.client says)."""
    road = _road(model, api_base)
    if road is Road.OWN_SERVER:
        return provider_of(model), api_base
    if road is Road.OPENAI:
        return "openai", openai_base(api_base)
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
