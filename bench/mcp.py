"""What MCP servers cost: the start of three stdio servers (spawned in the OS sandbox, the
handshake, the first tools/list), the time a call through MCP adds over a tool run in this
process (goal: p50 <= 5 ms on a local server), and the first request's tokens with 0, 10 and
50 real MCP tools (goal <= 2,500 with 50; bench/tool_schemas.py counts them).

The servers are the reference ones .ci/run installs in .mcp-servers/ (npm's server-everything
and server-filesystem, PyPI's mcp-server-time and mcp-server-git) and the tests' toy server.

    .venv/bin/python bench/mcp.py [--rounds 5] [--calls 300] [--no-sandbox]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# This file's own folder first on the path would make it the `mcp` package the SDK is.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from tools.base import FunctionTool, Tool, ToolCallContext, ToolRegistry, ToolResult  # noqa: E402
from tools.config import SecuritySettings  # noqa: E402
from tools.mcp.config import McpSettings  # noqa: E402
from tools.mcp.manager import McpManager  # noqa: E402
from tools.policy import SecurityPolicy  # noqa: E402
from tools.sandbox.sandboxes import choose_sandbox  # noqa: E402

SERVERS = REPO / ".mcp-servers"
TOY = REPO / "tests" / "fakes" / "mcp_toy_server.py"


def servers(workspace: Path, sandbox: bool) -> dict[str, dict[str, Any]]:
    def program(relative: str) -> str:
        path = SERVERS / relative
        if not path.exists():
            sys.exit(f"{path} is missing: run the MCP server installs of .ci/run first")
        return str(path)

    toy = {"command": sys.executable, "args": [str(TOY)], "read_paths": [str(TOY.parent)]}
    found = {
        "every": {"command": program("node_modules/.bin/mcp-server-everything")},
        "files": {
            "command": program("node_modules/.bin/mcp-server-filesystem"),
            "args": [str(workspace)],
        },
        "time": {"command": program("venv/bin/mcp-server-time")},
        "git": {
            "command": program("venv/bin/mcp-server-git"),
            "args": ["--repository", str(REPO)],
            "read_paths": [str(REPO)],
        },
        "toy": toy,
        "toy2": toy,
    }
    return {name: {**server, "sandbox": sandbox} for name, server in found.items()}


def manager(root: Path, chosen: dict[str, dict[str, Any]]) -> McpManager:
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    policy = SecurityPolicy.from_settings(SecuritySettings(autonomy="full"), workspace)
    return McpManager(
        McpSettings.model_validate({"servers": chosen}),
        home=root / "mcp",
        policy=policy,
        sandbox=choose_sandbox("auto"),
        registry=ToolRegistry(),
    )


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def startup(root: Path, sandbox: bool, rounds: int) -> None:
    three = ("every", "files", "time")
    chosen = {name: servers(root / "workspace", sandbox)[name] for name in three}
    each: dict[str, list[float]] = {name: [] for name in three}
    together = []
    for _ in range(rounds):
        started = manager(root, chosen)
        began = time.perf_counter()
        await started.start()
        together.append(time.perf_counter() - began)
        for name, link in started.links.items():
            assert link.state == "up", f"{name}: {link.describe()}"
            each[name].append(link.started_s)
        await started.close()
    kind = choose_sandbox("auto").kind if sandbox else "none (sandbox = false)"
    print(f"start-up, {rounds} rounds, sandbox: {kind} (spawn, handshake, first tools/list)")
    for name, times in each.items():
        p50, top = statistics.median(times) * 1000, max(times) * 1000
        print(f"  {name:<6} p50 {p50:7.0f} ms  max {top:7.0f} ms")
    print(f"  all three at once: p50 {statistics.median(together) * 1000:.0f} ms")


async def timed(run: Callable[[], Awaitable[ToolResult]], calls: int) -> list[float]:
    for _ in range(20):  # warm
        assert (await run()).ok
    found = []
    for _ in range(calls):
        began = time.perf_counter()
        result = await run()
        found.append(time.perf_counter() - began)
        assert result.ok, result.output
    return found


async def echo(call: ToolCallContext, message: str) -> ToolResult:
    """Echoes the message (the direct tool the MCP calls are compared with)."""
    return ToolResult.success(f"Echo: {message}")


async def calls(root: Path, sandbox: bool, count: int) -> list[Tool]:
    """Time the calls; return every MCP tool the servers offered (for the token count)."""
    started = manager(root, servers(root / "workspace", sandbox))
    await started.start()
    try:
        context = ToolCallContext(root / "workspace")
        direct = FunctionTool(echo)
        args = {"message": "hello"}
        tools = started.registry
        rows = {
            "direct (in process)": await timed(lambda: direct.run(args, context), count),
            "every__echo (node)": await timed(
                lambda: _run(tools, "every__echo", args, context), count
            ),
            "toy__whoami (python)": await timed(
                lambda: _run(tools, "toy__whoami", {}, context), count
            ),
            "time__get_current_time": await timed(
                lambda: _run(tools, "time__get_current_time", {"timezone": "UTC"}, context), count
            ),
        }
        base = statistics.median(rows["direct (in process)"])
        print(f"one call, {count} calls each (goal: added p50 <= 5 ms)")
        for name, times in rows.items():
            p50, p99 = statistics.median(times), quantile(times, 0.99)
            added = "" if name.startswith("direct") else f"  added p50 {(p50 - base) * 1000:.2f} ms"
            print(f"  {name:<24} p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms{added}")
        return list(tools)
    finally:
        await started.close()


async def _run(
    tools: ToolRegistry, name: str, args: dict[str, Any], context: ToolCallContext
) -> ToolResult:
    tool = tools.get(name)
    assert tool is not None, name
    return await tool.run(args, context)


def tokens(offered: list[Tool]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tool_schemas", REPO / "bench" / "tool_schemas.py"
    )
    if spec is None or spec.loader is None or not Path(spec.origin or "").exists():
        print("first request: bench/tool_schemas.py is not there; not counted")
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["tool_schemas"] = module
    spec.loader.exec_module(module)
    first_request = module.first_request
    print(
        "first request's tokens (LiteLLM's counter for openai/gpt-4o-mini; goal <= 2,500 with 50)"
    )
    for count in (0, 10, 50):
        found = first_request(offered[:count])
        print(
            f"  {count:>2} MCP tools: {found.total:,} (system {found.system:,}, tools= "
            f"{found.tools:,} in {found.schemas} schemas, message {found.message:,})"
        )
    whole = first_request(offered[:50], budget=0)
    print(f"  50 MCP tools, all schemas sent whole: {whole.total:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="start-ups timed")
    parser.add_argument("--calls", type=int, default=300, help="calls timed per tool")
    parser.add_argument("--no-sandbox", action="store_true", help="run the servers unconfined")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "workspace").mkdir()
        asyncio.run(startup(root, not args.no_sandbox, args.rounds))
        offered = asyncio.run(calls(root, not args.no_sandbox, args.calls))
    tokens(offered)


if __name__ == "__main__":
    main()
