"""Which way a model's calls go: straight to an OpenAI-protocol server of the owner's own
(the OpenAI SDK, agent/model/openai_sdk_call.py), else through LiteLLM to its provider; that
provider, the address it calls, the keys it needs, and what its first call imports.

LiteLLM knows nothing of a model served directly that its server does not say better, so
nothing here asks LiteLLM about one.
"""

from __future__ import annotations

from agent.config import LLMSettings, served_locally
from agent.model.profiles.litellm_import import load_litellm

# Providers whose requests are OpenAI's chat-completions protocol at llm.api_base: LiteLLM
# itself sends them through the OpenAI SDK.
OPENAI_PROTOCOL = ("openai", "hosted_vllm", "lm_studio")


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
