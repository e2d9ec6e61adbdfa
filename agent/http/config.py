"""`[http]` and `[http.hooks.NAME]`: the daemon's HTTP server and its webhooks. Light (pydantic
only), read by agent/config.py; secrets are never here: a hook's secret is an environment
variable (agent.env) this names."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

HOOK_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MB = 1024 * 1024


class HookSettings(BaseModel):
    """One webhook, served at POST /hooks/NAME."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    # github: X-Hub-Signature-256 over the body; generic: X-Signature-256 over
    # "<X-Timestamp>.<body>", the timestamp within `window_s` of now
    scheme: Literal["github", "generic"] = "github"
    """X-Hub-Signature-256; "generic": X-Signature-256 over "<X-Timestamp>.<body>\""""
    secret_env: str = ""
    """its secret's variable in agent.env; "" = HOOK_<NAME>_SECRET (HOOK_GITHUB_SECRET)"""
    events: tuple[str, ...] = Field(default=(), examples=[["push"]])
    """X-GitHub-Event (generic: X-Event) values taken; [] = every event"""
    match: dict[str, str] = Field(default_factory=dict, examples=[{"$.ref": "refs/heads/main"}])
    """JSON paths the payload must hold these values at"""
    template: str = Field(
        default="", examples=["Push to {$.repository.full_name}: {$.head_commit.message}"]
    )
    """"" = the payload as JSON"""
    to: str = ""
    """a [people] name: the turn runs in their private chat and replies there; "" = a silent turn,
    its reply logged"""
    channel: str = ""
    """the channel of that chat; "" = the first where it is known"""
    window_s: float = Field(default=300.0, gt=0)
    """generic: how far X-Timestamp may be from now"""

    def secret_name(self, name: str) -> str:
        return self.secret_env or f"HOOK_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}_SECRET"

    @field_validator("secret_env")
    @classmethod
    def _secret_named(cls, name: str) -> str:
        if name and not re.search(r"SECRET|KEY|TOKEN", name, re.I):
            raise ValueError(f"{name!r}: name it with SECRET, KEY or TOKEN, so it is scrubbed")
        return name

    @field_validator("match")
    @classmethod
    def _paths(cls, match: dict[str, str]) -> dict[str, str]:
        for path in match:
            if not path.startswith("$"):
                raise ValueError(f"{path!r}: a JSON path starts with $ ($.ref, $.commits[0].id)")
        return match


class HttpSettings(BaseModel):
    """The HTTP server `agent run` serves; off unless `enabled`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    enabled: bool = False
    """true: `agent run` serves HTTP (webhooks) at host:port"""
    host: str = "127.0.0.1"
    """another address only behind a TLS proxy; a warning line without tls_proxy"""
    port: int = Field(default=8787, ge=0, le=65535)
    """the port it listens on"""
    tls_proxy: str = ""
    """the TLS proxy in front when host is not loopback ("caddy"): named, no warning"""
    max_body_bytes: int = Field(default=MB, gt=0)
    """a larger request is refused with 413 before it is read"""
    read_timeout_s: float = Field(default=10.0, gt=0)
    """a request's body must arrive whole within this (a slow client: 408); a connection
    without a whole request head (or idle) this long is closed"""
    hooks: dict[str, HookSettings] = Field(default_factory=dict)
    """one [http.hooks.NAME] table per webhook, served at POST /hooks/NAME"""

    @field_validator("hooks")
    @classmethod
    def _names(cls, hooks: dict[str, HookSettings]) -> dict[str, HookSettings]:
        for name in hooks:
            if not HOOK_NAME.fullmatch(name):
                raise ValueError(f"{name!r}: a hook's name is letters, digits, _ and -")
        return hooks
