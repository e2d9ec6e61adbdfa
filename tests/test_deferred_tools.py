"""Many tools, a small prompt: fifty MCP-like deferrable tools (tests/fakes/many_tools.py)
beside the real default tools, a turn of the real TurnRunner and prompt source, and what
each request to the model held — over the wire to the fake provider through LiteLLM for
the first request's size, with the in-process double for the turns the model scripts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import TEST_MODEL
from fakes.llm_server import FakeLLM
from fakes.many_tools import McpLikeTool, many_tools
from fakes.model_double import ScriptedModel, text, tool_calls

from agent.app import build_tools, prompt_source
from agent.config import load_settings
from agent.durable.learned_model_facts import LearnedModelFacts
from agent.model.client import LLMClient
from agent.model.profiles.litellm_facts import count_tokens
from agent.model.responses import Message, ModelClient
from agent.prompt.context import ToolInfo
from agent.prompt.deferred_tools import best_matches, one_line
from agent.security import Scrubber
from agent.turns.turn import TurnOutcome, TurnRunner
from agent.workspace import ensure_workspace
from channels.base import ChatRef, IncomingMessage
from channels.terminal import TerminalChannel
from tools.base import ToolCallContext, ToolRegistry
from tools.policy import SecurityPolicy

LOADERS = ["find_tools", "load_tool"]
ISSUE = {"owner": "octo", "repo": "lamp", "title": "The lamp flickers"}


def runner(
    extra: list[McpLikeTool],
    llm: ModelClient,
    monkeypatch: pytest.MonkeyPatch,
    **agent: str,
) -> TurnRunner:
    """A terminal TurnRunner over the default tools and `extra`, with `[agent]` settings
    given through the environment as an owner would (PINCLAW_AGENT__...); the full prompt
    unless one says otherwise (a model on 127.0.0.1 would get the compact one)."""
    for key, value in {"prompt_mode": "full", **agent}.items():
        monkeypatch.setenv(f"PINCLAW_AGENT__{key.upper()}", value)
    settings = load_settings()
    ensure_workspace(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(
        settings.security, settings.workspace_dir, home=settings.home
    )
    tools = ToolRegistry([*build_tools(settings, policy), *extra])
    return TurnRunner(
        TerminalChannel(),
        source=prompt_source(settings, tools, policy),
        llm=llm,
        quirks=LearnedModelFacts(),
        scrub=Scrubber(),
    )


async def turn(run: TurnRunner, said: str, prior: list[Message] | None = None) -> TurnOutcome:
    message = IncomingMessage(ChatRef("cli", "owner"), "owner", "owner", said)
    context = ToolCallContext(run.source.workspace)
    return await run.run(message, prior or [], context, deadline_s=30)


def core(run: TurnRunner) -> list[str]:
    """The names of the tools that are not deferrable (shell, files, memory...)."""
    return [t.name for t in run.source.tools.offered() if not getattr(t, "deferrable", False)]


def names(request: dict[str, Any]) -> list[str]:
    return [schema["function"]["name"] for schema in request.get("tools", [])]


def offered(request: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [s["function"] for s in request["tools"] if s["function"]["name"] == name]
    return found


def results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def first_request_tokens(request: dict[str, Any]) -> int:
    """The system prompt, `tools=` and the user's message, by LiteLLM's counter."""
    messages = request["messages"]
    said = "\n".join(str(m["content"]) for m in messages)
    return count_tokens(TEST_MODEL, said) + count_tokens(TEST_MODEL, json.dumps(request["tools"]))


# -- the first request ------------------------------------------------------------------


async def test_fifty_mcp_tools_keep_the_compact_first_request_within_2500_tokens(
    llm_env: dict[str, str], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = many_tools(50)
    run = runner(tools, LLMClient(load_settings().llm), monkeypatch, prompt_mode="compact")
    outcome = await turn(run, "hello")
    assert outcome.status == "done"
    [request] = fake_llm.requests  # as it went over the wire
    assert names(request) == [*core(run), *LOADERS]
    assert first_request_tokens(request) <= 2_500
    system = request["messages"][0]["content"]
    for server in ("github__", "filesystem__", "git__", "time__"):  # too many for a line each
        assert f"\n- {server}: " in system
    assert "create_pull_request_review" in system and "Title of the issue" not in system


async def test_deferral_costs_a_tenth_of_sending_fifty_schemas_whole_in_full_mode(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = {}
    for label, extra, budget in (
        ("none", [], "1500"),
        ("deferred", many_tools(50), "1500"),
        ("whole", many_tools(50), "0"),  # 0: never deferred
    ):
        run = runner(extra, model, monkeypatch, tool_schema_budget_tokens=budget)
        await turn(run, "hello")
        sizes[label] = first_request_tokens(model.requests[-1])
    added, whole = sizes["deferred"] - sizes["none"], sizes["whole"] - sizes["none"]
    assert 0 < added * 10 < whole, sizes


async def test_ten_tools_get_a_line_each_with_what_they_do(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = many_tools(10)
    await turn(runner(tools, model, monkeypatch), "hello")
    system = model.requests[0]["messages"][0]["content"]
    assert "### Tools to Load First" in system
    assert "\n- github__create_issue: Open a new issue in a GitHub repository\n" in system
    assert all(f"\n- {tool.name}: " in system for tool in tools)
    assert "github__create_issue" not in names(model.requests[0])


# -- a turn that finds, loads and calls ---------------------------------------------------


async def test_find_then_load_then_call_a_tool_in_one_turn(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = many_tools(50)
    issue = next(tool for tool in tools if tool.name == "github__create_issue")
    model.script(
        tool_calls(("find_tools", {"query": "open an issue on github"})),
        tool_calls(("load_tool", {"name": "github__create_issue"})),
        tool_calls(("github__create_issue", ISSUE)),
        text("Opened the issue."),
    )
    outcome = await turn(runner(tools, model, monkeypatch), "file a bug about the lamp")
    assert outcome.text == "Opened the issue."
    found, loaded, ran, answered = model.requests
    assert "github__create_issue" not in names(found) + names(loaded)
    assert "- github__create_issue: Open a new issue in a GitHub repository" in results(loaded)[0]
    assert names(ran)[-1] == "github__create_issue"  # sent from the request after load_tool
    assert offered(ran, "github__create_issue")["parameters"] == issue.parameters
    assert offered(answered, "github__create_issue")["parameters"] == issue.parameters
    assert '"title":{"type":"string","description":"Title of the issue"}' in results(ran)[-1]
    assert issue.calls == [ISSUE]  # the tool itself ran
    assert results(answered)[-1].startswith("github__create_issue ran with")
    # The next turn starts from the short list again; what was loaded lived in the turn.
    model.script(text("ok"))
    await turn(runner(tools, model, monkeypatch), "thanks")
    assert "github__create_issue" not in names(model.requests[-1])


async def test_a_deferred_tool_called_without_loading_still_runs(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = many_tools(50)
    status = next(tool for tool in tools if tool.name == "git__git_status")
    model.script(tool_calls(("git__git_status", {"repo_path": "."})), text("Clean."))
    outcome = await turn(runner(tools, model, monkeypatch), "is my repo clean?")
    assert outcome.text == "Clean." and status.calls == [{"repo_path": "."}]
    assert all("git__git_status" not in names(request) for request in model.requests)
    assert results(model.requests[1]) == ['git__git_status ran with {"repo_path": "."}']


async def test_unknown_names_and_queries_get_an_answer_the_model_can_act_on(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.script(
        tool_calls(("load_tool", {"name": "github__make_issue"})),
        tool_calls(("find_tools", {"query": "weather forecast"})),
        tool_calls(("load_tool", {"name": "shell, git__git_log"})),
        text("done"),
    )
    await turn(runner(many_tools(50), model, monkeypatch), "try things")
    [unknown] = results(model.requests[1])
    assert unknown.startswith("Error: No tool is named 'github__make_issue'. Did you mean ")
    assert "github__create_issue" in unknown
    [nothing] = results(model.requests[2])[-1:]
    assert nothing.startswith("No tool to load matches 'weather forecast'")
    mixed = results(model.requests[3])[-1]
    assert "shell needs no loading: call it directly." in mixed and "Loaded git__git_log" in mixed
    assert names(model.requests[3])[-1] == "git__git_log"


# -- nothing changes without a reason to defer --------------------------------------------


@pytest.mark.parametrize(
    ("extra", "agent"),
    [
        (many_tools(50)[-2:], {}),  # two small tools: cheaper sent whole than listed
        (many_tools(50), {"tool_schema_budget_tokens": "0"}),  # the owner turned it off
        (many_tools(50), {"tool_schema_budget_tokens": "100000"}),  # under the budget
    ],
)
async def test_under_the_budget_every_schema_goes_whole_as_before(
    model_env: dict[str, str],
    model: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    extra: list[McpLikeTool],
    agent: dict[str, str],
) -> None:
    run = runner(extra, model, monkeypatch, **agent)
    await turn(run, "hello")
    [request] = model.requests
    assert request["tools"] == json.loads(json.dumps(run.source.tools.schemas()))
    assert names(request)[-len(extra) :] == [tool.name for tool in extra]
    system = request["messages"][0]["content"]
    assert "load_tool" not in system and "find_tools" not in system
    assert "Tools to Load First" not in system  # each described by its schema alone


async def test_without_deferrable_tools_the_prompt_and_schemas_are_unchanged(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = many_tools(50)
    for tool in plain:
        tool.deferrable = False  # built-in tools never are
    run = runner(plain, model, monkeypatch)
    await turn(run, "hello")
    assert names(model.requests[0]) == [tool.name for tool in run.source.tools.offered()]
    assert "load_tool" not in model.requests[0]["messages"][0]["content"]


# -- the text protocol ----------------------------------------------------------------------


async def test_with_the_text_protocol_load_tool_returns_the_schema_in_its_result(
    model_env: dict[str, str], model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = many_tools(50)
    issue = next(tool for tool in tools if tool.name == "github__create_issue")
    call = {"name": "github__create_issue", "arguments": ISSUE}
    model.script(
        text('<tool_call>{"name": "load_tool", "arguments": {"name": "create_issue"}}</tool_call>'),
        text(f"<tool_call>{json.dumps(call)}</tool_call>"),
        text("Opened."),
    )
    outcome = await turn(runner(tools, model, monkeypatch, tool_dispatcher="xml"), "file a bug")
    assert outcome.text == "Opened." and issue.calls == [ISSUE]
    first, loaded, ran = model.requests
    assert all("tools" not in request for request in model.requests)
    system = first["messages"][0]["content"]
    assert "- **load_tool**: " in system and '"name":{"description":"The tool' in system
    assert "\n- github__: create_issue, " in system and "Title of the issue" not in system
    answer = loaded["messages"][-1]["content"]  # a user message with the tool results
    assert answer.startswith('<tool_result name="load_tool">\nLoaded github__create_issue;')
    assert '"description":"Title of the issue"' in answer
    assert ran["messages"][-1]["content"].startswith(
        '<tool_result name="github__create_issue">\ngithub__create_issue ran with'
    )


def test_find_tools_ranks_words_of_the_name_first_and_lines_are_short() -> None:
    infos = [ToolInfo(tool.name, one_line(tool.description)) for tool in many_tools(50)]
    found = [info.name for info in best_matches("read file", infos)]
    assert found[0] == "filesystem__read_text_file" and len(found) == 5
    assert best_matches("git status", infos)[0].name == "git__git_status"
    assert best_matches("", infos) == [] and best_matches("zzz", infos) == []
    long = one_line("word " * 60)
    assert len(long) <= 80 and long.endswith("…")
