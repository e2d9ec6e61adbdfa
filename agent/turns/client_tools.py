"""Tools an API client offers with its request (OpenAI's `tools`): shown to the model beside
pinclaw's own, never run here. When the model calls one, the loop ends the turn with the
calls handed back (`TurnResult.handed_back`, stop reason "client_tools") for the client to
run and answer with their results (agent/http/chat_api.py).

The request's tools reach its turn through a context variable, set by the API around
`ChannelRuntime.handle`: the turn's task is made inside it, so it inherits the value, and
no other turn sees it (as the daemon's one-shots find their asker).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tools.base import Tool, ToolCallContext, ToolRegistry, ToolResult


@dataclass(frozen=True)
class ClientTools:
    schemas: tuple[dict[str, Any], ...]  # as the client sent them: {"type": "function", ...}

    @property
    def names(self) -> frozenset[str]:
        return frozenset(str(s["function"]["name"]) for s in self.schemas)


CLIENT_TOOLS: ContextVar[ClientTools | None] = ContextVar("client_tools", default=None)


class ClientTool:
    """One of the client's tools, as the registry holds a tool: its call is never run here."""

    def __init__(self, schema: dict[str, Any]) -> None:
        function = schema["function"]
        self.name = str(function["name"])
        self.description = str(function.get("description", ""))
        self.parameters: dict[str, Any] = dict(function.get("parameters") or {"type": "object"})

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        return ToolResult.error(f"{self.name} is the client's tool: it runs it, not pinclaw")


class WithClientTools(ToolRegistry):
    """A turn's tools and the client's: the turn's own schemas (deferral and all) first."""

    def __init__(self, base: ToolRegistry, client: ClientTools) -> None:
        theirs: list[Tool] = [ClientTool(schema) for schema in client.schemas]
        super().__init__([*base, *theirs])
        self.base, self._theirs = base, [dict(schema) for schema in client.schemas]

    def schemas(self) -> list[dict[str, Any]]:
        return [*self.base.schemas(), *self._theirs]


def with_client_tools(tools: ToolRegistry) -> tuple[ToolRegistry, frozenset[str]]:
    """The turn's tools with its client's, if an API request gave some; and their names."""
    client = CLIENT_TOOLS.get()
    if client is None or not client.schemas:
        return tools, frozenset()
    return WithClientTools(tools, client), client.names
