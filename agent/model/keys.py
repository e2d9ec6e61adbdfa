"""Which key a model's provider needs, looked up where LiteLLM looks: checked before the first
call (agent/app.py's build_app) and by `agent doctor`, so a missing key is one line at once
rather than a call that cannot succeed, tried again with backoff.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.config import LLMSettings
from agent.model.profiles.routes import Road, Unroutable, road_of, route

# The environment variable LiteLLM reads for each provider prefix of a model name.
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY",
}
ALSO_READ = {"gemini": ("GOOGLE_API_KEY",)}  # a second name LiteLLM accepts
KEYLESS = ("ollama", "ollama_chat", "lm_studio", "hosted_vllm")
SETTING = "PINCLAW_LLM__API_KEY"


class ModelUnusable(Exception):
    """The model cannot be called as configured (no provider, no key): `str()` is the one
    line the person reads, and the command exits 2 before anything else starts."""


@dataclass(frozen=True)
class KeyCheck:
    """`problem`: what is missing and how to set it (None: nothing is); `detail`: doctor's
    line when all is well."""

    problem: str | None
    detail: str = ""


def check_key(llm: LLMSettings, provider: str) -> KeyCheck:
    """Whether `provider` gets the key it needs: from llm.api_key, else its variable (the
    environment holds agent.env's too: load_settings put them there)."""
    if provider in KEYLESS:
        return KeyCheck(None, f"no key needed ({provider})")
    if llm.api_key is not None:
        return KeyCheck(None, f"present ({SETTING})")
    known = PROVIDER_KEYS.get(provider)
    names = (known, *ALSO_READ.get(provider, ())) if known else ()
    found = next((name for name in names if os.environ.get(name)), None)
    if found is not None:
        return KeyCheck(None, f"present ({found})")
    if road_of(llm) is Road.OWN_SERVER:
        return KeyCheck(None, f"not needed (a server of your own; set {SETTING} if it checks one)")
    if provider == "openai" and llm.api_base and not _is_openai(llm.api_base):
        return KeyCheck(
            f"the OpenAI client sends a key even to {llm.api_base}: set {SETTING} to its key, "
            "or to any text (e.g. dummy) if that server checks none"
        )
    if not names:
        return KeyCheck(None, f"not checked (pinclaw does not know {provider!r}'s key)")
    return KeyCheck(f"no API key: set {names[0]} (or {SETTING})")


def check_model(llm: LLMSettings, env_file: str) -> None:
    """Before the first call: a model name LiteLLM cannot route, or a provider's key that is
    not set, raises ModelUnusable (`env_file`: where `agent init` keeps keys)."""
    try:
        provider, _ = route(llm.model, llm.api_base)
    except Unroutable:
        raise ModelUnusable(unroutable_line(llm.model)) from None
    problem = check_key(llm, provider).problem
    if problem is not None:
        raise ModelUnusable(f"{llm.model}: {placed(problem, env_file)}")


def placed(problem: str, env_file: str) -> str:
    """A missing key's line, with where a key may be put."""
    return (
        f"{problem} in your shell or in {env_file}" if problem.startswith("no API key") else problem
    )


def unroutable_line(model: str) -> str:
    return (
        f"llm.model {model!r} names no provider LiteLLM knows: write it as provider/model, "
        "e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 or ollama_chat/llama3.1"
    )


def _is_openai(api_base: str) -> bool:
    return (urlsplit(api_base).hostname or "").endswith("openai.com")
