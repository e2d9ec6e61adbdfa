"""A server's tool as a pinclaw tool, and whom it trusts.

Trust is the owner's first, the server's hint second (a server's annotations are only
hints): under `supervised` a call asks the owner unless the server's `allow_tools` or
`read_only_tools` names the tool, or the server marks it read-only (`readOnlyHint`) and
`ask_tools` does not name it; "Always allow" remembers `mcp:SERVER:TOOL`. Under `read_only`
only read-only tools are offered; under `full` nothing asks.
"""

from __future__ import annotations

import json
from typing import Any

from tools.base import ApprovalRequest, ToolCallContext, ToolResult
from tools.config import Autonomy
from tools.mcp.config import McpServerSettings
from tools.mcp.link import ServerDown, ServerLink
from tools.mcp.results import header, to_result
from tools.mcp.schemas import OfferedTool, clean_text
from tools.paths import PathRules


def _named(names: list[str], tool: str) -> bool:
    return "*" in names or tool in names


def is_read_only(settings: McpServerSettings, offered: OfferedTool) -> bool:
    """Whether the tool only reads: the owner says so, or the server does and the owner did
    not say to ask."""
    if _named(settings.read_only_tools, offered.remote):
        return True
    return offered.read_only_hint and not _named(settings.ask_tools, offered.remote)


def must_ask(settings: McpServerSettings, offered: OfferedTool, autonomy: Autonomy) -> bool:
    if autonomy != "supervised" or _named(settings.ask_tools, offered.remote):
        return autonomy == "supervised"
    return not (_named(settings.allow_tools, offered.remote) or is_read_only(settings, offered))


def is_offered(settings: McpServerSettings, offered: OfferedTool, autonomy: Autonomy) -> bool:
    if _named(settings.exclude_tools, offered.remote):
        return False
    return autonomy != "read_only" or is_read_only(settings, offered)


class McpTool:
    """One tool of one server. `deferrable`: its schema may wait until the model asks for
    it, when many tools are offered."""

    deferrable = True

    def __init__(
        self,
        link: ServerLink,
        offered: OfferedTool,
        *,
        autonomy: Autonomy,
        files: PathRules | None,
    ) -> None:
        self.link = link
        self.offered = offered
        self.name = offered.name
        self.description = f"[MCP {link.name}] {offered.description}"
        self.parameters = offered.parameters
        read_only = is_read_only(link.settings, offered)
        self.writes = not read_only  # what a call may change, the journal's business too
        self.effects = not read_only
        self.repeat_safe = read_only
        self.asks = must_ask(link.settings, offered, autonomy)  # the owner, before each call
        self._files = files

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        server, tool = self.link.name, self.offered.remote
        if self.asks and not await call.ask(self.approval(args)):
            return ToolResult.error(
                f"Not run: the owner did not approve {self.name}. Say what you wanted to do "
                "instead of calling it again."
            )
        try:
            result = await self.link.call(tool, args)
        except ServerDown as exc:
            return ToolResult.error(f"{header(server, tool)}\nNot done: {exc}")
        except RuntimeError as exc:
            return ToolResult.error(f"{header(server, tool)}\nFailed: {clean_text(str(exc))}")
        if not self.link.settings.trusted:
            call.taint.read(f"the MCP server {server}")
        limit = self.link.settings.max_result_chars
        return to_result(result, server=server, tool=tool, max_chars=limit, files=self._files)

    def approval(self, args: dict[str, Any]) -> ApprovalRequest:
        shown = json.dumps(args, ensure_ascii=False)
        shown = shown if len(shown) <= 300 else shown[:299] + "…"
        server, tool = self.link.name, self.offered.remote
        return ApprovalRequest(
            self.name,
            f"{tool} on MCP server {server} with {shown}",
            f"the MCP server {server} does not mark {tool} read-only, nor is it in its allow_tools",
            (f"mcp:{server}:{tool}",),
            always_covers=f"every call of {tool} on the MCP server {server}",
        )
