"""The LLM client on a provider that misbehaves without failing outright: a 200 with no
choice, a stream cut half-way, a first failure the caller is told of (each case through the
OpenAI SDK to a server of one's own and to OpenAI itself — the fake at OPENAI_BASE_URL, no
api_base — and through real LiteLLM, against the fake provider)."""

from __future__ import annotations

import pytest
from fakes.llm_server import FakeLLM, cut, error, no_choices, text
from model_ways import client_over, each_way  # noqa: F401  (each_way: every test, each way)

from agent.model.client import LLMClient

HELLO = [{"role": "user", "content": "hello"}]


def client(fake: FakeLLM) -> LLMClient:
    return client_over(fake, num_retries=3)


pytestmark = pytest.mark.usefixtures("_key")  # conftest.py


async def test_a_reply_with_no_choice_is_retried_quietly(fake_llm: FakeLLM) -> None:
    """(Streamed, LiteLLM turns a choice-less stream into an empty reply, which the loop
    asks again: tests/test_tool_call_honesty.py.)"""
    fake_llm.script(no_choices(), text("the retry answered"))
    told: list[str] = []

    async def on_retry(reason: str) -> None:
        told.append(reason)

    reply = await client(fake_llm).complete(HELLO, on_retry=on_retry)
    assert reply.content == "the retry answered"
    assert len(fake_llm.requests) == 2
    assert told == []  # nobody hears "unreachable" for an empty answer


async def test_a_stream_cut_three_times_shows_its_text_once(fake_llm: FakeLLM) -> None:
    partial = "partial answer that was cut"
    fake_llm.script(cut(partial), cut(partial), cut(partial), text(partial + " and finished"))
    shown: list[str] = []
    reply = await client(fake_llm).complete(HELLO, on_text=shown.append)
    assert reply.content == partial + " and finished"
    assert "".join(shown) == partial + " and finished"  # not "...cutpartial answer..."
    assert len(fake_llm.requests) == 4


async def test_the_caller_hears_of_each_failed_call_before_the_wait(fake_llm: FakeLLM) -> None:
    fake_llm.script(error(503), error(429), text("back"))
    told: list[tuple[str, int]] = []

    async def on_retry(reason: str) -> None:
        told.append((reason, len(fake_llm.requests)))

    reply = await client(fake_llm).complete(HELLO, on_retry=on_retry)
    assert reply.content == "back"
    assert [asked for _, asked in told] == [1, 2]  # after the first failure, not at the end
    assert "503" in told[0][0] or "ServiceUnavailable" in told[0][0]
