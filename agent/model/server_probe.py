"""What a model's server says about it, asked over the server's own API: which server it
is, the context window it gives the model, and whether the model's template takes tools.

Ollama (`/api/show`, `/api/ps`), llama.cpp's llama-server (`/props`), LM Studio
(`/api/v0/models/ID`) and vLLM (`/v1/models`, `max_model_len`) each say it differently;
a hosted provider says nothing and gets nothing asked beyond one request. `agent doctor
--check-model` asks and keeps the answers (LearnedModelFacts.learn_fact), so the next start
builds the prompt for the window the server really gives (agent/model/profiles/lookup.py).
Blocking stdlib HTTP with a short timeout: call it in a thread.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from agent.model.profiles.builtin import LOCAL_WINDOW

OLLAMA_BASE = "http://127.0.0.1:11434"


@dataclass(frozen=True)
class ServerFacts:
    server: str = ""  # "": nobody answered in a shape we know
    window: int | None = None  # the context window the model is served with
    native_tools: bool | None = None  # None: the server did not say


def probe_server(model: str, api_base: str, timeout_s: float = 3.0) -> ServerFacts:
    """Ask the server behind `api_base` about `model` (LiteLLM's name for it)."""
    name = model.split("/", 1)[1] if "/" in model else model
    if model.startswith(("ollama/", "ollama_chat/")):
        return _ollama((api_base or OLLAMA_BASE).rstrip("/"), name, timeout_s)
    if not api_base:
        return ServerFacts()
    base = api_base.rstrip("/")
    root = base.removesuffix("/v1")
    for probe in (_llama_server, _lm_studio, _vllm):
        facts = probe(base, root, name, timeout_s)
        if facts.server:
            return facts
    return ServerFacts()


def _get(url: str, timeout_s: float, body: dict[str, Any] | None = None) -> Any:
    """The JSON at `url` (POSTed `body` when given), or None for any failure."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        request = urllib.request.Request(url, data=data, headers=headers)  # the owner's api_base
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read(4 * 1024 * 1024) or b"null")
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _ollama(root: str, name: str, timeout_s: float) -> ServerFacts:
    """The window of a loaded model (`/api/ps`), else its `num_ctx` parameter, else
    Ollama's default (4,096) within what the model was trained for; tools by its
    capabilities (newer Ollama) or its template."""
    shown = _get(f"{root}/api/show", timeout_s, {"model": name})
    if not isinstance(shown, dict):
        return ServerFacts()
    trained = next(
        (
            int(v)
            for k, v in (shown.get("model_info") or {}).items()
            if k.endswith("context_length")
        ),
        None,
    )
    window = _loaded_window(root, name, timeout_s)
    if window is None:
        found = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.M)
        window = int(found.group(1)) if found else min(LOCAL_WINDOW, trained or LOCAL_WINDOW)
    capabilities = shown.get("capabilities")
    if isinstance(capabilities, list):
        tools: bool | None = "tools" in capabilities
    else:
        tools = "tools" in str(shown.get("template") or "").lower() or None
    return ServerFacts("ollama", window, tools)


def _loaded_window(root: str, name: str, timeout_s: float) -> int | None:
    running = _get(f"{root}/api/ps", timeout_s)
    models = running.get("models") if isinstance(running, dict) else None
    for entry in models if isinstance(models, list) else []:
        if name in (entry.get("name"), entry.get("model")) and entry.get("context_length"):
            return int(entry["context_length"])
    return None


def _llama_server(base: str, root: str, name: str, timeout_s: float) -> ServerFacts:
    props = _get(f"{root}/props", timeout_s)
    if not isinstance(props, dict) or "default_generation_settings" not in props:
        return ServerFacts()
    settings = props.get("default_generation_settings") or {}
    window = settings.get("n_ctx") or props.get("n_ctx")
    caps = props.get("chat_template_caps")
    tools = caps.get("supports_tools") if isinstance(caps, dict) else None
    return ServerFacts("llama-server", int(window) if window else None, tools)


def _lm_studio(base: str, root: str, name: str, timeout_s: float) -> ServerFacts:
    info = _get(f"{root}/api/v0/models/{quote(name, safe='')}", timeout_s)
    if not isinstance(info, dict) or "max_context_length" not in info:
        return ServerFacts()
    window = info.get("loaded_context_length") or min(LOCAL_WINDOW, int(info["max_context_length"]))
    capabilities = info.get("capabilities")
    tools = "tool_use" in capabilities if isinstance(capabilities, list) else None
    return ServerFacts("lm-studio", int(window), tools)


def _vllm(base: str, root: str, name: str, timeout_s: float) -> ServerFacts:
    listed = _get(f"{base}/models", timeout_s)
    entries = listed.get("data") if isinstance(listed, dict) else None
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("id") == name and entry.get("max_model_len"):
            return ServerFacts("vllm", int(entry["max_model_len"]))
    return ServerFacts()
