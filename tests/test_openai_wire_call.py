"""The direct roads' wire (agent/model/openai_wire_call.py) on what the fake provider does not
send: server-sent events split over several `data:` lines, comments and event names between
them, a last event with no blank line after it, an error carried inside a stream, a failed
status read as the OpenAI SDK reads it, and the headers it sends. Every ordinary call,
streamed or not, runs against the fake provider in tests/test_llm.py."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from fakes.llm_server import FakeLLM

from agent.config import LLMSettings
from agent.model.client import LLMClient
from agent.model.openai_wire_call import Fields, _events, _status_error

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def streamed(body: str) -> httpx.Response:
    return httpx.Response(200, content=body.encode(), request=REQUEST)


async def chunks(body: str) -> list[Fields]:
    return [chunk async for chunk in _events(streamed(body))]


def delta(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


async def test_events_are_read_across_lines_comments_and_names_up_to_done() -> None:
    whole = {"choices": [{"index": 0, "delta": {"content": "two lines"}}]}
    split = json.dumps(whole, indent=1).splitlines()
    body = (
        ": a comment the server sends to keep the line open\n\n"
        f"data: {delta('one')}\n\n"
        "event: completion\n" + "".join(f"data: {line}\n" for line in split) + "\n"
        f"data:{delta('three')}\n\n"
        "data: [DONE]\n\n"
        f"data: {delta('after the end')}\n\n"
    )
    texts = [chunk.choices[0].delta.content for chunk in await chunks(body)]
    assert texts == ["one", "two lines", "three"]


async def test_a_last_event_without_a_blank_line_is_read() -> None:
    found = await chunks(f"data: {delta('last')}")
    assert [chunk.choices[0].delta.content for chunk in found] == ["last"]


async def test_an_error_inside_a_stream_is_raised_with_its_words() -> None:
    error = {"message": "the model crashed", "type": "server_error", "code": "crash"}
    body = f"data: {delta('partial')}\n\ndata: {json.dumps({'error': error})}\n\n"
    events = _events(streamed(body))
    first = await anext(events)
    assert first.choices[0].delta.content == "partial"
    with pytest.raises(openai.APIError, match="the model crashed") as caught:
        await anext(events)
    assert caught.value.body == error and caught.value.code == "crash"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
        (418, openai.APIStatusError),
    ],
)
def test_a_failed_status_is_the_sdks_class_with_the_sdks_words(
    status: int, kind: type[openai.APIStatusError]
) -> None:
    body = {"error": {"message": "no", "type": "t", "code": "c"}}
    response = httpx.Response(status, json=body, request=REQUEST)
    raised = _status_error(response)
    assert type(raised) is kind
    assert str(raised) == f"Error code: {status} - {body}"
    assert raised.body == body["error"] and raised.status_code == status  # type: ignore[attr-defined]


def test_a_failed_status_without_json_keeps_the_servers_text() -> None:
    raised = _status_error(httpx.Response(502, text="Bad gateway\n", request=REQUEST))
    assert isinstance(raised, openai.InternalServerError) and str(raised) == "Bad gateway"


def test_fields_read_a_reply_as_the_sdk_models_do() -> None:
    reply = Fields({"choices": [{"message": {"content": "hi", "tool_calls": None}}]})
    message = reply.choices[0].message
    assert (message.content, message.tool_calls, reply.usage, message.refusal) == (
        "hi",
        None,
        None,
        None,
    )


async def test_the_key_organization_and_project_go_as_the_sdk_sent_them(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wire-test-0000")
    monkeypatch.setenv("OPENAI_ORGANIZATION", "org-wire")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-wire")
    fake_llm.script("hello")
    client = LLMClient(LLMSettings(model="openai/test-model", api_base=fake_llm.base_url))
    reply = await client.complete([{"role": "user", "content": "hi"}])
    assert reply.content == "hello"
    [headers] = fake_llm.request_headers
    assert headers["authorization"] == "Bearer sk-wire-test-0000"
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-wire", "proj-wire")
