"""ServerLink: one MCP server kept connected through the SDK's `Client` — started, listed,
started again with backoff when it stops, listed again when it says its tools changed —
and its calls, each bounded in time.

The connection lives in one task of its own (the SDK's task groups must be entered and
left in the same task); calls come from the turns' tasks. A server that is down answers
every call at once with why and when it is tried again, never a hang: the rest of pinclaw
does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal

from tools.mcp.config import McpServerSettings, expand
from tools.mcp.stdio import ServerError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import TransportStreams
    from mcp_types import CallToolResult, Tool

log = logging.getLogger(__name__)

State = Literal["starting", "up", "down", "closed"]
Connector = Callable[[Callable[[str], None]], AbstractAsyncContextManager["TransportStreams"]]
MAX_PAGES = 10  # of one tools/list
MAX_TOOLS = 128  # of one server
_BACKOFF_S = (0.5, 60.0)  # the first wait before starting it again, and the longest
_STEADY_S = 60.0  # up this long: the next failure starts the backoff over
_CLOSE_S = 6.0  # a server's own end (stdin closed, 2 s, killed) before its start is cut short
_PING_S = 3.0  # after a call timed out: a server that does not answer within is restarted


class ServerDown(Exception):
    """A call that did not reach the server or got no answer; the message says why."""


class ServerLink:
    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        connect: Connector,
        on_tools: Callable[[ServerLink], None],
    ) -> None:
        self.name = name
        self.settings = settings
        self.state: State = "starting"
        self.reason = ""  # why it is down
        self.tools: list[Tool] = []
        self.started_s = 0.0  # how long the last start took, to the first listing
        self.retry_at = 0.0  # monotonic time of the next start, while down
        self._connect = connect
        self._on_tools = on_tools
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._settled = asyncio.Event()  # the first start ended, well or not
        self._lost = asyncio.Event()
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start it and wait until it is up or its first start failed (or startup_timeout_s
        passed); it keeps trying in the background either way."""
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.startup_timeout_s + 1):
                await self._settled.wait()

    async def close(self) -> None:
        """Stop it: its stdin closed, then ended (a start still under way is cut short)."""
        self._closing.set()
        self._lost.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=_CLOSE_S)
            if not done:
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.state = "closed"

    def describe(self) -> str:
        """Its state in a few words, for `agent mcp list` and `agent doctor`."""
        if self.state == "up":
            return f"up, {len(self.tools)} tools (started in {self.started_s:.1f} s)"
        if self.state == "down":
            wait = max(self.retry_at - time.monotonic(), 0)
            return f"down: {self.reason}; tried again in {wait:.0f} s"
        return self.state

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """The server's answer (ServerDown: it is down, stopped meanwhile, or gave no answer
        within timeout_s; RuntimeError: its answer broke the protocol)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        timeout = self.settings.timeout_s
        if self.state == "starting":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(timeout, self.settings.startup_timeout_s)):
                    await self._up.wait()
        client = self._client
        if client is None or self.state != "up":
            raise ServerDown(self._why_down())
        try:
            async with asyncio.timeout(timeout):
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            hint = await self._after_timeout(client)
            raise ServerDown(f"no answer within {timeout:g} s{hint}") from None
        except MCPError as exc:
            if self._lost.is_set() or exc.code == CONNECTION_CLOSED:
                raise ServerDown(await self._why_lost()) from None
            raise RuntimeError(f"the server refused the call: {exc.message}") from None
        except (OSError, EOFError) as exc:
            self._lose(f"the connection failed ({exc})")
            raise ServerDown(self._why_down()) from None

    async def _why_lost(self) -> str:
        """Why the connection ended under a call: the transport says so in a moment."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.5):
                await self._lost.wait()
        return self._why_down()

    async def _after_timeout(self, client: Client) -> str:
        """A call timed out: is the server still answering? (A listing, as ping is gone from
        the 2026 protocol.) If not it is started again."""
        try:
            async with asyncio.timeout(_PING_S):
                await client.list_tools()
        except Exception:
            self._lose("it stopped answering (a call timed out, and a listing too)")
            return "; it stopped answering and is being restarted"
        return "; it is still running, so the call may yet finish on its side"

    def _why_down(self) -> str:
        if self.state == "starting":
            return f"MCP server {self.name} is still starting; try again shortly"
        wait = max(self.retry_at - time.monotonic(), 0)
        again = f"it is started again in {wait:.0f} s" if wait >= 1 else "it is being restarted"
        return f"MCP server {self.name} is down ({self.reason or 'stopped'}); {again}"

    def _lose(self, reason: str) -> None:
        """The connection is gone (or no use): calls are refused from now on, and the
        connection's task starts it again."""
        if not self._lost.is_set() and not self._closing.is_set():
            self.state, self.reason, self.retry_at = "down", reason, time.monotonic()
            self._lost.set()

    async def _on_message(self, message: object) -> None:
        """A notification from the server (through 2025-11-25 they come unasked)."""
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            self._changed.set()

    async def _run(self) -> None:
        backoff = _BACKOFF_S[0]
        while not self._closing.is_set():
            self._lost.clear()
            began = time.monotonic()
            try:
                await self._session(began)
            except Exception as exc:  # any failure to start or to keep it: told, then again
                self.reason = self.reason if self._lost.is_set() else _reason(exc, self.settings)
            finally:
                self._client = None
                self._up.clear()
            if self._closing.is_set():
                return
            backoff = _BACKOFF_S[0] if time.monotonic() - began > _STEADY_S else backoff
            self.state, self.retry_at = "down", time.monotonic() + backoff
            log.warning(
                "MCP server %s is down: %s; next try in %g s", self.name, self.reason, backoff
            )
            self._settled.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._closing.wait()
            backoff = min(backoff * 2, _BACKOFF_S[1])
            self.state = "starting"

    async def _session(self, began: float) -> None:
        from mcp import Client

        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self.settings.startup_timeout_s):
                client = Client(
                    self._connect(self._lose), message_handler=self._on_message, cache=None
                )
                await stack.enter_async_context(client)
                await self._relist(client)
            self.started_s = time.monotonic() - began
            self._client, self.state, self.reason = client, "up", ""
            self._up.set()
            self._settled.set()
            log.info("MCP server %s: up, %d tools", self.name, len(self.tools))
            listening = self._listen(client)
            try:
                await self._serve(client)
            finally:
                if listening is not None:
                    listening.cancel()
                    await asyncio.gather(listening, return_exceptions=True)

    async def _serve(self, client: Client) -> None:
        """Until it is lost or closed: list again whenever it says its tools changed."""
        while not self._lost.is_set():
            changed = asyncio.ensure_future(self._changed.wait())
            lost = asyncio.ensure_future(self._lost.wait())
            await asyncio.wait((changed, lost), return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            lost.cancel()
            if self._changed.is_set() and not self._lost.is_set():
                self._changed.clear()
                try:
                    async with asyncio.timeout(self.settings.timeout_s):
                        await self._relist(client)
                except Exception as exc:
                    log.warning("MCP server %s: listing its tools again failed: %s", self.name, exc)

    def _listen(self, client: Client) -> asyncio.Task[None] | None:
        """On a 2026-07-28 connection changes come only to a listener that asked for them."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        tools = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            tools and tools.list_changed
        ):
            return None

        async def listen() -> None:
            try:
                async with client.listen(tools_list_changed=True) as events:
                    async for _event in events:
                        self._changed.set()
            except Exception as exc:
                if not self._lost.is_set():
                    log.info("MCP server %s: no tool changes heard: %s", self.name, exc)

        return asyncio.create_task(listen())

    async def _relist(self, client: Client) -> None:
        found: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            found += page.tools
            cursor = page.next_cursor
            if cursor is None or len(found) >= MAX_TOOLS:
                break
        if len(found) > MAX_TOOLS:
            log.warning(
                "MCP server %s: %d tools, only the first %d offered",
                self.name,
                len(found),
                MAX_TOOLS,
            )
        self.tools = found[:MAX_TOOLS]
        self._on_tools(self)


def _reason(exc: BaseException, settings: McpServerSettings) -> str:
    """One line of why a start failed: the innermost cause of a task group's errors."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer within startup_timeout_s ({settings.startup_timeout_s:g} s)"
    if isinstance(exc, ServerError | ValueError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def remote(settings: McpServerSettings) -> Connector:
    """A server at a URL: streamable HTTP, or SSE for older ones; headers' `${NAME}` read now."""

    @contextlib.asynccontextmanager
    async def connect(on_exit: Callable[[str], None]) -> Any:
        import httpx2
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        headers = expand(settings.headers)
        if settings.transport == "sse":
            async with sse_client(settings.url, headers=headers) as streams:
                yield streams
            return
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(settings.url, http_client=http) as streams,
        ):
            yield streams

    return connect
