"""The usage block the fake LLM server (llm_server.py) answers with: a token per four
characters of what was sent and written, as before, and — when a test sets
`FakeLLM.cached_tokens` — that many of the prompt's tokens read from the provider's prompt
cache, in OpenAI's `prompt_tokens_details.cached_tokens` (LiteLLM reads it from there)."""

from __future__ import annotations

import json
from typing import Any


def usage_block(body: dict[str, Any], completion_chars: int, cached_tokens: int) -> dict[str, Any]:
    prompt = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))
    prompt_tokens = max(1, len(prompt) // 4)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": max(1, completion_chars // 4),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": min(cached_tokens, prompt_tokens)}
    return usage
