"""Tool calls written as text, however a model writes them: real outputs fed through the
in-process model double as plain content (no tool_calls), driving the real loop and tools
(LiteLLM's own part, reasoning kept apart, through the fake provider).

The first rows are what Qwen2.5-Coder-1.5B on llama-server really wrote (issue 23, its
arguments adapted to our tools); the others follow the public chat templates and the
tool parsers of llama.cpp and vLLM, named in agent/model/profiles/text_call_formats.py's
FORMATS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from fakes.llm_server import FakeLLM, tool_results
from fakes.model_double import ScriptedModel, text

from agent.app import build_tools
from agent.config import LLMSettings, Settings
from agent.model.client import LLMClient
from agent.model.responses import ModelClient
from agent.turns.dispatch import Dispatcher, XmlDispatcher
from agent.turns.loop import LoopOptions, TurnResult, run_tool_call_loop
from tools.base import ToolCallContext, ToolRegistry
from tools.policy import SecurityPolicy

HISTORY = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]


@dataclass
class World:
    workspace: Path
    tools: ToolRegistry
    context: ToolCallContext

    def file(self, name: str) -> str | None:
        path = self.workspace / name
        return path.read_text() if path.exists() else None

    async def memories(self, query: str) -> str:
        recall = self.tools.get("memory_recall")
        assert recall is not None
        return (await recall.run({"query": query}, self.context)).output


def make_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    """Every real tool of a default configuration, its workspace in `tmp_path`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real-0000")
    settings = Settings()
    settings._home = tmp_path
    workspace = settings.workspace_dir
    workspace.mkdir(parents=True, exist_ok=True)
    tools = build_tools(settings, SecurityPolicy.from_settings(settings.security, workspace))
    return World(workspace, tools, ToolCallContext(workspace, chat_key="cli:test"))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


async def run(
    model: ModelClient,
    world: World,
    dispatcher: Dispatcher | None = None,
    max_iterations: int = 6,
    on_text: Callable[[str], None] | None = None,
    asked: str = "do it",
) -> TurnResult:
    return await run_tool_call_loop(
        [HISTORY[0], {"role": "user", "content": asked}],
        world.tools,
        model,
        context=world.context,
        dispatcher=dispatcher,
        options=LoopOptions(max_iterations=max_iterations, tool_timeout_s=30),
        on_text=on_text,
    )


FENCE = (
    '```json\n{"name": "file_write", "arguments": {"path": "notes.txt", "content": "milk"}}\n```'
)
PROSE_FENCE = (
    "I used `file_write` to save it:\n```json\n"
    '{"name": "file_write", "arguments": {"path": "a.txt", "content": "x"}}\n```'
)
WRITES = [  # (reply as the model wrote it, files it must leave behind, narration kept)
    pytest.param(FENCE, {"notes.txt": "milk"}, "", id="qwen-json-fence"),
    pytest.param(PROSE_FENCE, {"a.txt": "x"}, "I used `file_write` to save it:", id="qwen-prose"),
    pytest.param(
        '```\n{"name": "file_write", "arguments": {"path": "p.txt", "content": "plain"}}\n```',
        {"p.txt": "plain"},
        "",
        id="plain-fence",
    ),
    pytest.param(
        'Let me save that.\n<tool_call>\n{"name": "file_write", "arguments": '
        '{"path": "h.txt", "content": "hermes"}}\n</tool_call>',
        {"h.txt": "hermes"},
        "Let me save that.",
        id="hermes-in-text",
    ),
    pytest.param(
        '{"name": "file_write", "parameters": {"path": "l.txt", "content": "llama"}}',
        {"l.txt": "llama"},
        "",
        id="llama-parameters",
    ),
    pytest.param(
        '<|python_tag|>{"name": "file_write", "parameters": {"path": "t1.txt", "content": "1"}}; '
        '{"name": "file_write", "parameters": {"path": "t2.txt", "content": "2"}}<|eom_id|>',
        {"t1.txt": "1", "t2.txt": "2"},
        "",
        id="llama-python-tag-two",
    ),
    pytest.param(
        '[TOOL_CALLS][{"name": "file_write", "arguments": {"path": "m.txt", "content": "v3"}}]',
        {"m.txt": "v3"},
        "",
        id="mistral-list",
    ),
    pytest.param(
        '[TOOL_CALLS]file_write{"path": "m11.txt", "content": "v11"}',
        {"m11.txt": "v11"},
        "",
        id="mistral-v11",
    ),
    pytest.param(
        '[TOOL_CALLS]file_write[ARGS]{"path": "m13.txt", "content": "v13"}',
        {"m13.txt": "v13"},
        "",
        id="mistral-args",
    ),
    pytest.param(
        'file_write(path="py.txt", content="kwargs")', {"py.txt": "kwargs"}, "", id="call-syntax"
    ),
    pytest.param(
        'file_write({"path": "d.txt", "content": "dict"})',
        {"d.txt": "dict"},
        "",
        id="call-with-json",
    ),
    pytest.param(
        '[file_write(path="g1.txt", content="a"), file_write(path="g2.txt", content="b")]',
        {"g1.txt": "a", "g2.txt": "b"},
        "",
        id="pythonic-list",
    ),
    pytest.param(
        '```tool_code\nfile_write(path="gemma.txt", content="gemma")\n```',
        {"gemma.txt": "gemma"},
        "",
        id="gemma-tool-code",
    ),
    pytest.param(
        '{"function": {"name": "file_write", "arguments": '
        '"{\\"path\\": \\"o.txt\\", \\"content\\": \\"openai\\"}"}}',
        {"o.txt": "openai"},
        "",
        id="openai-shape-string-args",
    ),
    pytest.param(
        '{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "file_write", '
        '"arguments": "{\\"path\\": \\"tc.txt\\", \\"content\\": \\"msg\\"}"}}]}',
        {"tc.txt": "msg"},
        "",
        id="openai-message",
    ),
    pytest.param(
        '[{"name": "file_write", "arguments": {"path": "l1.txt", "content": "1"}}, '
        '{"name": "file_write", "arguments": {"path": "l2.txt", "content": "2"}}]',
        {"l1.txt": "1", "l2.txt": "2"},
        "",
        id="list-of-calls",
    ),
    pytest.param(
        'First the list:\n```json\n{"name": "file_write", "arguments": {"path": "s1.txt", '
        '"content": "1"}}\n```\nThen the copy:\n```tool_call\n{"name": "file_write", '
        '"arguments": {"path": "s2.txt", "content": "2"}}\n```\nBoth are saved now.',
        {"s1.txt": "1", "s2.txt": "2"},
        "First the list:\n\nThen the copy:",
        id="several-calls",
    ),
    pytest.param(
        '<|tool_call|>{"name": "file_write", "arguments": {"path": "phi.txt", "content": "4"}}'
        "<|/tool_call|>",
        {"phi.txt": "4"},
        "",
        id="phi4-mini",
    ),
    pytest.param(
        'functools[{"name": "file_write", "arguments": {"path": "ft.txt", "content": "phi"}}]',
        {"ft.txt": "phi"},
        "",
        id="phi4-functools",
    ),
    pytest.param(
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>file_write\n```json\n"
        '{"path": "ds3.txt", "content": "v3"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        {"ds3.txt": "v3"},
        "",
        id="deepseek-v3",
    ),
    pytest.param(
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>file_write<｜tool▁sep｜>"
        '{"path": "ds31.txt", "content": "v31"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        {"ds31.txt": "v31"},
        "",
        id="deepseek-v3.1",
    ),
    pytest.param(
        "<tool_call>file_write\n<arg_key>path</arg_key>\n<arg_value>glm.txt</arg_value>\n"
        "<arg_key>content</arg_key>\n<arg_value>glm</arg_value>\n</tool_call>",
        {"glm.txt": "glm"},
        "",
        id="glm-4.5",
    ),
    pytest.param(
        "<tool_call>\n<function=file_write>\n<parameter=path>\nqc.txt\n</parameter>\n"
        "<parameter=content>\ncoder\n</parameter>\n</function>\n</tool_call>",
        {"qc.txt": "coder"},
        "",
        id="qwen3-coder",
    ),
]


@pytest.mark.parametrize(("reply", "files", "narration"), WRITES)
async def test_a_call_written_as_text_runs_like_a_native_one(
    model: ScriptedModel, world: World, reply: str, files: dict[str, str], narration: str
) -> None:
    model.script(text(reply), text("Saved as asked."))
    result = await run(model, world)
    assert {name: world.file(name) for name in files} == files
    assert result.text == "Saved as asked." and result.stop_reason == "done"
    assert [e.name for e in result.events] == ["file_write"] * len(files)
    second = model.requests[1]["messages"]
    assistant, *results = second[2:]
    assert assistant.get("content") == (narration or None)
    ids = [call["id"] for call in assistant["tool_calls"]]
    assert [m["tool_call_id"] for m in results] == ids and len(set(ids)) == len(files)
    assert all(i.isalnum() and len(i) == 9 for i in ids)  # even Mistral takes them
    assert all(m["content"].startswith("Wrote ") for m in results)


@pytest.mark.parametrize("first", [FENCE, '{"name": "file_write", "arguments": {}}'])
async def test_a_call_written_as_text_never_shows_as_a_preview(
    model: ScriptedModel, world: World, first: str
) -> None:
    model.script(text(first), text("Saved as asked."))
    shown: list[str] = []
    result = await run(model, world, on_text=shown.append)
    assert "".join(shown) == "Saved as asked." == result.text
    assert len(shown) > 1  # an answer in prose still streams, piece by piece


WRITE_MILK = '{"name": "file_write", "arguments": {"path": "notes.txt", "content": "milk"}}'


@pytest.mark.parametrize("opening", [f"<tool_call>\n{WRITE_MILK}", WRITE_MILK])
async def test_a_call_written_after_prose_never_shows_in_the_preview(
    model: ScriptedModel, world: World, opening: str
) -> None:
    """Qwen's habit: a sentence, then the call in its markup on a line of its own. The
    sentence streams; from the call's line on nothing of that reply is shown (the preview
    once showed the raw call until the answer replaced it). Prose with a Markdown link or
    code at a line's start still streams whole."""
    model.script(text(f"I will save it now.\n{opening}\n</tool_call>"), text("Saved as asked."))
    shown: list[str] = []
    result = await run(model, world, on_text=shown.append)
    assert "".join(shown) == "I will save it now.\nSaved as asked."
    assert world.file("notes.txt") == "milk" and result.text == "Saved as asked."
    answer = "See:\n[the docs](https://example.org)\n```\nls -l\n```"
    model.script(text(answer))
    shown.clear()
    assert (await run(model, world, on_text=shown.append)).text == answer == "".join(shown)


async def test_qwen_outputs_for_the_shell(model: ScriptedModel, world: World) -> None:
    model.script(
        text('<tools>\n{"name": "shell", "arguments": {"command": "date"}}\n</tools>'),
        text('{{"name": "shell", "arguments": {{"command": "ls"}}}}'),
        text("Here is the date and the listing."),
    )
    result = await run(model, world)
    assert [(e.name, e.arguments, e.ok) for e in result.events] == [
        ("shell", '{"command": "date"}', True),
        ("shell", '{"command": "ls"}', True),
    ]
    assert tool_results(model.requests[1])[0].startswith("exit code: 0\n")
    assert result.text == "Here is the date and the listing."


async def test_qwen_memory_call_with_a_made_up_key_is_sent_back_once(
    model: ScriptedModel, world: World
) -> None:
    literal = '{"name": "memory_store", "arguments": {"key": "color", "content": "blue"}}'
    fixed = '{"name": "memory_store", "arguments": {"content": "Favourite color: blue"}}'
    model.script(text(literal), text(fixed), text("I will remember that."))
    result = await run(model, world)
    correction = model.requests[1]["messages"][-1]
    assert correction["role"] == "user"
    assert "memory_store was not run: unknown argument key" in correction["content"]
    assert [e.name for e in result.events] == ["memory_store"]
    assert "Favourite color: blue" in await world.memories("favourite color")
    assert result.text == "I will remember that."
    stored = [m.get("content") for m in result.new_messages]
    assert literal not in stored  # the miss and its correction are not kept


async def test_the_xml_protocol_keeps_its_own_shape(model: ScriptedModel, world: World) -> None:
    model.script(text(PROSE_FENCE), text("Saved."))
    result = await run(model, world, XmlDispatcher())
    assert world.file("a.txt") == "x" and result.text == "Saved."
    assistant, results = model.requests[1]["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": "I used `file_write` to save it:\n"
        '<tool_call>{"name": "file_write", "arguments": {"path": "a.txt", '
        '"content": "x"}}</tool_call>',
    }
    assert results["role"] == "user"
    assert results["content"].startswith('<tool_result name="file_write">\nWrote 1 character')


DEEP = [  # a small model stuck repeating "[": nested deeper than Python reads JSON
    pytest.param("[" * 1500, id="open-brackets"),
    pytest.param("[" * 600 + "]" * 600, id="whole-but-deep"),
    pytest.param("<tool_call>" + "[" * 1500 + "</tool_call>", id="tagged-open-brackets"),
    pytest.param("<tool_call>" + "[" * 600 + "]" * 600 + "</tool_call>", id="tagged-deep"),
]


@pytest.mark.parametrize("xml", [False, True], ids=["native", "xml"])
@pytest.mark.parametrize("reply", DEEP)
async def test_a_reply_nested_too_deep_is_text_or_a_correction_not_a_crash(
    world: World, reply: str, xml: bool
) -> None:
    """Shown as written, or sent back once with a correction: never "an internal error"."""
    model = ScriptedModel(text(reply), text("Sorry: here is the answer."))
    result = await run(model, world, XmlDispatcher() if xml else None)
    assert result.stop_reason == "done" and result.text and result.events == []


TRAPS = [  # replies that hold no call, shown to the user as written
    pytest.param(
        "A tool call in JSON looks like this, for example:\n```json\n"
        '{"name": "file_write", "arguments": {"path": "ex.txt", "content": "x"}}\n```\n'
        "The name picks the tool; the arguments follow its schema.",
        id="json-example-in-an-answer-about-json",
    ),
    pytest.param("I can do that with file_write or the shell. Which file?", id="name-in-prose"),
    pytest.param(
        'A weather API takes {"name": "get_weather", "arguments": {"city": "Paris"}} as input.',
        id="tool-not-offered-in-prose",
    ),
    pytest.param(
        'The note would be {"name": "file_write", "arguments": {"file": "k.txt"}} but which?',
        id="keys-do-not-fit-in-prose",
    ),
    pytest.param('print("hello")', id="python-answer"),
    pytest.param("Use file_write(path, content) for that.", id="a-signature-in-prose"),
    pytest.param("```text\nfile_write, the shell and memory are here.\n```", id="names-in-a-list"),
]


@pytest.mark.parametrize("reply", TRAPS)
async def test_traps_are_not_calls(model: ScriptedModel, world: World, reply: str) -> None:
    model.script(text(reply))
    result = await run(model, world)
    assert result.text == reply
    assert (
        result.events == []
        and len(model.requests) == 1
        and list(world.workspace.glob("*.txt")) == []
    )


@pytest.mark.parametrize("via", ["auto", "litellm"])
async def test_a_draft_in_reasoning_is_kept_apart_and_not_run(
    fake_llm: FakeLLM, world: World, via: Literal["auto", "litellm"]
) -> None:
    """Over the wire, directly or through LiteLLM: <think>...</think> is taken out of
    the content, so a call drafted in the reasoning is neither run nor shown."""
    fake_llm.script(
        text(
            '<think>{"name": "file_write", "arguments": {"path": "t.txt", "content": "x"}}?'
            "</think>Which file do you mean?"
        )
    )
    settings = LLMSettings(model="openai/m", api_base=fake_llm.base_url, num_retries=0, client=via)
    result = await run(LLMClient(settings), world)
    assert result.text == "Which file do you mean?"
    assert result.events == [] and len(fake_llm.requests) == 1
    assert list(world.workspace.glob("*.txt")) == []


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        pytest.param(
            '{"name": "get_weather", "arguments": {"city": "Paris"}}',
            "there is no tool named 'get_weather'",
            id="tool-not-offered",
        ),
        pytest.param(
            '{"name": "file_write", "arguments": {"file": "k.txt"}}',
            "file_write was not run: missing path, content",
            id="keys-do-not-fit",
        ),
        pytest.param(  # Qwen2.5-Coder-1.5B, as seen: a bare word, then a file name
            "file_write(docs)",
            "file_write was not run: 'file_write(docs)' is not a call pinclaw can read",
            id="a-name-and-parentheses",
        ),
        pytest.param(
            "file_write( plans-2031.txt)",
            "file_write was not run: 'file_write( plans-2031.txt)' is not a call",
            id="not-even-python",
        ),
        pytest.param(
            "```markdown\nfile_write(docs)\n```",
            "file_write was not run: 'file_write(docs)' is not a call",
            id="the-same-in-a-fence",
        ),
        pytest.param(
            "```bash\nfile_write, path=shopping.txt, content=milk, eggs\n```",
            "file_write was not run: 'file_write, path=shopping.txt, content=milk, eggs'",
            id="a-name-then-pairs",
        ),
        pytest.param(
            '{"file_write": "notes.txt", "tags": ["x"]}',
            'file_write was not run: \'{"file_write": "notes.txt"',
            id="json-keyed-by-the-name",
        ),
    ],
)
async def test_a_clear_attempt_that_fits_no_tool_is_not_run_and_is_said_once(
    model: ScriptedModel, world: World, reply: str, problem: str
) -> None:
    model.script(text(reply), text(reply))
    result = await run(model, world)
    assert result.events == [] and list(world.workspace.glob("*.txt")) == []
    assert problem in model.requests[1]["messages"][-1]["content"]
    assert len(model.requests) == 2
    # The second time it is the answer, but the user never gets a raw call: a plain note.
    assert (
        result.text == "(Note: a tool call was written that fits no tool here, so it was not run.)"
    )


async def test_a_tagged_call_that_never_fits_ends_in_a_line_not_in_silence(
    model: ScriptedModel, world: World
) -> None:
    tagged = '<tool_call>{"name": "file_write", "arguments": {"file": "k.txt"}}</tool_call>'
    model.script(text(tagged), text(tagged), text(tagged))
    result = await run(model, world)
    assert result.text == "(No answer from the model, and no tool ran.)"
    assert len(model.requests) == 3 and result.events == []
