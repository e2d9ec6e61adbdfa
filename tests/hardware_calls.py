"""What the hardware tests share: a tool called as the tool-call loop calls it, and waiting
for a pin to change while the event loop runs on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.base import ToolCallContext, ToolResult
from tools.gpio import hardware_tools
from tools.hardware import Board


async def call(board: Board, name: str, **args: Any) -> ToolResult:
    """Hardware tool `name` of `board`, run with `args`."""
    tools = {tool.name: tool for tool in hardware_tools(board._settings, board)}
    return await tools[name].run(args, ToolCallContext(workspace=Path.cwd()))


async def eventually(check: Callable[[], Any], within: float = 3.0) -> None:
    """Wait until `check()` is true, failing after `within` seconds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the expected state never came"
        await asyncio.sleep(0.005)
