"""`agent mcp list | tools NAME | call NAME TOOL JSON`: the configured MCP servers started in
this process (as the daemon starts them: in the sandbox, with their secrets), what they offer,
and one call for the owner to try a tool; everything printed passes the secret scrubber.

Only click is imported at the top: `agent --help` loads this module.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from agent.config import Settings
    from tools.mcp.manager import McpManager


@click.group()
def mcp() -> None:
    """List the MCP servers and their tools, and call a tool to try it."""


@mcp.command("list")
@click.pass_context
def list_servers(ctx: click.Context) -> None:
    """Each server: started here, its state and how many tools it offers."""
    settings: Settings = ctx.obj["load"](ctx)
    if not settings.mcp.servers:
        click.echo(
            "no MCP servers: add [mcp.servers.NAME] to config.toml (see docs/mcp-and-web.md)"
        )
        return

    async def show(manager: McpManager) -> int:
        lines = manager.lines()
        width = max(len(name) for name, _ in lines)
        for name, state in lines:
            click.echo(f"{name:<{width}}  {state}")
        return 0

    sys.exit(_with_servers(settings, None, show))


@mcp.command("tools")
@click.argument("name")
@click.pass_context
def list_tools(ctx: click.Context, name: str) -> None:
    """The tools server NAME offers the model, each with how it is trusted."""
    settings: Settings = ctx.obj["load"](ctx)

    async def show(manager: McpManager) -> int:
        from tools.mcp.tool import McpTool

        link = manager.links[name]
        if link.state != "up":
            click.echo(f"{name}: {link.describe()}", err=True)
            return 1
        offered = [t for t in manager.registry if isinstance(t, McpTool)]
        for tool in offered:
            asks = "asks first" if tool.asks else "runs without asking"
            reads = "read-only" if not tool.writes else "may change things"
            click.echo(f"{tool.name}  ({reads}; {asks})")
            click.echo(f"    {tool.offered.description.splitlines()[0]}")
        left_out = len(link.tools) - len(offered)
        if left_out:
            click.echo(f"({left_out} more not offered: excluded, left out, or not read-only)")
        return 0

    sys.exit(_with_servers(settings, _known(settings, name), show))


@mcp.command("call")
@click.argument("name")
@click.argument("tool")
@click.argument("arguments", default="{}")
@click.pass_context
def call_tool(ctx: click.Context, name: str, tool: str, arguments: str) -> None:
    """Call TOOL of server NAME with ARGUMENTS (a JSON object) and print what the model would
    get. Nobody is asked: you are the owner."""
    settings: Settings = ctx.obj["load"](ctx)
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"ARGUMENTS is not valid JSON: {exc.msg}") from None
    if not isinstance(args, dict):
        raise click.UsageError('ARGUMENTS must be a JSON object, e.g. \'{"path": "notes.md"}\'')

    async def call(manager: McpManager) -> int:
        from agent.config import make_scrubber
        from tools.base import ToolCallContext
        from tools.mcp.schemas import offered_name

        found = manager.registry.get(offered_name(name, tool))
        if found is None:
            link = manager.links[name]
            state = link.describe() if link.state != "up" else f"it offers no tool {tool!r}"
            click.echo(f"{name}: {state}", err=True)
            return 1
        result = await found.run(args, ToolCallContext(settings.workspace_dir))
        click.echo(make_scrubber(settings)(result.output))
        return 0 if result.ok else 1

    sys.exit(_with_servers(settings, _known(settings, name), call))


def _known(settings: Settings, name: str) -> str:
    server = settings.mcp.servers.get(name)
    if server is None:
        known = ", ".join(settings.mcp.servers) or "none configured"
        raise click.UsageError(f"no MCP server {name!r} (servers: {known})")
    if not server.enabled or not settings.mcp.enabled:
        raise click.UsageError(f"the MCP server {name!r} is off (enabled = false)")
    return name


def _with_servers(
    settings: Settings, only: str | None, then: Callable[[McpManager], Awaitable[int]]
) -> int:
    """Start the servers (or `only` one) as the daemon would, run `then`, close them."""

    async def run() -> int:
        from agent.workspace import ensure_workspace
        from tools.base import ToolRegistry
        from tools.mcp.manager import McpManager
        from tools.policy import SecurityPolicy
        from tools.sandbox.sandboxes import choose_sandbox

        ensure_workspace(settings.workspace_dir)
        policy = SecurityPolicy.from_settings(
            settings.security, settings.workspace_dir, home=settings.home
        )
        manager = McpManager(
            settings.mcp,
            home=settings.home / "mcp",
            policy=policy,
            sandbox=choose_sandbox(settings.security.sandbox),
            registry=ToolRegistry(),
            only=only,
        )
        await manager.start()
        try:
            return await then(manager)
        finally:
            await manager.close()

    return asyncio.run(run())
