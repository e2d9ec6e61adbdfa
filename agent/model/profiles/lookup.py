"""The one lookup of what pinclaw knows of a model: the built-in entry for its family, where
it is served, and what was learned about it laid over them.

What was learned is kept in state.db by agent/durable/learned_model_facts.py, which reads it
and hands it in here as plain data (quirk name -> value, as stored): nothing here opens
state.db, so the lookup is the same for the daemon, a command and a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from agent.config import served_locally
from agent.model.profiles.builtin import ModelProfile, builtin_profile

# The facts learned about a model, as `quirk` names of provider_quirks rows.
FACT_WINDOW = "window"  # the context window its server was started with
FACT_FIRST_TOKEN = "first_token_s"  # seconds to the first token of the first request
FACT_SERVER = "server"  # "ollama", "llama-server", "lm-studio", "vllm"
FACT_TOOLS = "tools"  # "xml": it refused tools= (or its server said it has none)

NOTHING_LEARNED: Mapping[str, str] = MappingProxyType({})


def profile_for(
    model: str, api_base: str | None, learned: Mapping[str, str] = NOTHING_LEARNED
) -> ModelProfile:
    """The built-in entry for `model` served at `api_base`, with what was learned laid
    over it."""
    profile = builtin_profile(model)
    window = _number(learned.get(FACT_WINDOW))
    return replace(
        profile,
        native_tools=profile.native_tools and learned.get(FACT_TOOLS) != "xml",
        served_window=int(window) if window else None,
        first_token_s=_number(learned.get(FACT_FIRST_TOKEN)),
        server=learned.get(FACT_SERVER, ""),
        local=served_locally(model, api_base or ""),
    )


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
