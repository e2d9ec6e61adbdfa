"""The tokenizer LiteLLM counts a model it does not know with (OpenAI's cl100k_base), loaded
without importing LiteLLM, for the models pinclaw calls directly (the two direct roads of
agent/model/profiles/routes.py): their prompts are counted as LiteLLM counts an `openai/`
name, for a tenth of a second instead of LiteLLM's import.

tiktoken would download cl100k_base. LiteLLM ships a copy in a tiktoken cache folder of its
own (and points tiktoken at it when imported); this reads the same copy, found without
importing LiteLLM. Should a LiteLLM release move it, `stand_in_counter` says None and the
count is LiteLLM's own (tests/test_llm_cold_path.py fails loudly then).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# tiktoken's name for its cached download of cl100k_base (the SHA-1 of the download's URL).
CL100K_CACHED = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


@functools.cache
def _cl100k() -> Any | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
    if not (folder / CL100K_CACHED).is_file():
        return None
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)  # what importing LiteLLM sets as well
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def stand_in_counter() -> Callable[[str], int] | None:
    """Counts tokens with cl100k_base (loaded once), or None when LiteLLM's copy of it is not
    found."""
    encoding = _cl100k()
    if encoding is None:
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))
