"""Calls beside the chat: speech to text for voice notes, text to speech for voice replies,
and embeddings for the memory store's search by meaning. All through LiteLLM, none retried
here (see each). LiteLLM is imported in a thread: the first call's import is seconds the
event loop, and every chat, would stand still."""

from __future__ import annotations

import asyncio
import os
from types import ModuleType
from typing import Any

from agent.model.profiles.litellm_import import load_litellm


async def _litellm() -> ModuleType:
    return await asyncio.to_thread(load_litellm)


async def transcribe(
    name: str, data: bytes, model: str, *, api_base: str = "", timeout_s: float
) -> str:
    """Speech to text through LiteLLM (e.g. model "openai/whisper-1"), from the bytes the
    channel fetched (the file saved in the workspace is not read again). `timeout_s` bounds
    the call, not LiteLLM's first import: a stuck provider (LiteLLM's own limit is minutes,
    retried) must not hold up the chat."""
    litellm = await _litellm()
    kwargs: dict[str, Any] = {"model": model, "file": (name, data)}
    if api_base:
        kwargs["api_base"] = api_base
    async with asyncio.timeout(timeout_s):
        response = await litellm.atranscription(**kwargs)
    return str(response.text).strip()


async def embed(
    texts: list[str],
    model: str,
    api_base: str = "",
    *,
    api_key: str | None = None,
    timeout_s: float = 30.0,
) -> list[list[float]]:
    """Embeddings of `texts` through LiteLLM (e.g. model "openai/text-embedding-3-small"),
    in the order of `texts`: what the memory store compares by meaning. No retries of our
    own (the provider's client may retry a 5xx twice): the store's timeout bounds the wait,
    it then searches by words and embeds what it missed on a later search."""
    litellm = await _litellm()
    kwargs: dict[str, Any] = {"model": model, "input": texts, "timeout": timeout_s}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key is not None:
        kwargs["api_key"] = api_key
    response = await litellm.aembedding(**kwargs)
    items = [item if isinstance(item, dict) else vars(item) for item in response.data]
    items.sort(key=lambda item: int(item.get("index", 0)))
    return [[float(x) for x in item["embedding"]] for item in items]


async def speak(
    text: str, model: str, voice: str, *, api_base: str = "", timeout_s: float
) -> bytes:
    """Text to speech through LiteLLM's speech API (e.g. model "openai/gpt-4o-mini-tts"; with
    `api_base`, an OpenAI-compatible speech server of one's own), as OGG/Opus: what a voice
    note is on Telegram and Discord. Not retried: a failure falls back to the text;
    `timeout_s` bounds the call itself."""
    litellm = await _litellm()
    kwargs: dict[str, Any] = {
        "model": model,
        "input": text,
        "voice": voice,
        "response_format": "opus",
        "timeout": timeout_s,
    }
    if api_base:
        kwargs["api_base"] = api_base
        if not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = "not-needed"  # a speech server of one's own takes any
    async with asyncio.timeout(timeout_s):
        response = await litellm.aspeech(**kwargs)
    audio = bytes(response.content)
    if not audio.startswith(b"OggS"):
        raise ValueError(f"the speech model sent {len(audio)} bytes that are not OGG/Opus")
    return audio
