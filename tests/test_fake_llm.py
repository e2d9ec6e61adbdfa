"""The LLM double speaks OpenAI's wire format well enough for the real LiteLLM client."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import httpx
import pytest
from conftest import eventually
from fakes.llm_server import FakeLLM, error, text, tool_calls


class _LiteLLM:
    """LiteLLM, imported at its first use: every pytest-xdist worker collects this file, and
    `import litellm` would be about two seconds of each one's start."""

    def __getattr__(self, name: str) -> Any:
        import litellm as module

        return getattr(module, name)


litellm = _LiteLLM()

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    for name in ("file_write", "shell")
]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "write a file"},
]


@pytest.fixture
def llm(fake_llm: FakeLLM) -> FakeLLM:
    """conftest.py's `fake_llm`, by a shorter name."""
    return fake_llm


async def ask(llm: FakeLLM, messages: list[dict[str, Any]] = MESSAGES, **kw: Any) -> Any:
    return await litellm.acompletion(
        model="openai/test-model",
        api_base=llm.base_url,
        api_key="sk-test",
        messages=messages,
        num_retries=0,
        max_retries=0,
        **kw,
    )


async def test_text_reply_and_request_log(llm: FakeLLM) -> None:
    llm.script(text("hello there"))
    resp = await ask(llm, tools=TOOLS)
    assert resp.choices[0].message.content == "hello there"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.total_tokens > 0
    [body] = llm.requests
    assert body["model"] == "test-model"
    assert body["messages"] == MESSAGES
    assert [t["function"]["name"] for t in body["tools"]] == ["file_write", "shell"]
    assert not any("mcp" in key for key in body)
    assert llm.request_headers[0]["authorization"] == "Bearer sk-test"


async def test_tool_calls_reply(llm: FakeLLM) -> None:
    llm.script(
        tool_calls(
            ("file_write", {"path": "a.txt", "content": "x"}),
            ("shell", {"command": "cat a.txt"}),
        ),
        tool_calls(("shell", "{not json")),
    )
    resp = await ask(llm, tools=TOOLS)
    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in msg.tool_calls] == ["file_write", "shell"]
    assert json.loads(msg.tool_calls[0].function.arguments) == {"path": "a.txt", "content": "x"}
    assert json.loads(msg.tool_calls[1].function.arguments) == {"command": "cat a.txt"}
    assert len({c.id for c in msg.tool_calls}) == 2
    assert all(c.id.startswith("call_") for c in msg.tool_calls)

    malformed = await ask(llm, tools=TOOLS)
    assert malformed.choices[0].message.tool_calls[0].function.arguments == "{not json"


async def test_rate_limit_surfaces(llm: FakeLLM) -> None:
    llm.script(error(status=429, message="rate limited"), text("after"))
    with pytest.raises(litellm.RateLimitError, match="rate limited"):
        await ask(llm)
    assert (await ask(llm)).choices[0].message.content == "after"
    assert len(llm.requests) == 2


async def test_streamed_text_reassembles(llm: FakeLLM) -> None:
    scripted = "The quick brown fox jumps over the lazy dog."
    llm.script(text(scripted))
    stream = await ask(llm, stream=True, stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta]
    assert len([d for d in deltas if d]) >= 3
    assert "".join(d or "" for d in deltas) == scripted
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    assert built.choices[0].message.content == scripted
    assert built.usage.completion_tokens > 0


async def test_streamed_tool_call_reassembles(llm: FakeLLM) -> None:
    args = {"path": "notes/today.txt", "content": "buy milk and eggs"}
    llm.script(tool_calls(("file_write", args), ("shell", {"command": "ls"})))
    stream = await ask(llm, tools=TOOLS, stream=True)
    chunks = [chunk async for chunk in stream]
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    calls = built.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["file_write", "shell"]
    assert json.loads(calls[0].function.arguments) == args
    assert json.loads(calls[1].function.arguments) == {"command": "ls"}
    assert built.choices[0].finish_reason == "tool_calls"


async def test_non_leading_system_rejected(llm: FakeLLM) -> None:
    llm.reject_non_leading_system = True
    llm.script(text("served to the valid request"))
    bad = [*MESSAGES, {"role": "system", "content": "late system note"}]
    with pytest.raises(litellm.BadRequestError, match="System message must be at the beginning"):
        await ask(llm, bad)
    assert llm.requests[0]["messages"] == bad  # rejected request is still logged
    ok = await ask(llm)
    assert ok.choices[0].message.content == "served to the valid request"


async def test_tools_rejected_and_failing_model(llm: FakeLLM) -> None:
    llm.reject_tools = True
    with pytest.raises(litellm.BadRequestError, match="tools is not supported"):
        await ask(llm, tools=TOOLS)
    llm.fail_model("test-model", status=503)
    llm.script(text("kept for a healthy model"))
    with pytest.raises(litellm.ServiceUnavailableError):
        await ask(llm)
    llm.heal_model("test-model")
    assert (await ask(llm)).choices[0].message.content == "kept for a healthy model"


async def test_concurrent_default_echo_with_latency(llm: FakeLLM) -> None:
    llm.latency_s = 0.2
    loop = asyncio.get_running_loop()
    started = loop.time()
    replies = await asyncio.gather(
        *(ask(llm, [{"role": "user", "content": f"n{i}"}]) for i in range(50))
    )
    assert loop.time() - started < 3  # latencies overlap instead of adding up to 10 s
    assert [r.choices[0].message.content for r in replies] == [f"echo: n{i}" for i in range(50)]


def test_sync_client_sees_retry_after_and_models(llm: FakeLLM) -> None:
    llm.script(error(status=429, message="slow down"))
    req = urllib.request.Request(
        llm.base_url + "/chat/completions",
        data=json.dumps({"model": "m", "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=5)
    assert info.value.code == 429
    assert info.value.headers["retry-after"] == "0"
    assert json.loads(info.value.read())["error"]["message"] == "slow down"
    with urllib.request.urlopen(llm.base_url + "/models", timeout=5) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "test-model"


async def test_an_outage_answers_500_then_the_script_resumes(llm: FakeLLM) -> None:
    assert (await ask(llm)).choices[0].message.content == "echo: write a file"  # warm client
    llm.script(text("after the outage"))
    outage = llm.outage(1.0)
    for _ in range(3):
        with pytest.raises(litellm.InternalServerError, match="the service is unavailable"):
            await ask(llm)
    assert outage.active and outage.received == 3
    await asyncio.sleep(max(0.0, outage.until - time.monotonic()))
    assert not outage.active
    assert (await ask(llm)).choices[0].message.content == "after the outage"
    assert (outage.received, len(llm.requests)) == (3, 5)


async def test_an_outage_of_503_ends_early(llm: FakeLLM) -> None:
    outage = llm.outage(30, mode="503")
    with pytest.raises(litellm.ServiceUnavailableError):
        await ask(llm, stream=True)
    outage.end()
    assert not outage.active
    assert (await ask(llm)).choices[0].message.content == "echo: write a file"
    assert outage.received == 1


async def test_a_hanging_outage_holds_requests_without_blocking_the_server(
    llm: FakeLLM,
) -> None:
    llm.script(text("served after"))
    outage = llm.outage(2.0, mode="hang")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(litellm.Timeout):  # the client gives up first
        await ask(llm, timeout=0.3)
    hung = asyncio.create_task(ask(llm, timeout=10))
    async with httpx.AsyncClient() as client:  # the server answers other routes meanwhile
        models = await client.get(llm.base_url + "/models")
    assert models.json()["data"][0]["id"] == "test-model"
    await eventually(lambda: outage.received == 2, what="the second request is held")
    assert loop.time() - started < 1.8 and not hung.done()
    with pytest.raises(litellm.InternalServerError, match="Connection error"):  # cut off at the end
        await hung
    assert loop.time() - started >= 1.9
    assert outage.received == 2
    assert (await ask(llm)).choices[0].message.content == "served after"


async def test_a_dropping_outage_cuts_connections(llm: FakeLLM) -> None:
    outage = llm.outage(30, mode="drop")
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        await ask(llm)
    llm.reset()
    assert not outage.active and outage.received == 1
    assert (await ask(llm)).choices[0].message.content == "echo: write a file"


def test_an_outage_mode_must_be_known(llm: FakeLLM) -> None:
    with pytest.raises(ValueError, match="outage mode"):
        llm.outage(1, mode="slow")


async def test_ending_a_hanging_outage_cuts_its_requests_off_at_once(llm: FakeLLM) -> None:
    outage = llm.outage(30, mode="hang")
    loop = asyncio.get_running_loop()
    hung = asyncio.create_task(ask(llm))
    await eventually(lambda: outage.received == 1, what="the request is held")
    assert not hung.done() and outage.received == 1
    ended = loop.time()
    outage.end()
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        await hung
    assert loop.time() - ended < 0.5
