"""What the hardware tests share: a tool called as the tool-call loop calls it, waiting for
a pin to change while the event loop runs on, and a daemon's `[hardware]` environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually as eventually  # waiting for a pin while the loop runs on

from tools.base import ToolCallContext, ToolResult
from tools.board.board import Board
from tools.board.board_tools import hardware_tools


async def call(board: Board, name: str, **args: Any) -> ToolResult:
    """Hardware tool `name` of `board`, run with `args`."""
    tools = {tool.name: tool for tool in hardware_tools(board)}
    return await tools[name].run(args, ToolCallContext(workspace=Path.cwd()))


def board_env(
    monkeypatch: pytest.MonkeyPatch, port: Path | str, pins: dict[str, Any], **more: str
) -> dict[str, str]:
    """The environment of a daemon with `[hardware]` on `port` and these named pins (`more`:
    other PINCLAW_HARDWARE__ keys, or full PINCLAW_ names); set here and returned."""
    values = {
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(port),
        "PINCLAW_HARDWARE__CONNECT_TIMEOUT_S": "3",
        "PINCLAW_HARDWARE__PINS": json.dumps(pins),
    }
    for key, value in more.items():
        values[key if key.startswith("PINCLAW_") else f"PINCLAW_HARDWARE__{key.upper()}"] = value
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
