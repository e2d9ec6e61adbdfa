"""The tool-call loop against the in-process model double: what goes back to the model, what
comes out."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakes.model_double import ScriptedModel, text, tool_calls

from agent.model.responses import ToolCall
from agent.runtime.one_shot import describe_event
from agent.security import Scrubber
from agent.turns.dispatch import XmlDispatcher
from agent.turns.loop import LoopOptions, run_tool, run_tool_call_loop
from tools.base import FunctionTool, ToolCallContext, ToolRegistry, ToolResult


async def echo(call: ToolCallContext, word: str, times: int = 1) -> ToolResult:
    """Repeat a word.

    Args:
        word: The word.
        times: How often.
    """
    return ToolResult.success(" ".join([word] * times))


async def nap(call: ToolCallContext, seconds: float) -> ToolResult:
    """Sleep, then say so.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return ToolResult.success(f"slept {seconds}")


async def explode(call: ToolCallContext) -> ToolResult:
    """Always raises."""
    raise RuntimeError("boom")


async def leak(call: ToolCallContext) -> ToolResult:
    """Prints a secret."""
    return ToolResult.success("token=sk-live-abcdefghijklmnopqrstuvwxyz")


REGISTRY = ToolRegistry([FunctionTool(f) for f in (echo, nap, explode, leak)])


class Lines:
    """A list that tools with effects change, for the calls a model makes again."""

    def __init__(self) -> None:
        self.held: list[str] = []

    async def add(self, call: ToolCallContext, line: str) -> ToolResult:
        """Add a line.

        Args:
            line: The line.
        """
        self.held.append(line)
        return ToolResult.success(f"added {line}, now {len(self.held)} lines")

    async def clear(self, call: ToolCallContext) -> ToolResult:
        """Clear the lines."""
        self.held.clear()
        return ToolResult.success("cleared")


HISTORY = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]


async def loop(model: ScriptedModel, **options: Any) -> Any:
    return await run_tool_call_loop(
        HISTORY,
        REGISTRY,
        model,
        context=ToolCallContext(Path(".")),
        options=LoopOptions(**{"max_iterations": 10, "tool_timeout_s": 5, **options}),
        scrub=Scrubber(),
    )


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_results_paired_with_calls_and_final_text(model: ScriptedModel) -> None:
    model.script(
        tool_calls(("echo", {"word": "hi", "times": 2}), ("echo", {"word": "yo"})), text("done")
    )
    result = await loop(model)
    assert result.text == "done" and result.stop_reason == "done"
    second = model.requests[1]["messages"]
    assistant = second[2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert [(m["tool_call_id"], m["content"]) for m in second[3:]] == [
        ("call_1", "hi hi"),
        ("call_2", "yo"),
    ]
    assert [m["role"] for m in result.new_messages] == ["assistant", "tool", "tool", "assistant"]
    assert HISTORY == [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]


async def test_calls_of_one_reply_run_concurrently(model: ScriptedModel) -> None:
    naps = [("nap", {"seconds": s}) for s in (0.4, 0.41, 0.42)]  # three calls: none the same
    model.script(tool_calls(*naps), text("rested"))
    started = time.perf_counter()
    result = await loop(model)
    assert result.text == "rested"
    assert time.perf_counter() - started < 1.1  # three 0.4 s naps side by side


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (("explode", {}), "Error: explode failed: RuntimeError: boom"),
        (("nope", {}), "Error: Unknown tool 'nope'. Available tools: echo, nap, explode, leak"),
        (("echo", '{"word": '), "Error: The arguments for echo are not valid JSON"),
        (("echo", {"times": "many"}), "Error: Invalid arguments for echo: word: Field required"),
        (("nap", {"seconds": 3}), "Error: nap timed out after 0.2 s"),
    ],
)
async def test_tool_trouble_becomes_an_error_result(
    model: ScriptedModel, call: tuple[str, Any], expected: str
) -> None:
    model.script(tool_calls(call), text("I saw the error"))
    result = await loop(model, tool_timeout_s=0.2)
    assert result.text == "I saw the error"
    [message] = tool_messages(model.requests[1])
    assert message["content"].startswith(expected), message["content"]


async def test_arguments_nested_too_deep_are_an_error_the_model_can_act_on() -> None:
    """A small model stuck repeating "[" in its call's arguments: json raises RecursionError,
    not a JSONDecodeError; the model is told its arguments are not JSON, as for any other."""
    call = ToolCall(id="c1", name="echo", arguments="[" * 1500)
    result = await run_tool(call, REGISTRY, ToolCallContext(Path(".")), 5)
    assert not result.ok
    assert result.output.startswith("The arguments for echo are not valid JSON (nested too deep")


async def test_secrets_in_tool_output_are_scrubbed(model: ScriptedModel) -> None:
    model.script(tool_calls(("leak", {})), text("ok"))
    await loop(model)
    [message] = tool_messages(model.requests[1])
    assert message["content"] == "token=[REDACTED]"


async def test_fourth_identical_call_is_refused_and_turn_ends(model: ScriptedModel) -> None:
    same = ("echo", {"word": "again"})
    model.script(*[tool_calls(same) for _ in range(4)], text("giving up"))
    result = await loop(model)
    assert result.stop_reason == "loop_detected"
    assert result.text == "giving up"
    last_tool = tool_messages(model.requests[4])[-1]
    assert "already called 3 times" in last_tool["content"]
    assert [e.ok for e in result.events] == [True, True, True, False]
    assert "tools" not in model.requests[4]


async def test_an_effect_asked_again_is_not_done_again(model: ScriptedModel) -> None:
    """Qwen2.5-Coder-1.5B scheduled "stretch" twice and edited a file twice (the second
    failing, and its error became the answer): a call with effects is not run again until
    another effect ran, and the model gets the first result back."""
    lines = Lines()
    tools = ToolRegistry(
        [FunctionTool(lines.add, writes=True), FunctionTool(lines.clear, writes=True)]
    )
    butter = ("add", {"line": "butter"})
    model.script(
        tool_calls(butter), tool_calls(butter, ("clear", {})), tool_calls(butter),
        text("Done: butter."),
    )  # fmt: skip
    result = await run_tool_call_loop(
        HISTORY, tools, model, context=ToolCallContext(Path(".")),
    )  # fmt: skip
    assert lines.held == ["butter"] and result.text == "Done: butter."
    assert result.stop_reason == "done"
    assert [e.ok for e in result.events] == [True, False, True, True]
    assert describe_event(result.events[1]) == '  tool add(line="butter") skipped 0.00 s'
    again = tool_messages(model.requests[2])[-2]
    assert again["content"].startswith("added butter, now 1 lines\n\n(Not run again: this")


async def test_a_reply_that_only_asks_again_is_answered_by_its_result(
    model: ScriptedModel,
) -> None:
    """Asked again for its edit alone, the same model answered the note with "the previous
    command was already run and did not change the file", or "I'm sorry, but I can't assist
    with that": the turn ends on what the edit returned, with no further model call."""
    lines = Lines()
    tools = ToolRegistry([FunctionTool(lines.add, writes=True)])
    butter = ("add", {"line": "butter"})
    model.script(tool_calls(butter), tool_calls(butter))  # the fixture: nothing left unasked
    result = await run_tool_call_loop(HISTORY, tools, model, context=ToolCallContext(Path(".")))
    assert lines.held == ["butter"] and len(model.requests) == 2
    assert result.text == (
        "(add ran; the model asked for it again, and it was not run twice. What it returned:)\n"
        "added butter, now 1 lines"
    )
    assert result.new_messages[-1] == {"role": "assistant", "content": result.text}


async def test_a_refusal_after_a_read_made_twice_shows_what_it_read(model: ScriptedModel) -> None:
    """The same model read lines.txt twice, then: "I'm sorry, but I didn't receive any input"."""
    hi = ("echo", {"word": "hi", "times": 2})
    model.script(tool_calls(hi), tool_calls(hi), text("I'm sorry, but I didn't receive any input."))
    result = await loop(model)
    assert result.text.endswith("but echo had run. What it returned:)\nhi hi")


async def test_a_refusal_with_no_call_asked_again_is_shown_as_said(model: ScriptedModel) -> None:
    model.script(tool_calls(("echo", {"word": "hi"})), text("Sorry, I can't help with that."))
    result = await loop(model)
    assert result.text == "Sorry, I can't help with that."


async def test_iteration_limit_then_one_answer_without_tools(model: ScriptedModel) -> None:
    model.script(*[tool_calls(("echo", {"word": str(i)})) for i in range(3)], text("summary"))
    result = await loop(model, max_iterations=3)
    assert result.stop_reason == "iteration_limit"
    assert result.text == "summary"
    final = model.requests[3]
    assert "tools" not in final
    assert final["messages"][-1]["role"] == "user"


async def test_parallel_calls_count_one_by_one_against_the_caps(model: ScriptedModel) -> None:
    """A reply of 25 calls runs 8; the turn stops at 12 run calls, whatever the replies."""
    ran: list[str] = []

    async def count(call: ToolCallContext, n: int) -> ToolResult:
        """Count a call.

        Args:
            n: Its number.
        """
        ran.append(str(n))
        return ToolResult.success(f"#{n}")

    tools = ToolRegistry([FunctionTool(count)])
    burst = tool_calls(*[("count", {"n": n}) for n in range(25)])
    model.script(burst, tool_calls(*[("count", {"n": 100 + n}) for n in range(6)]), text("done"))
    result = await run_tool_call_loop(
        HISTORY,
        tools,
        model,
        context=ToolCallContext(Path(".")),
        options=LoopOptions(max_calls_per_reply=8, max_calls_per_turn=12),
    )
    assert ran == [*map(str, range(8)), "100", "101", "102", "103"]
    assert result.stop_reason == "call_limit" and result.text == "done"
    first = tool_messages(model.requests[1])
    assert [m["content"] for m in first[:8]] == [f"#{n}" for n in range(8)]
    assert all(m["content"].startswith("Error: Not run: at most 8 tool calls") for m in first[8:])
    assert len(first) == 25  # every call answered, run or not
    assert "tools" not in model.requests[2]  # past the turn's cap: an answer, no more tools


@pytest.mark.parametrize("dispatcher", [None, XmlDispatcher()], ids=["native", "xml"])
async def test_the_same_call_written_three_times_in_one_reply_runs_once(
    model: ScriptedModel, dispatcher: Any
) -> None:
    """Qwen2.5-Coder-1.5B wrote file_write three times in one reply: it runs once, and the
    next request shows one call and one result (three would read as three questions)."""
    lines = Lines()
    same = '{"name": "add", "arguments": {"line": "butter"}}'
    other = '{"name": "add", "arguments": {"line": "milk"}}'
    if dispatcher:
        reply = text(
            "Adding.\n"
            + "\n".join(f"<tool_call>{c}</tool_call>" for c in (same, same, other, same))
        )
    else:
        reply = tool_calls(*[("add", {"line": w}) for w in ("butter", "butter", "milk", "butter")])
    model.script(reply, text("Both noted."))
    result = await run_tool_call_loop(
        HISTORY,
        ToolRegistry([FunctionTool(lines.add, writes=True)]),
        model,
        context=ToolCallContext(Path(".")),
        dispatcher=dispatcher,
    )
    assert lines.held == ["butter", "milk"] and result.text == "Both noted."
    assert [e.ok for e in result.events] == [True, True]
    sent = model.requests[1]["messages"]
    if dispatcher:
        assert sent[2]["content"].count("<tool_call>") == 2 and "Adding." in sent[2]["content"]
        assert sent[3]["content"].count("<tool_result") == 2
    else:
        assert [c["function"]["arguments"] for c in sent[2]["tool_calls"]] == [
            '{"line": "butter"}',
            '{"line": "milk"}',
        ]
        assert [m["content"] for m in tool_messages(model.requests[1])] == [
            "added butter, now 1 lines",
            "added milk, now 2 lines",
        ]


@pytest.mark.parametrize("dispatcher", [None, XmlDispatcher()], ids=["native", "xml"])
async def test_a_call_written_as_text_after_the_loop_stops_never_reaches_the_user(
    model: ScriptedModel, dispatcher: Any
) -> None:
    """A small model repeats a call, is stopped, then writes the call once more as text: the
    user gets the last result and why it stopped, not the raw call."""
    same = ("echo", {"word": "notes.txt"})
    replies = (
        [text('<tool_call>{"name": "echo", "arguments": {"word": "notes.txt"}}</tool_call>')]
        if dispatcher
        else [tool_calls(same)]
    )
    model.script(*(replies * 4), text('{"name": "echo", "arguments": {"word": "notes.txt"}}'))
    result = await run_tool_call_loop(
        HISTORY,
        REGISTRY,
        model,
        context=ToolCallContext(Path(".")),
        dispatcher=dispatcher,
    )
    assert result.stop_reason == "loop_detected"
    assert result.text == (
        "(I stopped: the same tool call came again with the same arguments. What echo "
        "returned last:)\nnotes.txt"
    )
    assert '"name"' not in result.text
    assert result.new_messages[-1] == {"role": "assistant", "content": result.text}


@pytest.mark.parametrize("dispatcher", [None, XmlDispatcher()], ids=["native", "xml"])
async def test_a_call_that_fits_no_tool_twice_never_reaches_the_user_raw(
    model: ScriptedModel, dispatcher: Any
) -> None:
    """A small model answers with a call to a tool that is not there (a typo), is told, and
    writes it again: the user gets a plain note, not the call."""
    raw = '{"name": "ech", "arguments": {"word": "notes.txt"}}'
    model.script(text(raw), text(raw))
    result = await run_tool_call_loop(
        HISTORY, REGISTRY, model, context=ToolCallContext(Path(".")), dispatcher=dispatcher
    )
    assert (
        result.text == "(Note: a tool call was written that fits no tool here, so it was not run.)"
    )
    assert not result.events  # nothing ran
    assert "that looked like a tool call" in str(model.requests[1]["messages"])  # told once
    assert result.new_messages[-1] == {"role": "assistant", "content": result.text}


async def test_xml_dispatcher_runs_tool_calls_written_as_text(model: ScriptedModel) -> None:
    model.script(
        text(
            'Let me check.\n<tool_call>{"name": "echo", "arguments": {"word": "xml"}}'
            "</tool_call>\n<tool_call>{not json}</tool_call>"
        ),
        text("The tool said xml."),
    )
    result = await run_tool_call_loop(
        HISTORY,
        REGISTRY,
        model,
        context=ToolCallContext(Path(".")),
        dispatcher=XmlDispatcher(),
    )
    assert result.text == "The tool said xml."
    first, second = model.requests
    assert "tools" not in first
    feedback = second["messages"][-1]
    assert feedback["role"] == "user"
    assert '<tool_result name="echo">\nxml\n</tool_result>' in feedback["content"]
    assert "tool call 2 is not valid JSON" in feedback["content"]
    assert json.loads(json.dumps(second["messages"]))  # plain JSON all the way
