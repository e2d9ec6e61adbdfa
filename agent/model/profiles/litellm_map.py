"""LiteLLM's table of models read as data: the JSON file of windows, prices and capabilities
its package ships (and pinclaw has LiteLLM use offline, litellm_import.py), for the models
called straight at OpenAI (routes.py's Road.OPENAI), so that calling one never imports
LiteLLM (1.7 s of a cold start) yet knows what LiteLLM would: its window, its price, its
function calling and vision.

The file is found with `importlib.util.find_spec`, which runs nothing of the package. Only
one model's entry is cut out of the 3 MB file (parsing it whole takes 50 ms) and kept.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAP_FILE = "model_prices_and_context_window_backup.json"
# Names LiteLLM sends through its GPT-5 rules whatever its table says (temperature and
# max_tokens rewritten, some requests bridged to the Responses API): never plain chat.
REASONING_SERIES = ("gpt-5", "gpt-6")


@dataclass(frozen=True)
class Listing:
    """One OpenAI model's entry in LiteLLM's table."""

    window: int | None  # max_input_tokens (else max_tokens)
    input_cost: float  # US dollars per prompt token
    cache_read_cost: float  # per prompt token read from OpenAI's cache (the input price if none)
    output_cost: float  # per completion token
    function_calling: bool
    vision: bool
    plain_chat: bool  # a chat model without reasoning: LiteLLM sends its request unchanged

    def cost(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> float:
        """A plain chat completion's price, as LiteLLM computes it: the prompt's uncached
        tokens at the input price, its cached ones at the cache-read price, the completion
        at the output price."""
        cached = min(cached_tokens, prompt_tokens)
        return (
            (prompt_tokens - cached) * self.input_cost
            + cached * self.cache_read_cost
            + completion_tokens * self.output_cost
        )


@functools.cache
def map_file() -> Path | None:
    """Where LiteLLM keeps its table, or None when it is not installed or keeps none there
    (then every OpenAI model goes through LiteLLM, as before)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(spec.submodule_search_locations[0]) / MAP_FILE
    return found if found.is_file() else None


def sends_unchanged(name: str) -> bool:
    """Whether LiteLLM would send OpenAI's model `name` (no provider prefix) as the plain
    chat request pinclaw makes: a chat model without reasoning (LiteLLM rewrites an o-series
    or GPT-5 request, and sends some to the Responses API), or a model its table does not
    know by a name outside the GPT-5 series. False when the table is not found."""
    if map_file() is None:
        return False
    if any(mark in name for mark in REASONING_SERIES) and "gpt-5-chat" not in name:
        return False
    found = listing(name)
    return found is None or found.plain_chat


@functools.cache
def listing(name: str) -> Listing | None:
    """OpenAI's model `name` (no provider prefix) as LiteLLM's table lists it, under its
    name or "openai/" and its name; None when the table lists no OpenAI model by it."""
    found = map_file()
    if found is None:
        return None
    text = found.read_text(encoding="utf-8")
    for key in (name, f"openai/{name}"):
        entry = _entry(text, key)
        if entry is not None and entry.get("litellm_provider") == "openai":
            return _listing_of(entry)
    return None


def _entry(text: str, key: str) -> dict[str, Any] | None:
    """The table's entry under `key`: cut out of the text at the key, where the file lists
    its models as keys indented four spaces (the whole file is parsed only if it does not)."""
    if not text.startswith('{\n    "'):
        entry = json.loads(text).get(key)
        return entry if isinstance(entry, dict) else None
    at = text.find(f"\n    {json.dumps(key)}: {{")
    if at < 0:
        return None
    entry, _ = json.JSONDecoder().raw_decode(text, text.index("{", at))
    return entry if isinstance(entry, dict) else None


def _listing_of(entry: dict[str, Any]) -> Listing:
    window = entry.get("max_input_tokens") or entry.get("max_tokens")
    input_cost = float(entry.get("input_cost_per_token") or 0.0)
    cache_read = entry.get("cache_read_input_token_cost")
    return Listing(
        window=int(window) if isinstance(window, int | float) and window else None,
        input_cost=input_cost,
        cache_read_cost=input_cost if cache_read is None else float(cache_read),
        output_cost=float(entry.get("output_cost_per_token") or 0.0),
        function_calling=entry.get("supports_function_calling") is True,
        vision=entry.get("supports_vision") is True,
        plain_chat=entry.get("mode") == "chat" and entry.get("supports_reasoning") is not True,
    )
