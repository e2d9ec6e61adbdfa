"""The OpenAI-compatible API of the daemon run in this event loop, asked by the real `openai`
SDK over 127.0.0.1: a plain and a streamed answer with their usage, pinclaw's own tool run
inside the turn, a session kept by pinclaw and a stateless one with the client's history,
the models listed, a bad key; a request malformed or a key not UTF-8 refused, not a 500; a
streamed turn whose client left still holding its session; and the keys made, listed and
revoked with `agent http keys`."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from click.testing import CliRunner
from conftest import Daemon
from daemon_process import rows
from fakes.llm_requests import last_user_content, tool_results
from fakes.model_double import ScriptedModel, delay, text, tool_calls

from agent.cli.main import cli

KEY = "pk-alice-" + "0123456789abcdef" * 2
BOB_KEY = "pk-bob-" + "fedcba9876543210" * 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def port(model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> int:
    number = free_port()
    for name, value in {
        "PINCLAW_HTTP__ENABLED": "true",
        "PINCLAW_HTTP__PORT": str(number),
        "PINCLAW_LLM__CHOICES": '["openai/other-model"]',
        "PINCLAW_PEOPLE__ALICE__OWNER": "true",
        "HTTP_KEY_T1": KEY,
        "HTTP_KEY_T2": BOB_KEY,  # bob is in no [people]
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "2",
    }.items():
        monkeypatch.setenv(name, value)
    return number


@pytest.fixture
def client(port: int) -> Iterator[openai.AsyncOpenAI]:
    yield openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)


async def test_a_plain_and_a_streamed_answer_with_usage(
    model: ScriptedModel, daemon: Callable[[], Daemon], client: openai.AsyncOpenAI
) -> None:
    model.script(text("The pump runs at 40 %."), text("Watering is done for today."))
    asked = [{"role": "user", "content": "How fast is the pump?"}]
    async with daemon():
        plain = await client.chat.completions.create(model="any", messages=asked)  # type: ignore[arg-type]
        stream = await client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "Is the watering done?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert plain.choices[0].message.content == "The pump runs at 40 %."
    assert plain.choices[0].finish_reason == "stop"
    assert plain.usage is not None and plain.usage.prompt_tokens > 0
    assert plain.usage.completion_tokens > 0
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert said == "Watering is done for today."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # streamed
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert "| api | from alice]" in str(last_user_content(model.requests[0])).splitlines()[0]


async def test_pinclaw_tools_run_inside_the_turn(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    client: openai.AsyncOpenAI,
    home: Path,
) -> None:
    (home / "workspace").mkdir(parents=True, exist_ok=True)
    (home / "workspace" / "plants.txt").write_text("basil, mint\n")
    model.script(
        tool_calls(("file_read", {"path": "plants.txt"})), text("You grow basil and mint.")
    )
    async with daemon():
        answer = await client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "What do I grow?"}]
        )
    assert answer.choices[0].message.content == "You grow basil and mint."
    (result,) = tool_results(model.requests[1])
    assert "basil, mint" in result


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


async def test_a_client_tool_is_handed_back_and_its_result_answered(
    model: ScriptedModel, daemon: Callable[[], Daemon], client: openai.AsyncOpenAI
) -> None:
    model.script(
        tool_calls(("get_weather", {"city": "Oslo"})),
        text("Sunny in Oslo: water later."),
        tool_calls(("get_weather", {"city": "Bergen"})),
    )
    asked: list[Any] = [{"role": "user", "content": "Should I water today?"}]
    async with daemon():
        first = await client.chat.completions.create(model="any", messages=asked, tools=[WEATHER])  # type: ignore[list-item]
        (call,) = first.choices[0].message.tool_calls or []
        asked += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"},
        ]
        second = await client.chat.completions.create(model="any", messages=asked, tools=[WEATHER])  # type: ignore[list-item]
        stream = await client.chat.completions.create(
            model="any",
            messages=asked[:1],
            tools=[WEATHER],
            stream=True,  # type: ignore[list-item]
        )
        chunks = [chunk async for chunk in stream]
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="any", user="garden", messages=asked[:1], tools=[WEATHER]
            )  # type: ignore[list-item]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert "get_weather" in offered and "file_read" in offered  # beside pinclaw's own
    assert second.choices[0].message.content == "Sunny in Oslo: water later."
    results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [(call.id, "sunny, 24 C")]
    streamed = [c.choices[0] for c in chunks if c.choices]
    (handed,) = [call for c in streamed for call in c.delta.tool_calls or []]
    assert handed.function is not None and handed.function.name == "get_weather"
    assert json.loads(handed.function.arguments or "") == {"city": "Bergen"}
    assert streamed[-1].finish_reason == "tool_calls"
    assert "stateless call" in str(refused.value)
    assert len(model.requests) == 3


async def test_a_session_is_kept_and_a_stateless_call_sends_the_clients_history(
    model: ScriptedModel, daemon: Callable[[], Daemon], client: openai.AsyncOpenAI
) -> None:
    async with daemon():
        await client.chat.completions.create(
            model="any", user="garden", messages=[{"role": "user", "content": "I planted basil."}]
        )
        await client.chat.completions.create(
            model="any", user="garden", messages=[{"role": "user", "content": "What did I plant?"}]
        )
        await client.chat.completions.create(
            model="any",
            messages=[
                {"role": "system", "content": "You are a pirate."},
                {"role": "user", "content": "My cat is Tom."},
                {"role": "assistant", "content": "Hello Tom's human."},
                {"role": "user", "content": "Who is my cat?"},
            ],
        )
    kept, stateless = model.requests[1]["messages"], model.requests[2]["messages"]
    said = [(m["role"], str(m["content"])) for m in kept if m["role"] != "system"]
    assert said[0] == ("user", said[0][1]) and said[0][1].endswith("I planted basil.")
    assert said[1] == ("assistant", "echo: " + said[0][1])  # pinclaw's stored answer
    assert said[2][1].endswith("What did I plant?")
    history = [(m["role"], str(m["content"])) for m in stateless if m["role"] != "system"]
    assert history[:2] == [("user", "My cat is Tom."), ("assistant", "Hello Tom's human.")]
    assert history[2][1].endswith("Who is my cat?")
    assert not any("pirate" in str(m["content"]) for m in stateless)  # pinclaw's own prompt


async def test_models_are_listed_and_a_bad_key_is_refused(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    base = f"http://127.0.0.1:{port}/v1"
    async with daemon():
        listed = await openai.AsyncOpenAI(base_url=base, api_key=KEY).models.list()
        refusals = []
        for key in ("pk-alice-" + "f" * 32, BOB_KEY):
            bad = openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0)
            with pytest.raises(openai.AuthenticationError) as refused:
                await bad.chat.completions.create(
                    model="any", messages=[{"role": "user", "content": "hi"}]
                )
            refusals.append(refused.value.body)
    assert [m.id for m in listed.data] == [model.model, "openai/other-model"]
    assert refusals == [
        {
            "message": "no valid API key (Authorization: Bearer pk-...)",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        },
        {
            "message": "this key's person 'bob' is not in [people]",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        },
    ]
    assert model.requests == []
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert not any(KEY in line or BOB_KEY in line for line in logged)


def completions_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/chat/completions"


async def test_a_malformed_request_or_a_key_not_utf8_is_refused_not_a_500(
    model: ScriptedModel, daemon: Callable[[], Daemon], port: int
) -> None:
    """An earlier message that is not an object, a `stream_options` that is not one, a
    `stream` that is not true or false ("no" would read as true and stream): a 400 naming
    the field. A key whose bytes are not UTF-8 (aiohttp reads them with surrogateescape): a
    401. Neither a traceback's 500."""
    said = {"role": "user", "content": "What did I plant?"}
    bodies = [
        {"messages": ["I planted basil.", said]},
        {"messages": [said], "stream": True, "stream_options": "usage please"},
        {"messages": [said], "stream": "no"},
    ]
    bearer = {"Authorization": f"Bearer {KEY}"}
    async with daemon(), httpx.AsyncClient(timeout=10) as http:
        malformed = [await http.post(completions_url(port), json=b, headers=bearer) for b in bodies]
        garbled = await http.post(
            completions_url(port),
            json={"messages": [said]},
            headers={b"Authorization": b"Bearer pk-\xff"},
        )
    assert [r.status_code for r in malformed] == [400, 400, 400], [r.text for r in malformed]
    errors = [r.json()["error"]["message"] for r in malformed]
    assert errors[0].startswith("messages[0]: ") and errors[1].startswith("stream_options: ")
    assert errors[2] == "stream: true or false"
    assert garbled.status_code == 401, garbled.text
    assert model.requests == []


async def test_a_session_named_with_a_lone_surrogate_is_a_400_naming_the_field(
    model: ScriptedModel, daemon: Callable[[], Daemon], port: int
) -> None:
    """A `user` field holding "\\udce9" (valid JSON): refused, not repaired, since two names
    repaired could become one session (the header's bytes:
    tests/test_text_broken_or_too_deep.py)."""
    said = {"role": "user", "content": "What did I plant?"}
    body = json.dumps({"messages": [said], "user": "jardin-\udce9"})  # the escape, as JSON
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with daemon(), httpx.AsyncClient(timeout=10) as http:
        named = await http.post(completions_url(port), content=body.encode(), headers=headers)
    assert named.status_code == 400, named.text
    assert named.json()["error"]["message"].startswith("user: ")
    assert model.requests == []


async def test_a_streamed_turn_whose_client_left_holds_its_session_until_it_ends(
    model: ScriptedModel, daemon: Callable[[], Daemon], port: int
) -> None:
    """A session runs one turn at a time. A streamed request's client goes away after the
    first chunk: its turn goes on to its end (stored whole), and the same session's next
    request waits for it, so that turn's history holds the first question."""
    model.script(
        # the first turn: a piece of text after the client left, a tool, a slow last answer
        delay(1.0, tool_calls(("file_list", {"path": "."}), content="Let me look. ")),
        delay(3.0, text("A: basil.")),
        # the second turn: echo (its history is what the model sees)
    )
    headers = {"Authorization": f"Bearer {KEY}", "X-Session-Id": "garden"}
    first = {"messages": [{"role": "user", "content": "What did I plant?"}], "stream": True}
    second = {"messages": [{"role": "user", "content": "And what else?"}]}
    async with daemon(), httpx.AsyncClient(timeout=20) as http:
        async with http.stream(
            "POST", completions_url(port), json=first, headers=headers
        ) as streamed:
            async for _ in streamed.aiter_bytes():
                break  # the role chunk: then the client goes away
        await asyncio.sleep(1.5)  # the handler met the closed connection
        answer = await http.post(completions_url(port), json=second, headers=headers)
    assert answer.status_code == 200
    asked_second = model.requests[-1]["messages"]
    said = " ".join(str(m.get("content")) for m in asked_second)
    assert "What did I plant?" in said and "A: basil." in said, "the turns ran side by side"


@pytest.mark.both_stores
async def test_a_stateless_call_keeps_no_secret_of_its_history_tool_calls(
    model_env: dict[str, str],
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    home: Path,
    client: openai.AsyncOpenAI,
) -> None:
    """A client's history (an earlier model of the conversation called one of the client's
    tools with a key the person pasted) is stored as the turn before and sent to the model:
    scrubbed whole, its texts and its tool calls' arguments. What is stored is read while
    the turn runs: once it has ended, the call's chat is removed."""
    secret = model_env["OPENAI_API_KEY"]  # a secret pinclaw knows
    arguments = json.dumps({"provider": "openai", "api_key": secret})
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "check", "arguments": arguments},
    }
    history = [
        {"role": "user", "content": f"Check this key for me: {secret}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "valid"},
        {"role": "assistant", "content": "It is valid."},
        {"role": "user", "content": "Thanks. What did we just do?"},
    ]
    query = "SELECT message FROM messages WHERE chat_key LIKE 'api:%'"
    stored: list[tuple[Any, ...]] = []

    def answer(request: dict[str, Any]) -> str:
        stored.extend(rows(home / "state.db", query))  # what the turn reads, as it runs
        return "We checked your key."

    model.responder = answer
    async with daemon():
        await client.chat.completions.create(model="any", messages=history)  # type: ignore[arg-type]
    assert stored, "the stateless call's history is stored for its turn"
    assert rows(home / "state.db", query) == [], "and removed once the call is answered"
    assert "[REDACTED]" in stored[0][0]  # the person's text was scrubbed
    assert not any(secret in message for (message,) in stored)  # the store
    assert secret not in json.dumps(model.requests[0]["messages"])  # the model


@pytest.fixture
def loggers_kept() -> Iterator[None]:
    """The command sets up logging as `agent` does; the loggers are put back after."""
    known = logging.Logger.manager.loggerDict
    levels = {name: log.level for name, log in known.items() if isinstance(log, logging.Logger)}
    root = logging.getLogger()
    root_level, root_handlers = root.level, root.handlers[:]
    yield
    root.setLevel(root_level)
    root.handlers[:] = root_handlers
    for name, log in list(known.items()):
        if isinstance(log, logging.Logger):
            log.setLevel(levels.get(name, logging.NOTSET))


@pytest.mark.usefixtures("loggers_kept")
def test_keys_are_added_listed_and_revoked_in_agent_env(home: Path) -> None:
    home.mkdir(parents=True, mode=0o700)  # the owner's alone already: nothing to say of it
    (home / "config.toml").write_text("[people.alice]\nowner = true\n")
    (home / "config.toml").chmod(0o600)

    def agent(*argv: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["http", "keys", *argv], prog_name="agent", obj={})
        return result.exit_code, result.output

    code, made = agent("add", "alice")
    token = made.splitlines()[0]
    assert code == 0 and token.startswith("pk-alice-") and len(token) == len("pk-alice-") + 32
    env = (home / "agent.env").read_text()
    (line,) = [ln for ln in env.splitlines() if ln.startswith("HTTP_KEY_")]
    key_id = line.split("=")[0].removeprefix("HTTP_KEY_")
    assert (
        line == f"HTTP_KEY_{key_id}={token}"
        and oct((home / "agent.env").stat().st_mode)[-3:] == "600"
    )
    assert agent("list") == (0, f"{key_id}  alice\n")
    assert agent("add", "nobody")[0] == 2
    assert agent("revoke", key_id) == (0, f"key {key_id} revoked\n")
    assert "HTTP_KEY_" not in (home / "agent.env").read_text()
    assert agent("revoke", key_id)[0] == 2
    assert json.dumps(agent("list")[1]) == json.dumps(
        "no API keys; `agent http keys add PERSON` makes one\n"
    )
