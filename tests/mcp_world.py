"""What the MCP tests share: the reference servers `.ci/run` installs in `.mcp-servers/`
(npm's server-everything and server-filesystem, PyPI's mcp-server-time and mcp-server-git in a
venv of their own), the toy server (tests/fakes/mcp_toy_server.py), an App built as `agent
run` builds it with the model double, and one turn through it as `agent run -m` runs it.

Without `.mcp-servers/` the tests that need it are skipped, unless PINCLAW_MCP_SERVERS=require
(as .ci/run sets it while it installs them beside the suite's venv): then they wait for that
install, and fail without the servers.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes.model_double import ScriptedModel, text, tool_calls

from agent.app import App, build_app
from agent.config import Settings
from agent.runtime.one_shot import answer
from agent.runtime.turn_setup import Access
from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, MayAnswer
from channels.terminal import TerminalChannel

REPO = Path(__file__).resolve().parent.parent
SERVERS = REPO / ".mcp-servers"
TOY = REPO / "tests" / "fakes" / "mcp_toy_server.py"
TEST_MODEL = "openai/test-model"


def installed(relative: str) -> str:
    """The path of a reference server's program, or skip (fail when they are required)."""
    path = SERVERS / relative
    if os.environ.get("PINCLAW_MCP_SERVERS") == "require":
        _wait_for_the_install()
    if not path.exists():
        message = f"{path} is missing: run the MCP server installs of .ci/run"
        if os.environ.get("PINCLAW_MCP_SERVERS") == "require":
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def _wait_for_the_install(within_s: float = 300) -> None:
    """.ci/run installs the servers beside the suite's venv, `.installing` there meanwhile: by
    the time the suite starts they are done, but a slow registry may hold them longer."""
    deadline = time.monotonic() + within_s
    while (SERVERS / ".installing").exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def everything(**extra: Any) -> dict[str, Any]:
    return {"command": installed("node_modules/.bin/mcp-server-everything"), **extra}


def filesystem(folder: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": installed("node_modules/.bin/mcp-server-filesystem"),
        "args": [str(folder)],
    } | extra


def time_server(**extra: Any) -> dict[str, Any]:
    return {"command": installed("venv/bin/mcp-server-time"), **extra}


def git_server(repo: Path, **extra: Any) -> dict[str, Any]:
    command = installed("venv/bin/mcp-server-git")
    return {
        "command": command,
        "args": ["--repository", str(repo)],
        "read_paths": [str(repo)],
    } | extra


def toy(**extra: Any) -> dict[str, Any]:
    """The toy server, run by this Python (its venv holds the SDK) in the sandbox."""
    return {"command": sys.executable, "args": [str(TOY)], "read_paths": [str(TOY.parent)]} | extra


def settings(home: Path, servers: dict[str, dict[str, Any]], **sections: Any) -> Settings:
    """Settings with these [mcp.servers] (and sections, e.g. security={...}) in `home`."""
    made = Settings(
        llm={"model": TEST_MODEL},  # type: ignore[arg-type]
        mcp={"servers": servers},  # type: ignore[arg-type]
        memory={"enabled": False},  # type: ignore[arg-type]
        **sections,
    )
    made._home = home
    return made


class OwnerAtTerminal(TerminalChannel):
    """The terminal channel whose owner answers every question `answer`, and remembers it."""

    def __init__(self, answer: ApprovalAnswer) -> None:
        super().__init__(out=io.StringIO())
        self.answer = answer
        self.asked: list[str] = []

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        self.asked.append(question.text)
        return self.answer


@dataclass
class Turn:
    results: list[str]  # the tool results as the model received them, in order
    offered: list[str]  # the tool names offered in the turn's last request
    asked: list[str] = field(default_factory=list)  # what the owner was asked
    lines: list[str] = field(default_factory=list)  # the tool lines on stderr: "... ok 0.01 s"
    reply: str = ""


async def turn(
    app: App, model: ScriptedModel, *calls: tuple[str, Any], answer_with: ApprovalAnswer = "deny"
) -> Turn:
    """One `agent run -m` turn in which the model makes `calls` (at once), then says done."""
    model.script(tool_calls(*calls), text("done"))
    channel = OwnerAtTerminal(answer_with)
    runtime = app.runtime(channel, Access(open_to_all=True))
    lines: list[str] = []
    await answer(runtime, app.scrub, "go", None, terminal=channel, say=lines.append)
    assert model.pending == 0, "the turn did not take the scripted answers"
    last = model.requests[-1]
    results = [str(m["content"]) for m in last["messages"] if m.get("role") == "tool"]
    offered = [tool["function"]["name"] for tool in last.get("tools", [])]
    out = channel._out.getvalue() if isinstance(channel._out, io.StringIO) else ""
    return Turn(results[-len(calls) :], offered, channel.asked, lines, out)


async def started(settings: Settings, model: ScriptedModel) -> AsyncIterator[App]:
    app = await build_app(settings, model=model)
    try:
        yield app
    finally:
        await app.close()
