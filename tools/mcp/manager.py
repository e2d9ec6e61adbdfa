"""McpManager: every enabled MCP server started together, and the registry kept in step with
their tools — registered as `SERVER__tool` when a server lists them, replaced when it lists
again (`notifications/tools/list_changed`), kept while it is down (their calls then say so).

Registries made from that one (compact mode's copy with short schemas; a reload's new
registry) are kept in step too, while anything still holds them (`also_in`); the prompt
follows by itself, its fingerprint holding the tools' names.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tools.base import ToolRegistry
from tools.config import Autonomy
from tools.mcp.config import McpServerSettings, McpSettings, MissingVariable, expand
from tools.mcp.link import Connector, ServerLink, remote
from tools.mcp.schemas import offered
from tools.mcp.stdio import sandboxed_stdio, server_launch
from tools.mcp.tool import McpTool, is_offered
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import Sandbox

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

log = logging.getLogger(__name__)


class McpManager:
    def __init__(
        self,
        settings: McpSettings,
        *,
        home: Path,
        policy: SecurityPolicy,
        sandbox: Sandbox,
        registry: ToolRegistry,
        only: str | None = None,
    ) -> None:
        """`home`: the servers' own folders' parent (<pinclaw home>/mcp); `only`: start
        this server alone (`agent mcp tools NAME`)."""
        self.settings = settings
        self.registry = registry
        self._registries: list[weakref.ref[ToolRegistry]] = [weakref.ref(registry)]
        self._home = home
        self._policy = policy
        self._sandbox = sandbox
        self._autonomy: Autonomy = policy.autonomy
        self._names: dict[str, list[str]] = {}  # each server's tools in the registry
        self.links = {
            name: ServerLink(name, server, self._connector(name, server), self._listed)
            for name, server in settings.servers.items()
            if server.enabled and settings.enabled and only in (None, name)
        }

    async def start(self) -> None:
        """Start every server at once; return when each is up or failed its first start
        (at most its startup_timeout_s). The ones down keep trying in the background."""
        await asyncio.gather(*(link.start() for link in self.links.values()))

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()))
        for names in self._names.values():
            for name in names:
                for registry in self._live():
                    registry.remove(name)
        self._names.clear()

    def also_in(self, registry: ToolRegistry) -> None:
        """Keep `registry` (made from one kept in step, with the servers' tools) in step too."""
        if all(registry is not known for known in self._live()):
            self._registries.append(weakref.ref(registry))

    def _live(self) -> list[ToolRegistry]:
        """The registries kept in step that something still holds (a turn, the App)."""
        self._registries = [ref for ref in self._registries if ref() is not None]
        return [known for ref in self._registries if (known := ref()) is not None]

    def lines(self) -> list[tuple[str, str]]:
        """(server, its state) for each configured server, the disabled ones too."""
        found = []
        for name, server in self.settings.servers.items():
            link = self.links.get(name)
            if link is not None:
                found.append((name, link.describe()))
            elif not (server.enabled and self.settings.enabled):
                found.append((name, "off (enabled = false)"))
        return found

    def _connector(self, name: str, server: McpServerSettings) -> Connector:
        if server.url:
            return remote(server)
        home, policy, sandbox = self._home, self._policy, self._sandbox

        @asynccontextmanager
        async def local(on_exit: Callable[[str], None]) -> AsyncIterator[TransportStreams]:
            launch = server_launch(
                name, server, own_folder=home / name, policy=policy, sandbox=sandbox
            )
            async with sandboxed_stdio(launch, name, on_exit) as streams:
                yield streams

        return local

    def _listed(self, link: ServerLink) -> None:
        """Replace the server's tools in the registry with those it listed."""
        registries = self._live()
        for name in self._names.pop(link.name, []):
            for registry in registries:
                registry.remove(name)
        added = []
        for tool in link.tools:
            shown = offered(link.name, tool)
            if isinstance(shown, str):
                log.warning("MCP server %s: tool %r left out: %s", link.name, tool.name, shown)
            elif not is_offered(link.settings, shown, self._autonomy):
                continue
            elif self.registry.get(shown.name) is not None:
                log.warning(
                    "MCP server %s: tool %r left out: %s is taken", link.name, tool.name, shown.name
                )
            else:
                offer = McpTool(link, shown, autonomy=self._autonomy, files=self._policy.paths)
                for registry in registries:
                    if registry.get(offer.name) is None:
                        registry.register(offer)
                added.append(shown.name)
        self._names[link.name] = added


async def start_servers(
    settings: McpSettings,
    home: Path,
    policy: SecurityPolicy,
    sandbox: Sandbox,
    registry: ToolRegistry,
) -> McpManager | None:
    """The enabled servers started and their tools in `registry` (None: none is enabled)."""
    manager = McpManager(settings, home=home, policy=policy, sandbox=sandbox, registry=registry)
    if not manager.links:
        return None
    await manager.start()
    return manager


def preflight(name: str, server: McpServerSettings, sandbox: Sandbox) -> str:
    """What can be said of a server without starting it, in one line (`agent doctor`)."""
    if not server.enabled:
        return "off (enabled = false)"
    try:
        expand({**server.env, **server.headers})
    except MissingVariable as exc:
        return f"cannot start: {exc}"
    if server.url:
        return f"{server.transport.replace('_', ' ')} at {server.url}"
    program = shutil.which(server.command)
    if program is None:
        return f"cannot start: {server.command!r} is not found on PATH"
    if not server.sandbox:
        return f"{program}, unconfined (sandbox = false)"
    if sandbox.kind == "none":
        return f"cannot start: no OS sandbox here ({sandbox.reason}); or set sandbox = false"
    return f"{program}, in the {sandbox.kind} sandbox"
