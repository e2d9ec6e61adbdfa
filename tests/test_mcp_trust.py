"""Whom an MCP tool trusts: under `supervised` a tool the server does not mark read-only asks
the owner first (a no: nothing runs), unless the owner's allow_tools names it; ask_tools asks
even for a read-only one; "Always allow" is remembered. Under `read_only` only read-only
tools are offered. The toy server (tests/fakes/mcp_toy_server.py) marks `whoami`, `slow` and
`big` read-only; `write_note` writes note.txt in the server's own folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from conftest import eventually
from fakes.model_double import ScriptedModel
from mcp_world import TEST_MODEL, settings, started, toy, turn

from agent.app import App

pytestmark = pytest.mark.asyncio(loop_scope="module")
WHOLE = {"tool_schema_budget_tokens": 0}  # every schema sent whole: `offered` is all of them


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel(model=TEST_MODEL)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trust") / "home"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def supervised(home: Path, model: ScriptedModel) -> AsyncIterator[App]:
    servers = {
        "toy": toy(),
        "trusted": toy(allow_tools=["write_note"]),
        "wary": toy(ask_tools=["whoami"]),
    }
    made = settings(home, servers, security={"autonomy": "supervised"}, agent=WHOLE)
    async for app in started(made, model):
        yield app


def note(home: Path, server: str) -> Path:
    return home / "mcp" / server / "note.txt"


async def test_a_tool_not_marked_read_only_asks_and_a_no_runs_nothing(
    supervised: App, model: ScriptedModel, home: Path
) -> None:
    done = await turn(supervised, model, ("toy__write_note", {"text": "hi"}), answer_with="deny")
    [question] = done.asked
    assert question.startswith('Approve toy__write_note: write_note on MCP server toy with {"text"')
    assert "Not run: the owner did not approve toy__write_note" in done.results[0]
    assert not note(home, "toy").exists()

    done = await turn(
        supervised, model, ("toy__write_note", {"text": "yes"}), answer_with="approve"
    )
    assert len(done.asked) == 1 and "wrote 3 characters" in done.results[0]
    assert note(home, "toy").read_text() == "yes"


async def test_always_allow_is_remembered(supervised: App, model: ScriptedModel) -> None:
    first = await turn(supervised, model, ("wary__write_note", {"text": "a"}), answer_with="always")
    assert len(first.asked) == 1 and "wrote 1 characters" in first.results[0]
    again = await turn(supervised, model, ("wary__write_note", {"text": "b"}), answer_with="deny")
    assert again.asked == [] and "wrote 1 characters" in again.results[0]


async def test_read_only_and_allowed_tools_run_without_asking(
    supervised: App, model: ScriptedModel, home: Path
) -> None:
    done = await turn(
        supervised,
        model,
        ("toy__whoami", {}),
        ("trusted__write_note", {"text": "trusted"}),
        answer_with="deny",
    )
    assert done.asked == []
    assert "run " in done.results[0]
    assert note(home, "trusted").read_text() == "trusted"


async def test_ask_tools_wins_over_the_servers_read_only_hint(
    supervised: App, model: ScriptedModel
) -> None:
    done = await turn(supervised, model, ("wary__whoami", {}), answer_with="deny")
    assert len(done.asked) == 1 and "Not run" in done.results[0]


async def test_read_only_offers_only_read_only_tools(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    model = ScriptedModel(model=TEST_MODEL)
    home = tmp_path_factory.mktemp("read_only") / "home"
    servers = {"toy": toy(read_only_tools=["fail"])}  # the owner vouches for `fail`
    made = settings(home, servers, security={"autonomy": "read_only"}, agent=WHOLE)
    async for app in started(made, model):
        done = await turn(app, model, ("toy__whoami", {}), ("toy__write_note", {"text": "x"}))
        offered = {name for name in done.offered if name.startswith("toy__")}
        assert offered == {"toy__whoami", "toy__slow", "toy__big", "toy__fail"}
        assert "run " in done.results[0]
        assert "Unknown tool 'toy__write_note'" in done.results[1]
        assert not note(home, "toy").exists()


async def test_in_compact_mode_a_changed_tool_list_reaches_the_model_too(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Compact mode sends a copy of the tools with short schemas: it follows the server."""
    model = ScriptedModel(model=TEST_MODEL)
    home = tmp_path_factory.mktemp("compact") / "home"
    agent_settings = {**WHOLE, "prompt_mode": "compact"}
    made = settings(home, {"toy": toy()}, security={"autonomy": "full"}, agent=agent_settings)
    async for app in started(made, model):
        before = app.source.tools.names()
        assert "toy__door" not in before and "toy__whoami" in before
        await turn(app, model, ("toy__unlock", {}))  # (its last request may offer the door)
        await eventually(lambda s=app.source: "toy__door" in s.tools.names(), 10, "the door")
        after = await turn(app, model, ("toy__door", {}))
        assert "toy__door" in after.offered
        assert "the door is open" in after.results[0]
