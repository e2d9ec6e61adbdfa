"""Text that is not UTF-8 (a Latin-1 terminal's bytes, a client's half emoji) or JSON nested
deeper than Python reads (a small model repeating "["), from the terminal, an HTTP client or
the model: an answer, or one clear line, never a traceback, a 500 or "an internal error"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conftest import Daemon
from daemon_process import agent
from fakes.llm_server import FakeLLM
from fakes.model_double import ScriptedModel, text
from test_http_api import KEY, completions_url, port  # noqa: F401 (port: a fixture)

from agent.security import Scrubber
from agent.turns.loop import LoopOptions, run_tool_call_loop
from agent.turns.tool_call_text import find_tool_calls
from tools.base import ToolCallContext, ToolRegistry
from tools.config import MemorySettings
from tools.memory.memory_tools import MemoryTools


def _one_error_line_or_an_answer(result: object) -> None:
    """Exit 0 with the answer, or exit 2 with one `error:` line; never a traceback."""
    code, err = result.returncode, result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in err, err[-1500:]
    assert code in (0, 2), (code, err[-1500:])
    if code == 2:
        assert len([line for line in err.splitlines() if line.startswith("error: ")]) == 1, err


def test_a_one_shot_message_that_is_not_utf8_is_answered_or_refused_in_one_line(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    """`agent run -m` with text that is not UTF-8 (a Latin-1 terminal's "café", or a file's
    bytes through "$(cat notes.txt)") reaches pinclaw as lone surrogates: repaired, as a chat
    message is, so the turn is stored and the answer shown (unrepaired, storing it raised
    after the model had answered: a traceback, exit 1, the answer paid for and lost)."""
    result = agent("run", "-m", "caf\udce9 au lait, please", env=llm_env)
    _one_error_line_or_an_answer(result)
    if result.returncode == 0:
        assert result.stdout.startswith("echo: ")  # the answer reached the user


def test_a_one_shot_session_name_that_is_not_utf8_is_refused_in_one_line(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    """`agent run -m hello --session notes-\\xff` (a session named on a Latin-1 terminal):
    the name would reach the session store as a lone surrogate, which it cannot read: one
    `error:` line and exit 2, never a traceback."""
    result = agent("run", "-m", "hello", "--session", "caf\udce9", env=llm_env)
    _one_error_line_or_an_answer(result)


async def test_an_api_history_with_half_an_emoji_is_answered_not_a_500(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    port: int,  # noqa: F811
) -> None:
    """A stateless chat-completions request whose earlier user message holds a lone surrogate
    ("\\ud83c": a JavaScript client that cut a string in the middle of an emoji; valid JSON).
    Repaired, it is stored and answered; a 500 would leave the conversation stuck, as the
    client sends that history again with every request."""
    body = json.dumps(
        {
            "messages": [
                {"role": "user", "content": "Tell me about basil \ud83c"},
                {"role": "assistant", "content": "Basil likes sun."},
                {"role": "user", "content": "And mint?"},
            ]
        }
    )
    assert "\\ud83c" in body  # the escape, as JSON.stringify writes it
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with daemon(), httpx.AsyncClient(timeout=20) as http:
        answered = await http.post(completions_url(port), content=body.encode(), headers=headers)
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"].endswith("And mint?")  # echo


async def test_an_api_history_whose_tool_call_ids_hold_half_an_emoji_is_answered(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    port: int,  # noqa: F811
) -> None:
    """The same half emoji in an earlier tool call's id, its name and the result's
    `tool_call_id`: stored with the history, it was a 500; repaired, the turn is answered."""
    call = {"id": "call_\ud83c", "type": "function"}
    call["function"] = {"name": "look\ud83c", "arguments": "{}"}
    body = json.dumps(
        {
            "messages": [
                {"role": "user", "content": "Look at the basil."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_\ud83c", "content": "It is green."},
                {"role": "user", "content": "And now?"},
            ]
        }
    )
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with daemon(), httpx.AsyncClient(timeout=20) as http:
        answered = await http.post(completions_url(port), content=body.encode(), headers=headers)
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"].endswith("And now?")  # echo
    [sent] = [m for m in model.requests[0]["messages"] if m.get("tool_calls")]
    assert sent["tool_calls"][0]["id"] == "call_\ufffd"


async def test_an_api_session_header_not_utf8_is_a_4xx_not_a_500(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    port: int,  # noqa: F811
) -> None:
    """A chat-completions request with an `X-Session-Id` header whose bytes are not UTF-8
    (aiohttp reads them with surrogateescape, as the key in the neighbouring test): a 400
    naming the header, as a key not UTF-8 is a 401, never a 500."""
    said = json.dumps({"messages": [{"role": "user", "content": "What did I plant?"}]})
    headers = {
        b"Authorization": f"Bearer {KEY}".encode(),
        b"Content-Type": b"application/json",
        b"X-Session-Id": b"jardin-\xe9t\xe9",
    }
    async with daemon(), httpx.AsyncClient(timeout=20) as http:
        answered = await http.post(completions_url(port), content=said.encode(), headers=headers)
    assert answered.status_code in (200, 400), answered.text
    if answered.status_code == 400:
        assert "X-Session-Id" in answered.json()["error"]["message"]


async def test_an_api_body_nested_too_deep_is_a_400_not_a_500(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    port: int,  # noqa: F811
) -> None:
    """A chat-completions body of 5,000 nested lists (10 kB, well under the size limit).
    json.loads raises RecursionError there, not a ValueError: a 400 saying the body is nested
    too deep, never a 500."""
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with daemon(), httpx.AsyncClient(timeout=20) as http:
        answered = await http.post(
            completions_url(port), content=b"[" * 5000 + b"]" * 5000, headers=headers
        )
    assert answered.status_code == 400, answered.text
    assert answered.json()["error"]["message"].startswith("the body")
    assert model.requests == []


# Replies a model stuck on brackets writes. Searched for calls written as text, 1,500 "["
# raised RecursionError out of the turn ("an internal error"); the others, about 120,000
# characters each, took 20 to 50 s each (every bracket read as a start, to the end) while
# the event loop, and every chat, waited; "<tool_call>[0,[0,…" raised MemoryError.
DEGENERATE = {
    "1,500 open brackets": "[" * 1_500,
    "open braces": "{" * 120_000,
    "doubled braces": "{{ " * 40_000,
    "nested keys": '{"a":' * 24_000,
    "brackets closed now and then": ("[" * 60 + "1],") * 2_000,
    "braces closed now and then": ("{" * 60 + "}") * 2_000,
    "a quote, then braces": '"' + "{" * 120_000,
    "a call tag, then nested lists": "<tool_call>" + "[0," * 40_000,
    "a python fence, then nested calls": "```python\n" + "f(" * 40_000,
}


@pytest.mark.timeout(60)  # a hang guard: these took minutes together
@pytest.mark.parametrize("reply", DEGENERATE.values(), ids=DEGENERATE.keys())
async def test_a_reply_of_thousands_of_brackets_is_read_as_text_at_once(
    tmp_path: Path, reply: str
) -> None:
    """Read as text, not JSON: the model is asked again, and its next reply is the answer."""
    tools = ToolRegistry(MemoryTools(tmp_path / "state.db", MemorySettings()).tools())
    model = ScriptedModel(text(reply), text("Sorry, here is the answer."))
    result = await run_tool_call_loop(
        [{"role": "user", "content": "List my plants."}],
        tools,
        model,
        context=ToolCallContext(tmp_path),
        options=LoopOptions(max_iterations=5, tool_timeout_s=5),
        scrub=Scrubber(),
    )
    assert result.stop_reason == "done" and result.text
    assert not result.events  # nothing in it ran as a call


def test_a_call_after_a_page_of_braces_is_still_found() -> None:
    """The search gives up on starts that held no JSON only past a few times the reply's
    length: a call after ordinary code with braces is found."""
    code = "int main() { if (x) { return 1; } }\n" * 500
    call = '{"name": "recall", "arguments": {"text": "plants"}}'
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    found = find_tool_calls(code + call, {"recall": schema})
    assert [(c.name, c.arguments) for c in found.calls] == [("recall", {"text": "plants"})]
