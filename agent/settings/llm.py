"""[llm]: which model answers, where it is served, and how long it may take."""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


DEFAULT_TIMEOUT_S = 120.0
# The first token's limit when llm.first_token_timeout_s is 0 (a CPU reads for minutes)
LOCAL_FIRST_TOKEN_S = 600.0
HOSTED_FIRST_TOKEN_S = 60.0
# A local model's reply cap when llm.max_tokens is 0: a small one stuck on a phrase would
# otherwise write until its context is full, minutes on a CPU, the chat waiting meanwhile.
# Room for a reasoning model's thinking and its answer (nanobot and OpenClaw default to it).
LOCAL_REPLY_TOKENS = 8192
_LOCAL_SUFFIXES = (".localhost", ".local", ".lan", ".internal", ".home.arpa")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")  # Tailscale and other overlay networks


def served_locally(model: str, api_base: str = "") -> bool:
    """Ollama's models, and any at an api_base on this machine or the local network."""
    if model.startswith(("ollama/", "ollama_chat/")):
        return True
    host = (urlsplit(api_base).hostname or "") if api_base else ""
    if not host:
        return False
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host  # a single label: a container's or the LAN's name for it
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip in _CGNAT


class LLMSettings(_Section):
    """The model that answers: its LiteLLM name, where it is served, and how long it may take."""

    model: str = ""
    """LiteLLM model name, e.g. "openai/gpt-4o-mini" or "anthropic/claude-sonnet-4-5\""""
    vision: Literal["auto", "on", "off"] = "auto"
    """photos to the model as images: "auto" (if LiteLLM says it sees), "on", "off\""""
    vision_max_px: int = Field(default=1568, ge=64)
    """photos are downsized to at most this many pixels on the long side"""
    api_base: str = ""
    """custom endpoint (an OpenAI-compatible server); empty: the provider's own"""
    api_key: SecretStr | None = None
    """environment only: PINCLAW_LLM__API_KEY (or the provider's own, e.g. OPENAI_API_KEY)"""
    # auto: straight to a server of your own and to OpenAI's chat models (routes.py)
    client: Literal["auto", "litellm"] = "auto"
    """auto: straight to the server (OpenAI's protocol, no LiteLLM) for an openai/ model at a
    server of your own (api_base on this machine or the LAN) and for OpenAI's chat models at
    OpenAI (no api_base), LiteLLM for the rest; "litellm": LiteLLM for every model"""
    # Low: a small model's tool calls hold (bench/real_model.py: Qwen2.5-Coder-1.5B held 12
    # and 11 of 12 tasks at 0.2, 9 of 12 at 0.7, where it wrote one call three times).
    temperature: float = Field(default=0.2, ge=0, le=2)
    """sampling temperature, 0 to 2 (low keeps tool calls steady)"""
    max_tokens: int = Field(default=0, ge=0)
    """cap on reply tokens; 0: 8192 for a local model (Ollama, or an api_base on this machine or
    the LAN), the provider's default for a hosted one"""
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """seconds a reply may take once the model answers: a streamed reply may pause this long between
    chunks (it may run longer while they keep coming); one not streamed must be whole within this
    or first_token_timeout_s, whichever is longer"""
    first_token_timeout_s: float = Field(default=0.0, ge=0)
    """seconds a model may think before its first token; 0: 600 for a local model (Ollama, or an
    api_base on this machine or the LAN), 60 for a hosted one (timeout_s when you changed it from
    120)"""
    read_ahead: bool = True
    """`agent run` sends a server of your own each channel's first prompt once at start, so a new
    chat's first message reads only itself (llama-server, Ollama and LM Studio keep what they
    read); never to a hosted model"""
    num_retries: int = Field(default=2, ge=0, le=10)
    """retries of a model on 429, 5xx, timeouts and connection errors"""
    retry_backoff_s: float = Field(default=1.0, ge=0)
    """first retry delay; doubled at each retry (capped at 30 s)"""
    fallback_models: list[str] = Field(default_factory=list)
    """models tried in turn when the main one keeps failing"""
    choices: list[str] = Field(default_factory=list)
    """more models a chat may switch to with /model (besides model and fallback_models)"""

    @property
    def configured_models(self) -> list[str]:
        """Every model a chat may be switched to: the main one, the fallbacks, the choices."""
        return list(dict.fromkeys([self.model, *self.fallback_models, *self.choices]))

    @property
    def local(self) -> bool:
        return served_locally(self.model, self.api_base)

    def first_token_limit_s(self, model: str | None = None) -> float:
        """How long `model` (the main one by default) may take to its first token: as set, else
        llm.timeout_s changed from 120 (a chosen wait), else 600 s local and 60 s hosted."""
        if self.first_token_timeout_s:
            return self.first_token_timeout_s
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            return self.timeout_s
        local = served_locally(model or self.model, self.api_base)
        return LOCAL_FIRST_TOKEN_S if local else HOSTED_FIRST_TOKEN_S

    def reply_cap(self, model: str | None = None) -> int | None:
        """The most tokens `model` (the main one by default) may write in one reply: as set,
        else LOCAL_REPLY_TOKENS for a local model; None: the provider's own limit."""
        if self.max_tokens:
            return self.max_tokens
        return LOCAL_REPLY_TOKENS if served_locally(model or self.model, self.api_base) else None

    def call_limit_s(self, model: str | None = None) -> float:
        """A reply that is not streamed shows no first token: it must be whole within the
        longer of the two limits. (A streamed one may run on while chunks keep coming.)"""
        return max(self.timeout_s, self.first_token_limit_s(model))
