"""A tool that reads "a page" for the daemon's tests of taint: it marks its turn as having
read `example.org/page`, as web_fetch does, and hands back what the page says, with no web
server at all. Added to the daemon's tools by `add_page_reader`."""

from __future__ import annotations

from typing import Any

import pytest

import agent.app as app_module
from tools.base import FunctionTool, ToolCallContext, ToolResult

PAGE = "example.org/page"


def add_page_reader(monkeypatch: pytest.MonkeyPatch, says: str) -> None:
    """The daemon's tools, plus `read_page`, which taints its turn and returns `says`."""

    async def read_page(call: ToolCallContext) -> ToolResult:
        """Read the page the owner asked about."""
        call.taint.read(PAGE)
        return ToolResult.success(says)

    original = app_module.web_tools

    def with_reader(*args: Any, **kwargs: Any) -> list[Any]:
        return [*original(*args, **kwargs), FunctionTool(read_page)]

    monkeypatch.setattr(app_module, "web_tools", with_reader)
