"""An MCP server that dies mid-call, stops answering, answers 5 MB, fails, gains a tool, says
a secret on stderr, or is not there at all; and one reached over streamable HTTP. The toy
server (tests/fakes/mcp_toy_server.py, the SDK's own MCPServer) plays each part; a turn of
the model double calls it through the App `agent run` builds. One App serves the module."""

from __future__ import annotations

import io
import logging
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from conftest import eventually
from fakes.model_double import ScriptedModel
from mcp_world import TEST_MODEL, TOY, settings, started, toy, turn

from agent.app import App
from agent.config import make_scrubber
from agent.security import ScrubbingFilter

pytestmark = pytest.mark.asyncio(loop_scope="module")
SECRET = "toy-secret-Wd81Kq4Zs0"  # what the toy server says on stderr as it starts


def served_toy(transport: str, path: str) -> Iterator[str]:
    """The toy server over HTTP (`transport`: http or sse) on a free port of 127.0.0.1: its
    URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(TOY), transport, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "no HTTP toy"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}{path}"
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def web_toy() -> Iterator[str]:
    yield from served_toy("http", "/mcp")


@pytest.fixture(scope="module")
def sse_toy() -> Iterator[str]:
    yield from served_toy("sse", "/sse")


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel(model=TEST_MODEL)


@pytest.fixture(scope="module")
def log_lines() -> Iterator[io.StringIO]:
    """What the log says, through a handler scrubbed as `agent` scrubs its own."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(
    tmp_path_factory: pytest.TempPathFactory,
    model: ScriptedModel,
    web_toy: str,
    sse_toy: str,
    log_lines: io.StringIO,
) -> AsyncIterator[App]:
    mp = pytest.MonkeyPatch()
    mp.setenv("PINCLAW_TEST_TOY_SECRET", SECRET)
    home = tmp_path_factory.mktemp("faults") / "home"
    servers = {
        "toy": toy(timeout_s=3, env={"TOY_SAYS": "${PINCLAW_TEST_TOY_SECRET}"}),
        "web": {"url": web_toy, "timeout_s": 10},
        "old": {"url": sse_toy, "transport": "sse", "timeout_s": 10},
        "gone": {"command": "no-such-mcp-server-here"},
    }
    sections = {"security": {"autonomy": "full"}, "agent": {"tool_schema_budget_tokens": 0}}
    made = settings(home, servers, **sections)
    for handler in logging.getLogger().handlers:
        if getattr(handler, "stream", None) is log_lines:
            handler.addFilter(ScrubbingFilter(make_scrubber(made)))  # as agent/cli/main.py
    try:
        async for built in started(made, model):
            yield built
    finally:
        mp.undo()


def state(app: App, server: str) -> str:
    assert app.mcp is not None
    return dict(app.mcp.lines())[server]


async def run_id(app: App, model: ScriptedModel) -> str:
    [result] = (await turn(app, model, ("toy__whoami", {}))).results
    return result.rsplit("run ", 1)[1]


async def test_a_server_that_cannot_start_leaves_the_rest_working(
    app: App, model: ScriptedModel
) -> None:
    assert "'no-such-mcp-server-here' is not found on PATH" in state(app, "gone")
    assert not [name for name in app.tools.names() if name.startswith("gone__")]
    done = await turn(app, model, ("toy__whoami", {}), ("web__whoami", {}))
    assert all("run " in result for result in done.results)


async def test_a_crash_mid_call_is_an_error_and_the_server_comes_back(
    app: App, model: ScriptedModel
) -> None:
    before = await run_id(app, model)
    done = await turn(app, model, ("toy__crash", {}))
    [result] = done.results
    assert "Not done: MCP server toy is down (exited with code 3" in result
    await eventually(lambda: state(app, "toy").startswith("up"), 15, "the toy back up")
    assert await run_id(app, model) != before


async def test_a_hanging_server_times_out_and_is_restarted(app: App, model: ScriptedModel) -> None:
    before = await run_id(app, model)
    started_at = time.monotonic()
    [result] = (await turn(app, model, ("toy__hang", {"seconds": 60}))).results
    assert time.monotonic() - started_at < 15
    assert "no answer within 3 s; it stopped answering and is being restarted" in result
    await eventually(lambda: state(app, "toy").startswith("up"), 15, "the toy back up")
    assert await run_id(app, model) != before


async def test_a_slow_call_times_out_but_a_server_still_answering_is_kept(
    app: App, model: ScriptedModel
) -> None:
    before = await run_id(app, model)
    [result] = (await turn(app, model, ("toy__slow", {"seconds": 30}))).results
    assert "no answer within 3 s; it is still running, so the call may yet finish" in result
    assert state(app, "toy").startswith("up, ")
    assert await run_id(app, model) == before


async def test_a_5_mb_answer_is_cut_with_a_note(app: App, model: ScriptedModel) -> None:
    [result] = (await turn(app, model, ("toy__big", {"megabytes": 5}))).results
    assert len(result) < 21_000
    assert "0123456789abcdef" * 100 in result
    assert result.endswith("more were left out (the limit is 20000)]")
    assert str(5 * 1024 * 1024 - 20_000) in result


async def test_a_failing_tool_is_an_error_result(app: App, model: ScriptedModel) -> None:
    done = await turn(app, model, ("toy__fail", {"reason": "the disk is on fire"}))
    [result] = done.results
    assert result.startswith("Error: [Result of MCP server 'toy', tool 'fail'")
    assert ") error " in done.lines[0]


async def test_a_changed_tool_list_reaches_the_model(app: App, model: ScriptedModel) -> None:
    for server in ("toy", "web"):
        assert f"{server}__door" not in app.tools.names()
        await turn(app, model, (f"{server}__unlock", {}))  # (its last request may offer the door)
        await eventually(lambda s=server: f"{s}__door" in app.tools.names(), 10, "the door")
        after = await turn(app, model, (f"{server}__door", {}))
        assert f"{server}__door" in after.offered
        assert "the door is open" in after.results[0]


async def test_over_streamable_http(app: App, model: ScriptedModel) -> None:
    assert state(app, "web").startswith("up, ")
    [result] = (await turn(app, model, ("web__big", {"megabytes": 1}))).results
    assert result.startswith("[Result of MCP server 'web', tool 'big'")


async def test_over_sse_as_older_servers_speak(app: App, model: ScriptedModel) -> None:
    assert state(app, "old").startswith("up, ")
    [result] = (await turn(app, model, ("old__whoami", {}))).results
    assert result.startswith("[Result of MCP server 'old', tool 'whoami'")
    assert "run " in result


async def test_what_a_server_says_on_stderr_reaches_the_log_scrubbed(
    app: App, log_lines: io.StringIO
) -> None:
    await eventually(lambda: "toy starting with" in log_lines.getvalue(), 10, "the line")
    said = log_lines.getvalue()
    assert "MCP server toy: toy starting with [REDACTED]" in said
    assert SECRET not in said
