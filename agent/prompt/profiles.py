"""Model profiles: what pinclaw knows of a model — its context window, whether it takes
`tools=`, what works with it — and the prompt mode chosen from that.

Built-in entries cover the small open models people serve themselves. What a server said
about its model (`agent doctor --check-model`) and what a provider refused
(agent/durable/quirks.py) is learned into state.db's `provider_quirks` table, written by
agent/durable/quirks.py and read here, so the next start builds the prompt with it.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from agent.config import LLMSettings, Settings
from agent.prompt.context import PromptMode

LOCAL_WINDOW = 4_096  # what Ollama, llama-server and LM Studio serve unless told otherwise
SMALL_WINDOW = 8_192  # a window this small or smaller gets the compact prompt
# The facts learned about a model, as `quirk` names of provider_quirks rows.
FACT_WINDOW = "window"  # the context window its server was started with
FACT_FIRST_TOKEN = "first_token_s"  # seconds to the first token of the first request
FACT_SERVER = "server"  # "ollama", "llama-server", "lm-studio", "vllm"
FACT_TOOLS = "tools"  # "xml": it refused tools= (or its server said it has none)


@dataclass(frozen=True)
class ModelProfile:
    family: str = ""  # "": no built-in entry fits the model's name
    window: int | None = None  # tokens the model was trained for, None: unknown
    native_tools: bool = True  # takes tools= and answers with tool_calls
    works: str = ""  # what works with it, in a few words
    served_window: int | None = None  # learned: the window its server gives it
    first_token_s: float | None = None  # learned: time to the first token, measured
    server: str = ""  # learned: which server answers for it


_TEXT = "no tool template: the <tool_call> text protocol"


_Row = tuple[str, ModelProfile]


def _p(pattern: str, family: str, window: int, native: bool, works: str) -> _Row:
    return pattern, ModelProfile(family, window, native, works)


# Searched in order in the model's name (lower case, without LiteLLM's provider prefix):
# Ollama's tags ("qwen2.5:1.5b"), Hugging Face ids ("Qwen/Qwen2.5-1.5B-Instruct", as vLLM
# serves them) and LM Studio's ids ("qwen2.5-coder-1.5b-instruct") alike.
BUILTIN_PROFILES: tuple[_Row, ...] = (
    _p(r"deepseek-?r1", "DeepSeek-R1 and distills", 131_072, False, _TEXT + "; thinks first"),
    _p(r"qwen-?3(?![.\d])", "Qwen3", 32_768, True, "native calls; thinks first (/no_think)"),
    _p(r"qwen-?2\.5", "Qwen2.5", 32_768, True, "native calls; small ones write them as JSON text"),
    _p(r"llama-?3\.2", "Llama 3.2 1B/3B", 131_072, True, "native calls; 1B misses arguments"),
    _p(r"llama-?3\.[13]", "Llama 3.1/3.3", 131_072, True, "native; at times <|python_tag|> text"),
    _p(r"llama-?3(?![.\d])", "Llama 3 8B", 8_192, False, _TEXT),
    _p(r"mistral[-_:]?7b|^mistral(:latest)?$", "Mistral 7B", 32_768, True, "native from v0.3"),
    _p(r"gemma-?3[-_:]?1b", "Gemma 3 1B", 32_768, False, _TEXT),
    _p(r"gemma-?3", "Gemma 3", 131_072, False, _TEXT),
    _p(r"phi-?4-?mini", "Phi-4-mini", 131_072, True, "native calls; at times functools[…] text"),
)


def model_key(model: str) -> str:
    """The model's own name: lower case, LiteLLM's provider prefix dropped."""
    return model.split("/", 1)[1].lower() if "/" in model else model.lower()


def builtin_profile(model: str) -> ModelProfile:
    key = model_key(model)
    for pattern, profile in BUILTIN_PROFILES:
        if re.search(pattern, key):
            return profile
    return ModelProfile()


def learned_facts(state_db: Path, model: str) -> dict[str, str]:
    """What was learned about `model` (read-only; nothing when nothing was learned yet)."""
    if not state_db.exists():
        return {}
    try:
        uri = f"file:{state_db}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            rows = db.execute(
                "SELECT quirk, value FROM provider_quirks WHERE model = ?", (model,)
            ).fetchall()
    except sqlite3.Error:  # no such table yet, or a state.db being created
        return {}
    return {str(quirk): str(value) for quirk, value in rows}


def profile_for(model: str, learned: Mapping[str, str]) -> ModelProfile:
    """The built-in entry with what was learned laid over it."""
    profile = builtin_profile(model)
    window = _number(learned.get(FACT_WINDOW))
    first = _number(learned.get(FACT_FIRST_TOKEN))
    return replace(
        profile,
        native_tools=profile.native_tools and learned.get(FACT_TOOLS) != "xml",
        served_window=int(window) if window else None,
        first_token_s=first,
        server=learned.get(FACT_SERVER, ""),
    )


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def fitting_window(llm: LLMSettings, profile: ModelProfile) -> int | None:
    """The window the requests must fit: what the server said, else for a local model the
    4,096 tokens its server most likely gives, else the model's own (None: unknown)."""
    if profile.served_window:
        return profile.served_window
    if llm.local:
        return min(LOCAL_WINDOW, profile.window or LOCAL_WINDOW)
    return profile.window


@dataclass(frozen=True)
class ModeChoice:
    mode: PromptMode
    why: str
    window: int | None  # what the first request must fit, when known or assumed


def choose_mode(settings: Settings, profile: ModelProfile) -> ModeChoice:
    """The prompt mode: as the owner set it, else compact for a model served locally or a
    window of 8,192 tokens or less, else full."""
    agent, llm = settings.agent, settings.llm
    window = fitting_window(llm, profile)
    if agent.prompt_mode != "auto":
        return ModeChoice(agent.prompt_mode, f'agent.prompt_mode = "{agent.prompt_mode}"', window)
    if isinstance(agent.compact_context, bool):
        mode: PromptMode = "compact" if agent.compact_context else "full"
        return ModeChoice(mode, f"agent.compact_context = {str(mode == 'compact').lower()}", window)
    if llm.local:
        return ModeChoice("compact", f"served locally ({where_served(llm)})", window)
    if window is not None and window <= SMALL_WINDOW:
        return ModeChoice("compact", f"a context window of {window:,} tokens", window)
    return ModeChoice("full", "a hosted model, no small context window known", window)


def where_served(llm: LLMSettings) -> str:
    if llm.model.startswith(("ollama/", "ollama_chat/")):
        return "an Ollama model"
    return f"api_base on {urlsplit(llm.api_base).hostname}"
