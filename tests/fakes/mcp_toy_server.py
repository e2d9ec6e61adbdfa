"""A small MCP server on the SDK's own MCPServer, for what the reference servers cannot be
made to do on demand: die mid-call, stop answering, answer 5 MB, fail, gain a tool.

    python mcp_toy_server.py            # stdio
    python mcp_toy_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
    python mcp_toy_server.py sse PORT   # SSE on 127.0.0.1:PORT/sse
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations

READS = ToolAnnotations(read_only_hint=True)
server: MCPServer = MCPServer("toy")
STARTED = uuid.uuid4().hex[:8]  # tells one run of the server from the next


@server.tool(annotations=READS)
def whoami() -> str:
    """Which run of the server answers."""
    return f"run {STARTED}"


@server.tool()
def crash() -> str:
    """Ends the server in the middle of the call."""
    os._exit(3)


@server.tool()
async def hang(seconds: float) -> str:
    """Blocks the whole server for `seconds`: no call, no ping is answered meanwhile."""
    time.sleep(seconds)  # noqa: ASYNC251 (the point: the server's loop stops)
    return "woke up"


@server.tool(annotations=READS)
async def slow(seconds: float) -> str:
    """Answers after `seconds`; the server answers other requests meanwhile."""
    await asyncio.sleep(seconds)
    return "done at last"


@server.tool(annotations=READS)
def big(megabytes: int) -> str:
    """A text answer of that many megabytes."""
    return "0123456789abcdef" * (megabytes * 1024 * 1024 // 16)


@server.tool()
def fail(reason: str) -> str:
    """Fails with `reason` (an isError result)."""
    raise ValueError(reason)


@server.tool()
def write_note(text: str) -> str:
    """Writes `text` to note.txt in the server's working folder."""
    with open("note.txt", "w", encoding="utf-8") as handle:
        handle.write(text)
    return f"wrote {len(text)} characters to {os.path.abspath('note.txt')}"


def door() -> str:
    """The tool `unlock` adds."""
    return "the door is open"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Adds the tool `door` and tells the client its tools changed."""
    server.add_tool(door, name="door", annotations=READS)
    await ctx.notify_tools_changed()  # 2026-07-28 sessions: to listeners
    with contextlib.suppress(Exception):  # earlier sessions: the notification itself
        await ctx.request_context.session.send_tool_list_changed()
    return "unlocked"


if __name__ == "__main__":
    if os.environ.get("TOY_SAYS"):  # a server that echoes a setting on stderr, as some do
        print(f"toy starting with {os.environ['TOY_SAYS']}", file=sys.stderr, flush=True)
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["sse"]:  # the older HTTP transport, as servers before 2025 spoke it
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
