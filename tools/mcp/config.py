"""`[mcp.servers.NAME]`: the MCP servers whose tools the agent gets (plain pydantic, no import
of the SDK: loading the config stays fast).

config.toml holds no secret: a value in `env` or `headers` may name environment variables as
`${NAME}` (agent.env is read into the environment first), read when the server starts; a
literal value under a name that looks secret (a token, a key, Authorization) is refused. The
values read that way are handed to the scrubber (`secret_values`), so they never reach the
model, the logs or state.db.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_NAME = re.compile(
    r"token|secret|passw|api[_-]?key|private[_-]?key|credential|authoriz|cookie"
    r"|(^|[_-])auth($|[_-])|(^|[_-])key$",
    re.IGNORECASE,
)
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,24}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class McpServerSettings(_Section):
    """One server: started as a command (stdio) or reached at a URL."""

    enabled: bool = True
    """false: this server is not started"""
    # stdio: the program and its words; env adds to a small environment (PATH, LANG...)
    command: str = Field(default="", examples=["npx"])
    """a local server (stdio): the program to start, e.g. "npx" (then no url)"""
    args: list[str] = Field(
        default_factory=list,
        examples=[["-y", "@modelcontextprotocol/server-filesystem", "~/.pinclaw/workspace/shared"]],
    )
    """the program's arguments"""
    env: dict[str, str] = Field(default_factory=dict)
    """added to a small environment (PATH, LANG, TERM, TZ, USER), e.g. { GITHUB_TOKEN =
    "${GITHUB_TOKEN}" }"""
    cwd: str = ""
    """"" = its own folder <home>/mcp/NAME, which is also its HOME"""
    # remote: streamable HTTP, or SSE for older servers
    url: str = ""
    """or a remote server: "https://..." (then no command)"""
    headers: dict[str, str] = Field(default_factory=dict)
    """e.g. { Authorization = "Bearer ${MY_TOKEN}" }"""
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    """or "sse" for older servers"""
    # One call; below agent.tool_timeout_s, so that a server that hangs is found (a listing,
    # 3 s) and started again before the turn gives up on the call.
    timeout_s: float = Field(default=45.0, gt=0)
    """one call; keep it below agent.tool_timeout_s"""
    startup_timeout_s: float = Field(default=30.0, gt=0)
    """start, handshake and first listing; it is retried with backoff after"""
    # stdio servers run in the OS sandbox: their own folder read-write, the workspace as
    # autonomy allows, the program's own folder and read_paths read-only, network on.
    sandbox: bool = True
    """false: run it unconfined (your explicit choice)"""
    read_paths: list[str] = Field(default_factory=list)
    """more folders it may read (its program's folder is added by itself)"""
    write_paths: list[str] = Field(default_factory=list)
    """more folders it may write (besides its own folder, and the workspace unless autonomy is
    read_only)"""
    memory_mb: int = Field(default=2048, ge=0)
    """address space per process; 0 = no limit"""
    # Trust, by the server's own tool names ("*": all). Under supervised a tool asks the
    # owner unless allowed here or marked read-only (readOnlyHint); ask_tools always ask;
    # under read_only only read-only ones are offered (read_only_tools: the owner says so).
    allow_tools: list[str] = Field(default_factory=list)
    """its tools that never ask under supervised ("*" = all)"""
    ask_tools: list[str] = Field(default_factory=list)
    """its tools that always ask, even when the server marks them read-only"""
    read_only_tools: list[str] = Field(default_factory=list)
    """its tools you vouch only read: offered under read_only, never asked"""
    exclude_tools: list[str] = Field(default_factory=list)
    """its tools never offered"""
    # The owner trusts what this server returns (a server of their own, reading their own
    # data): its results do not make a turn tainted, and in a tainted turn its read-only
    # tools run without a question (tools/taint.py).
    trusted: bool = False
    """true: its results do not taint a turn, and its read-only tools need no question in a turn
    that read untrusted content"""
    max_result_chars: int = Field(default=20_000, ge=200)
    """characters of one result the model gets; the rest is cut, with a note"""

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return env

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServerSettings:
        if bool(self.command) == bool(self.url):
            raise ValueError("set either command (a local server) or url (a remote one)")
        if self.url and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        for where, values in (("env", self.env), ("headers", self.headers)):
            for name, value in values.items():
                if _SECRET_NAME.search(name) and _REFERENCE.sub("", value).strip(" :") not in (
                    "",
                    "Bearer",
                    "Basic",
                    "Token",
                ):
                    raise ValueError(
                        f"{where}.{name}: secrets are read from the environment only; write "
                        f'"${{{name.upper().replace("-", "_")}}}" and set that variable in '
                        "agent.env"
                    )
        return self

    def references(self) -> Iterator[str]:
        """The environment variables the env and header values name."""
        for value in (*self.env.values(), *self.headers.values()):
            yield from _REFERENCE.findall(value)


class McpSettings(_Section):
    """MCP servers whose tools the agent gets, one [mcp.servers.NAME] table each."""

    enabled: bool = True
    """start the MCP servers below with `agent run` (and a one-shot); false: none"""
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    """one [mcp.servers.NAME] table per server; its tools reach the model as NAME__tool.
    Secrets: write "${VAR}" in env or headers and set VAR in agent.env; a literal token, key or
    Authorization is refused"""

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: use 1-24 letters, digits, _ or - (it starts each "
                    "of its tools' names)"
                )
        return servers

    def secret_values(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """The values of every variable the servers' env and headers name, to be scrubbed."""
        env = os.environ if environ is None else environ
        names = {name for server in self.servers.values() for name in server.references()}
        return [env[name] for name in sorted(names) if env.get(name)]


class MissingVariable(ValueError):
    """An env or header value names a variable that is not set."""


def expand(values: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`values` with each `${NAME}` replaced by the variable's value (MissingVariable: one is
    not set, named in the message)."""
    env = os.environ if environ is None else environ

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise MissingVariable(f"the environment variable {name} is not set (agent.env?)")
        return env[name]

    return {key: _REFERENCE.sub(value_of, value) for key, value in values.items()}
