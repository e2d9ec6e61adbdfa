"""What pinclaw knows of a model family before anything was learned: one table, one entry
per family, found by the model's name.

A new quirk of a family is one entry in `BUILTIN_PROFILES` (a pattern, then the family's
ModelProfile); nothing else changes. What a server said or a provider refused is laid over
the entry by the lookup (agent/model/profiles/lookup.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOCAL_WINDOW = 4_096  # what Ollama, llama-server and LM Studio serve unless told otherwise


@dataclass(frozen=True)
class ModelProfile:
    family: str = ""  # "": no built-in entry fits the model's name
    window: int | None = None  # tokens the model was trained for, None: unknown
    native_tools: bool = True  # takes tools= and answers with tool_calls
    works: str = ""  # what works with it, in a few words
    served_window: int | None = None  # learned: the window its server gives it
    first_token_s: float | None = None  # learned: time to the first token, measured
    server: str = ""  # learned: which server answers for it
    local: bool = False  # served on this machine or the local network (its api_base)

    @property
    def fitting_window(self) -> int | None:
        """The window the requests must fit: what the server said, else for a local model the
        4,096 tokens its server most likely gives, else the model's own (None: unknown)."""
        if self.served_window:
            return self.served_window
        if self.local:
            return min(LOCAL_WINDOW, self.window or LOCAL_WINDOW)
        return self.window


_TEXT = "no tool template: the <tool_call> text protocol"


_Entry = tuple[str, ModelProfile]  # a pattern searched in the model's name, its profile


def _family(pattern: str, family: str, window: int, native: bool, works: str) -> _Entry:
    return pattern, ModelProfile(family, window, native, works)


# Searched in order in the model's name (lower case, without LiteLLM's provider prefix):
# Ollama's tags ("qwen2.5:1.5b"), Hugging Face ids ("Qwen/Qwen2.5-1.5B-Instruct", as vLLM
# serves them) and LM Studio's ids ("qwen2.5-coder-1.5b-instruct") alike. The first match
# wins, so a narrower pattern goes before a wider one ("gemma-3-1b" before "gemma-3").
BUILTIN_PROFILES: tuple[_Entry, ...] = (
    _family(r"deepseek-?r1", "DeepSeek-R1 and distills", 131_072, False, _TEXT + "; thinks first"),
    _family(r"qwen-?3(?![.\d])", "Qwen3", 32_768, True, "native calls; thinks first (/no_think)"),
    _family(
        r"qwen-?2\.5", "Qwen2.5", 32_768, True, "native calls; small ones write them as JSON text"
    ),
    _family(r"llama-?3\.2", "Llama 3.2 1B/3B", 131_072, True, "native calls; 1B misses arguments"),
    _family(
        r"llama-?3\.[13]", "Llama 3.1/3.3", 131_072, True, "native; at times <|python_tag|> text"
    ),
    _family(r"llama-?3(?![.\d])", "Llama 3 8B", 8_192, False, _TEXT),
    _family(r"mistral[-_:]?7b|^mistral(:latest)?$", "Mistral 7B", 32_768, True, "native from v0.3"),
    _family(r"gemma-?3[-_:]?1b", "Gemma 3 1B", 32_768, False, _TEXT),
    _family(r"gemma-?3", "Gemma 3", 131_072, False, _TEXT),
    _family(
        r"phi-?4-?mini", "Phi-4-mini", 131_072, True, "native calls; at times functools[…] text"
    ),
)


def model_key(model: str) -> str:
    """The model's own name: lower case, LiteLLM's provider prefix dropped."""
    return model.split("/", 1)[1].lower() if "/" in model else model.lower()


def builtin_profile(model: str) -> ModelProfile:
    """The first entry whose pattern is in the model's name, else an empty profile."""
    key = model_key(model)
    for pattern, profile in BUILTIN_PROFILES:
        if re.search(pattern, key):
            return profile
    return ModelProfile()
