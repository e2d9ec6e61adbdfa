"""Only pinclaw writes tool results, and the user never gets an empty answer: slips fed
through the in-process model double, the real loop and tools; then `agent run -m` as a user
runs it, against the fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon_process import agent as run_agent
from fakes.llm_server import FakeLLM
from fakes.model_double import ScriptedModel, text
from test_tool_call_text import FENCE, World, make_world, run

from agent.turns.dispatch import XmlDispatcher

NO_TOOL_NOTE = "(Note: no tool ran for this answer, so nothing in it was done or checked.)"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


async def test_a_result_the_model_wrote_is_re_asked_then_the_tool_really_runs(
    model: ScriptedModel, world: World
) -> None:
    made_up = (
        '<tool_result name="memory_store">\nStored.\n</tool_result>\n'
        "I have remembered that your favourite colour is blue."
    )
    model.script(
        text(made_up),
        text(
            '<tool_call>{"name": "memory_store", "arguments": '
            '{"content": "Favourite colour: blue"}}</tool_call>'
        ),
        text("Remembered: your favourite colour is blue."),
    )
    result = await run(model, world, XmlDispatcher())
    assert result.text == "Remembered: your favourite colour is blue."
    assert "Favourite colour: blue" in await world.memories("favourite colour")
    slip, correction = model.requests[1]["messages"][-2:]
    assert slip == {"role": "assistant", "content": made_up}
    assert correction["role"] == "user"
    assert "(<tool_result>) that you wrote yourself" in correction["content"]
    assert all("Stored." not in str(m.get("content")) for m in result.new_messages)


async def test_a_result_written_twice_is_cut_out_and_the_answer_marked(
    model: ScriptedModel, world: World
) -> None:
    model.script(
        text('{"tool_result": {"command": "date", "output": "Thu Nov 26 09:00 2026"}}'),
        text('It is Thursday morning.\n{"tool_result": {"output": "Thu Nov 26 09:00 2026"}}'),
    )
    result = await run(model, world)
    assert result.text == f"It is Thursday morning.\n\n{NO_TOOL_NOTE}"
    assert len(model.requests) == 2 and result.events == []
    assert result.new_messages == [{"role": "assistant", "content": result.text}]


async def test_a_result_nested_too_deep_written_twice_is_cut_out(
    model: ScriptedModel, world: World
) -> None:
    """A made-up result of 1,500 "[": json raises RecursionError; its line is cut all the
    same, never "an internal error"."""
    slip = 'It is Thursday morning.\n{"tool_result": ' + "[" * 1500
    model.script(text(slip), text(slip))
    result = await run(model, world)
    assert result.text == f"It is Thursday morning.\n\n{NO_TOOL_NOTE}"


async def test_a_result_line_written_twice_is_cut_out(model: ScriptedModel, world: World) -> None:
    slip = "Tool result: exit code 0 (no output)\nThe folder is empty."
    model.script(text(slip), text(slip))
    result = await run(model, world)
    assert result.text == f"The folder is empty.\n\n{NO_TOOL_NOTE}"


@pytest.mark.parametrize(
    "claim",
    [
        "I wrote the file notes.txt with milk in it.",
        "I have saved it.",
        "I listed the files: a.txt and b.txt.",
        "I ran `date`: it is 9 am.",
        "Done, the file now contains milk.",
        "Your note has been saved.",
        "To remind you to stretch in 10 minutes, I have scheduled a task for you.",  # Qwen's
    ],
)
async def test_an_action_claimed_with_no_call_is_re_asked(
    model: ScriptedModel, world: World, claim: str
) -> None:
    model.script(text(claim), text(FENCE), text("Saved milk to notes.txt."))
    result = await run(model, world)
    assert world.file("notes.txt") == "milk"
    assert result.text == "Saved milk to notes.txt."
    slip, correction = model.requests[1]["messages"][-2:]
    assert slip == {"role": "assistant", "content": claim}
    assert correction["content"].startswith("pinclaw: no tool ran in this turn")
    assert claim not in [m.get("content") for m in result.new_messages]


async def test_an_action_claimed_twice_reaches_the_user_with_a_note(
    model: ScriptedModel, world: World
) -> None:
    model.script(text("I have saved it."), text("Done. I saved your note to notes.txt."))
    result = await run(model, world)
    assert result.text == f"Done. I saved your note to notes.txt.\n\n{NO_TOOL_NOTE}"
    assert world.file("notes.txt") is None and len(model.requests) == 2


# What Qwen2.5-Coder-1.5B answered, no tool run, to "Which files are in the folder called docs?"
MADE_UP_LISTING = '```json\n{\n  "files": [\n    "docs/file1.md",\n    "docs/file2.md"\n  ]\n}\n```'
LIST_DOCS = '{"name": "file_list", "arguments": {"path": "docs"}}'


async def test_a_listing_made_up_as_json_is_re_asked_then_the_tool_really_runs(
    model: ScriptedModel, world: World
) -> None:
    (world.workspace / "docs").mkdir()
    (world.workspace / "docs" / "alpha.txt").write_text("a")
    model.script(text(MADE_UP_LISTING), text(LIST_DOCS), text("docs holds alpha.txt."))
    result = await run(model, world, asked="Which files are in the folder called docs?")
    assert result.text == "docs holds alpha.txt."
    correction = model.requests[1]["messages"][-1]
    assert correction["content"].startswith("pinclaw: your reply is only JSON, and no tool ran")
    [listed] = [m for m in model.requests[2]["messages"] if m["role"] == "tool"]
    assert "alpha.txt" in listed["content"] and "file1.md" not in listed["content"]


async def test_json_sent_again_reaches_the_user_with_a_note(
    model: ScriptedModel, world: World
) -> None:
    model.script(text(MADE_UP_LISTING), text(MADE_UP_LISTING))
    result = await run(model, world, asked="Which files are in the folder called docs?")
    assert result.text == f"{MADE_UP_LISTING}\n\n{NO_TOOL_NOTE}" and len(model.requests) == 2


async def test_json_asked_for_is_the_answer(model: ScriptedModel, world: World) -> None:
    reply = '```json\n{"name": "Ada", "age": 36, "langs": ["en"]}\n```'
    model.script(text(reply))
    result = await run(model, world, asked="Show Ada as JSON.")
    assert result.text == reply and result.events == [] and len(model.requests) == 1
    assert list(world.workspace.glob("*.txt")) == []


async def test_claims_after_a_tool_ran_and_plain_answers_are_left_alone(
    model: ScriptedModel, world: World
) -> None:
    model.script(text(FENCE), text("I wrote the file notes.txt."))
    assert (await run(model, world)).text == "I wrote the file notes.txt."
    model.script(text("Which file should I write the note to?"))
    assert (await run(model, world)).text == "Which file should I write the note to?"
    assert len(model.requests) == 3


async def test_an_empty_reply_after_tools_is_re_asked_then_accounted_for(
    model: ScriptedModel, world: World
) -> None:
    model.script(text(FENCE), text("\n"), text("```"))  # a bare fence says nothing either
    result = await run(model, world)
    assert result.text == "(No answer from the model. Tools run: file_write ok.)"
    assert len(model.requests) == 3
    retry = model.requests[2]["messages"]
    assert retry[-2]["role"] == "tool" and retry[-1]["role"] == "user"
    assert (
        retry[-1]["content"] == "pinclaw: your reply was empty. Answer the user now, in plain text."
    )
    assert result.new_messages[-1] == {"role": "assistant", "content": result.text}


async def test_an_empty_reply_is_asked_again_once(model: ScriptedModel, world: World) -> None:
    model.script(text(""), text("Hello! What can I do?"))
    result = await run(model, world)
    assert result.text == "Hello! What can I do?"
    retry = model.requests[1]["messages"]
    assert [m["role"] for m in retry] == ["system", "user"]  # roles still alternate
    assert retry[1]["content"].startswith("do it\n\npinclaw: your reply was empty.")


async def test_an_empty_wrap_up_is_accounted_for(model: ScriptedModel, world: World) -> None:
    model.script(text(FENCE), text(""))
    result = await run(model, world, max_iterations=1)
    assert result.stop_reason == "iteration_limit"
    assert result.text == "(No answer from the model. Tools run: file_write ok.)"


def test_what_the_terminal_shows(llm_env: dict[str, str], fake_llm: FakeLLM, home: Path) -> None:
    fake_llm.script(text(FENCE), text("Noted: milk."))
    result = run_agent("run", "-m", "Put milk on my notes", env=llm_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Noted: milk.\n"
    assert (home / "workspace" / "notes.txt").read_text() == "milk"
    assert "tool file_write(" in result.stderr and "done; 1 tool calls" in result.stderr
    fake_llm.script(text(FENCE.replace("notes", "eggs")), text("\n"), text(""))
    result = run_agent("run", "-m", "Now eggs", env=llm_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(No answer from the model. Tools run: file_write ok.)\n"
    assert (home / "workspace" / "eggs.txt").read_text() == "milk"
