"""The LLM client against the fake provider, each case three ways: directly (OpenAI's
protocol over httpx) to a server of one's own (the fake as llm.api_base) and to OpenAI
itself (no api_base: the fake stands in for api.openai.com through OPENAI_BASE_URL), and
through real LiteLLM: retries, fallbacks, usage, price."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLM, Reply, error, last_user_content, text, tool_calls
from fakes.llm_server import ToolCall as FakeCall
from model_ways import VIA, client_over, each_way  # noqa: F401  (each_way: every test, each way)

from agent.model.client import LLMClient
from agent.model.profiles.litellm_facts import price_of
from agent.model.profiles.litellm_import import load_litellm
from agent.model.responses import CUT_NOTE, CUT_REASONING, LLMError, LLMRequestRejected
from agent.turns.honesty import CUT_CALL, NOTE_CUT_CALL
from agent.turns.loop import run_tool_call_loop
from tools.base import FunctionTool, ToolCallContext, ToolRegistry, ToolResult

HELLO = [{"role": "user", "content": "hello"}]


def client(fake: FakeLLM, **overrides: object) -> LLMClient:
    return client_over(fake, **{"num_retries": 2, **overrides})


pytestmark = pytest.mark.usefixtures("_key")  # conftest.py


async def save_notes(call: ToolCallContext, content: str) -> ToolResult:
    """Save notes in notes.txt.

    Args:
        content: The notes.
    """
    (call.workspace / "notes.txt").write_text(content)
    return ToolResult.success("saved")


async def test_retries_429_and_500_then_succeeds(fake_llm: FakeLLM) -> None:
    fake_llm.script(error(429), error(500), text("third time"))
    reply = await client(fake_llm).complete(HELLO)
    assert reply.content == "third time"
    assert len(fake_llm.requests) == 3


async def test_fallback_answers_when_primary_always_fails(fake_llm: FakeLLM) -> None:
    fake_llm.fail_model("primary", status=503)
    fake_llm.script(text("from the fallback"))
    reply = await client(fake_llm, fallback_models=["openai/backup"]).complete(HELLO)
    assert reply.content == "from the fallback"
    assert reply.model == "openai/backup"
    assert [r["model"] for r in fake_llm.requests] == ["primary"] * 3 + ["backup"]


async def test_clear_error_when_every_model_fails(fake_llm: FakeLLM) -> None:
    fake_llm.fail_model("primary", status=500)
    fake_llm.fail_model("backup", status=500)
    with pytest.raises(LLMError) as caught:
        await client(fake_llm, fallback_models=["openai/backup"], num_retries=1).complete(HELLO)
    assert "no model answered" in str(caught.value)
    assert caught.value.status == 500
    assert len(fake_llm.requests) == 4


async def test_rejected_request_is_not_retried(fake_llm: FakeLLM) -> None:
    fake_llm.reject_non_leading_system = True
    messages = [*HELLO, {"role": "system", "content": "late"}]
    with pytest.raises(LLMRequestRejected, match="System message must be at the beginning"):
        await client(fake_llm).complete(messages)
    assert len(fake_llm.requests) == 1


async def test_tool_calls_and_usage(fake_llm: FakeLLM) -> None:
    fake_llm.script(tool_calls(("shell", {"command": "ls"})))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "run",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    reply = await client(fake_llm).complete(HELLO, tools=tools)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("shell", '{"command": "ls"}')]
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert fake_llm.requests[0]["tools"] == tools


async def test_streamed_tool_calls_are_put_back_together(fake_llm: FakeLLM) -> None:
    """Each call's arguments arrive in pieces under its index, the usage in the last chunk."""
    fake_llm.script(
        tool_calls(
            ("shell", {"command": "ls -la /tmp"}, "call_a"),
            ("file_read", {"path": "notes/today.md"}, "call_b"),
            content="Looking.",
        )
    )
    reply = await client(fake_llm).complete(HELLO, on_text=lambda _: None)
    assert reply.content == "Looking."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_a", "shell", {"command": "ls -la /tmp"}),
        ("call_b", "file_read", {"path": "notes/today.md"}),
    ]
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert reply.first_token_s is not None


async def test_streaming_hands_over_each_delta(fake_llm: FakeLLM) -> None:
    fake_llm.script(text("streamed reply arrives in pieces"))
    pieces: list[str] = []
    reply = await client(fake_llm).complete(HELLO, on_text=pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == reply.content == "streamed reply arrives in pieces"
    assert fake_llm.requests[0]["stream"] is True


async def test_the_cost_is_litellms_price_for_the_tokens_used(fake_llm: FakeLLM) -> None:
    litellm = load_litellm()
    fake_llm.script(text("priced"), text("priced, streamed"))
    llm = client(fake_llm, model="openai/gpt-4o-mini")
    for reply in [await llm.complete(HELLO), await llm.complete(HELLO, on_text=lambda _: None)]:
        if VIA["way"] == "own server":  # a server of one's own: no price is guessed
            assert reply.cost_usd is None
            continue
        prompt, completion = litellm.cost_per_token(
            model="gpt-4o-mini",
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
        assert reply.cost_usd > 0
        assert reply.cost_usd == pytest.approx(prompt + completion)


async def test_cached_prompt_tokens_are_priced_at_the_cache_read_price(fake_llm: FakeLLM) -> None:
    fake_llm.cached_tokens = 3
    reply = await client(fake_llm, model="openai/gpt-4o-mini").complete(HELLO)
    assert reply.cached_tokens == 3
    if VIA["way"] == "own server":
        assert reply.cost_usd is None
        return
    rates = load_litellm().model_cost["gpt-4o-mini"]
    assert rates["cache_read_input_token_cost"] < rates["input_cost_per_token"]
    assert reply.cost_usd == pytest.approx(
        (reply.prompt_tokens - 3) * rates["input_cost_per_token"]
        + 3 * rates["cache_read_input_token_cost"]
        + reply.completion_tokens * rates["output_cost_per_token"]
    )


async def test_a_model_without_a_price_costs_unknown_and_is_not_priced_again(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = load_litellm()
    asked: list[str] = []
    price = litellm.completion_cost

    def counted(*args: Any, **kwargs: Any) -> float:
        asked.append(kwargs["completion_response"].model)
        return float(price(*args, **kwargs))

    monkeypatch.setattr(litellm, "completion_cost", counted)
    llm = client(fake_llm, model="openai/no-price-known-for-this-one")
    replies = [await llm.complete(HELLO) for _ in range(3)]
    assert [r.cost_usd for r in replies] == [None, None, None]  # unknown, not free
    assert asked == []  # LiteLLM priced each response as it logged it: not priced twice
    # A response LiteLLM did not price (no figure in its hidden params) is priced here,
    # and a model it has no price for only once.
    # (A name of each case's own: the process remembers a model it could not price.)
    unpriced = f"no-price-known-for-this-one-either-{VIA['way']}"
    bare = litellm.ModelResponse(model=unpriced)
    for _ in range(3):
        assert price_of(litellm, bare, f"openai/{unpriced}") is None
    assert asked == [unpriced]


async def test_a_local_models_reply_is_capped_and_a_hosted_ones_left_to_its_provider(
    fake_llm: FakeLLM,
) -> None:
    """A small local model stuck on a phrase would write until its context is full (minutes
    on a CPU, the chat waiting): at a server of one's own a reply may be 8,192 tokens unless
    llm.max_tokens says otherwise; at OpenAI (no api_base) the provider's limit stands."""
    await client(fake_llm).complete(HELLO)
    await client(fake_llm, max_tokens=500).complete(HELLO, on_text=lambda _: None)
    local = VIA["way"] != "openai"
    assert [r.get("max_tokens") for r in fake_llm.requests] == [8192 if local else None, 500]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_reply_stopped_at_its_length_limit_says_so(
    fake_llm: FakeLLM, streamed: bool
) -> None:
    """The person reads that the answer is not whole, instead of a sentence that ends in the
    middle as if that were all."""
    fake_llm.script(
        Reply("The steps are: first, open the", shape="length"),
        Reply("<think>The user wants the steps. First I should", shape="length"),
    )
    on_text = (lambda _: None) if streamed else None
    reply = await client(fake_llm).complete(HELLO, on_text=on_text)
    assert reply.cut and reply.content == "The steps are: first, open the" + CUT_NOTE
    thinking = await client(fake_llm).complete(HELLO, on_text=on_text)  # no answer written
    assert thinking.cut and thinking.content == CUT_REASONING


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_call_cut_at_the_length_limit_is_not_run_and_the_model_is_told_why(
    fake_llm: FakeLLM, streamed: bool, tmp_path: Path
) -> None:
    """A file written in one call longer than the reply cap: its arguments stop mid-string.
    The model reads that the cap cut them (not only "not valid JSON", which it would send
    again the same), and nothing is written."""
    cut_short = json.dumps({"content": "Chapter one. " * 50})[:300]
    fake_llm.script(
        Reply(calls=(FakeCall("save_notes", cut_short),), shape="length"),
        text("It was too long for one call."),
    )
    result = await run_tool_call_loop(
        HELLO, ToolRegistry([FunctionTool(save_notes)]), client(fake_llm),
        context=ToolCallContext(tmp_path), on_text=(lambda _: None) if streamed else None,
    )  # fmt: skip
    [told] = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "length limit (llm.max_tokens)" in told and told.startswith("Error: Not run")
    assert not (tmp_path / "notes.txt").exists()
    assert result.text == "It was too long for one call."


@pytest.mark.parametrize("markup", ["<tool_call>\n", "```json\n", ""])
async def test_a_call_written_as_text_and_cut_at_the_length_limit_never_reaches_the_user(
    fake_llm: FakeLLM, markup: str, tmp_path: Path
) -> None:
    """A small model writing a long file as a call in text (Qwen's <tool_call>, a fence, bare
    JSON) past the reply cap: the server hands the half call back as content. The model is
    asked once to send less; cut again, the person reads what came before the call and a
    note, never half a call. A cut answer that only holds JSON naming no tool stays as said."""
    call = json.dumps({"name": "save_notes", "arguments": {"content": "Chapter one. " * 50}})[:300]
    fake_llm.script(
        Reply(f"Sure.\n{markup}{call}", shape="length"),
        Reply(f"Sure.\n{markup}{call}", shape="length"),
        Reply('{"chapters": ["one", "two", "thr', shape="length"),
    )
    tools = ToolRegistry([FunctionTool(save_notes)])
    done = await run_tool_call_loop(
        HELLO, tools, client(fake_llm), context=ToolCallContext(tmp_path)
    )
    assert done.text == f"Sure.\n\n{NOTE_CUT_CALL}" and not (tmp_path / "notes.txt").exists()
    assert last_user_content(fake_llm.requests[1]) == CUT_CALL
    data = await run_tool_call_loop(
        HELLO, tools, client(fake_llm), context=ToolCallContext(tmp_path)
    )
    assert data.text == '{"chapters": ["one", "two", "thr' + CUT_NOTE


async def test_a_server_that_refuses_the_default_cap_as_too_long_is_asked_again_without_it(
    fake_llm: FakeLLM,
) -> None:
    """vLLM and TGI refuse a request whose prompt and reply cap pass the model's window
    (llama-server and Ollama stop at its end): a local model's long chat would fail at
    every message. Refused so, the request goes again without the default cap."""
    too_long = (
        "This model's maximum context length is 8192 tokens. However, you requested 9296 "
        "tokens (1104 in the messages, 8192 in the completion)."
    )
    fake_llm.script(error(400, too_long), text("answered"))
    if VIA["way"] == "openai":  # a hosted model: no cap was sent, the refusal stands
        with pytest.raises(LLMError, match="maximum context length"):
            await client(fake_llm, num_retries=0).complete(HELLO)
        return
    reply = await client(fake_llm, num_retries=0).complete(HELLO)
    assert reply.content == "answered"
    assert [r.get("max_tokens") for r in fake_llm.requests] == [8192, None]
