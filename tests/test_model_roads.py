"""Which way a model's calls go (agent/model/profiles/routes.py's `road_of`), and what a model
called straight at OpenAI is known by: LiteLLM's table read as data
(agent/model/profiles/litellm_map.py), which must say what LiteLLM itself says of it — its
window, price, function calling and vision — and its key, address and missing-key line."""

from __future__ import annotations

import json

import pytest

from agent.config import LLMSettings
from agent.model.keys import ModelUnusable, check_model
from agent.model.profiles import litellm_map
from agent.model.profiles.litellm_facts import supports_native_tools, supports_vision, window_of
from agent.model.profiles.litellm_import import load_litellm
from agent.model.profiles.litellm_map import listing, map_file
from agent.model.profiles.routes import OPENAI_BASE, Road, road_of, route

OWN = "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    ("model", "api_base", "client", "road"),
    [
        ("openai/gpt-4o-mini", "", "auto", Road.OPENAI),
        ("gpt-4o-mini", "", "auto", Road.OPENAI),  # a bare name LiteLLM lists as OpenAI's
        ("openai/gpt-4.1-nano", OPENAI_BASE, "auto", Road.OPENAI),
        ("openai/gpt-4o", OPENAI_BASE + "/", "auto", Road.OPENAI),
        ("openai/a-name-nobody-lists", "", "auto", Road.OPENAI),
        ("openai/gpt-4o-mini", "", "litellm", Road.LITELLM),
        ("openai/o3-mini", "", "auto", Road.LITELLM),  # reasoning: LiteLLM rewrites it
        ("openai/gpt-5-mini", "", "auto", Road.LITELLM),
        ("openai/gpt-5.9-unlisted", "", "auto", Road.LITELLM),  # GPT-5 by its name alone
        ("openai/o1-pro", "", "auto", Road.LITELLM),  # Responses API only
        ("gpt-a-name-nobody-lists", "", "auto", Road.LITELLM),  # LiteLLM says it cannot route
        ("openai/gpt-4o-mini", "https://api.together.xyz/v1", "auto", Road.LITELLM),
        ("openai/qwen2.5", OWN, "auto", Road.OWN_SERVER),
        ("hosted_vllm/qwen2.5", OWN, "auto", Road.OWN_SERVER),
        ("openai/qwen2.5", OWN, "litellm", Road.LITELLM),
        ("anthropic/claude-sonnet-4-5", "", "auto", Road.LITELLM),
        ("claude-3-5-haiku-latest", "", "auto", Road.LITELLM),
        ("gemini/gemini-2.5-flash", "", "auto", Road.LITELLM),
        ("openrouter/openai/gpt-4o-mini", "", "auto", Road.LITELLM),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "", "auto", Road.LITELLM),
        ("ollama_chat/llama3.1", "", "auto", Road.LITELLM),
    ],
)
def test_the_road_of_each_model(model: str, api_base: str, client: str, road: Road) -> None:
    llm = LLMSettings(model=model, api_base=api_base, client=client)  # type: ignore[arg-type]
    assert road_of(llm) is road


def test_without_litellms_table_every_openai_model_goes_through_litellm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(litellm_map, "map_file", lambda: None)
    assert road_of(LLMSettings(model="openai/gpt-4o-mini")) is Road.LITELLM


NAMES = ["gpt-4o-mini", "gpt-4o", "gpt-4.1-nano", "gpt-4-turbo", "gpt-3.5-turbo", "gpt-4"]


@pytest.mark.parametrize("name", NAMES)
def test_what_the_table_says_is_what_litellm_says(name: str) -> None:
    litellm = load_litellm()
    listed = listing(name)
    assert listed is not None and listed.plain_chat
    info = litellm.get_model_info(f"openai/{name}")
    assert listed.window == (info.get("max_input_tokens") or info.get("max_tokens"))
    assert listed.function_calling == litellm.supports_function_calling(model=f"openai/{name}")
    assert listed.vision == litellm.supports_vision(model=f"openai/{name}")
    direct = LLMSettings(model=f"openai/{name}")
    through = LLMSettings(model=f"openai/{name}", client="litellm")
    assert road_of(direct) is Road.OPENAI
    assert window_of(direct) == window_of(through)
    assert supports_native_tools(direct, direct.model) == supports_native_tools(
        through, through.model
    )
    assert supports_vision(direct, direct.model) == supports_vision(through, through.model)


@pytest.mark.parametrize("name", ["gpt-4o-mini", "gpt-4.1", "gpt-3.5-turbo"])
def test_a_price_is_litellms_for_the_same_usage(name: str) -> None:
    """Cached prompt tokens at the cache-read price (the input price for a model without
    one, gpt-3.5-turbo), the rest at the input and output prices."""
    litellm = load_litellm()
    listed = listing(name)
    assert listed is not None
    usage = litellm.Usage(
        prompt_tokens=1_200,
        completion_tokens=300,
        total_tokens=1_500,
        prompt_tokens_details={"cached_tokens": 1_024},
    )
    response = litellm.ModelResponse(model=name, usage=usage)
    expected = litellm.completion_cost(completion_response=response, model=f"openai/{name}")
    assert listed.cost(1_200, 1_024, 300) == pytest.approx(expected)


def test_an_unlisted_model_has_no_price_no_window_native_tools_and_no_vision() -> None:
    llm = LLMSettings(model="openai/a-name-nobody-lists")
    assert road_of(llm) is Road.OPENAI and listing("a-name-nobody-lists") is None
    assert window_of(llm) is None
    assert supports_native_tools(llm, llm.model) and not supports_vision(llm, llm.model)


def test_an_entry_cut_out_of_the_table_is_the_entry_parsed_whole() -> None:
    found = map_file()
    assert found is not None, "LiteLLM keeps its table elsewhere: see litellm_map.py"
    text = found.read_text(encoding="utf-8")
    whole = json.loads(text)
    openai = [key for key, entry in whole.items() if entry.get("litellm_provider") == "openai"]
    assert len(openai) > 50
    for key in openai:
        assert litellm_map._entry(text, key) == whole[key], key
    assert litellm_map._entry(text, "input_cost_per_token") is None  # a field, not a model


def test_the_address_and_key_of_a_model_at_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    llm = LLMSettings(model="openai/gpt-4o-mini")
    assert route(llm.model) == ("openai", OPENAI_BASE)
    with pytest.raises(ModelUnusable) as caught:
        check_model(llm, "ENV")
    assert str(caught.value) == (
        "openai/gpt-4o-mini: no API key: set OPENAI_API_KEY (or PINCLAW_LLM__API_KEY) "
        "in your shell or in ENV"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real-0000")
    check_model(llm, "ENV")
    monkeypatch.setenv("OPENAI_API_BASE", "https://proxy.example/v1")
    assert route(llm.model) == ("openai", "https://proxy.example/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://first.example/v1")  # read first, as LiteLLM
    assert route(llm.model) == ("openai", "https://first.example/v1")
    assert route(llm.model, OPENAI_BASE) == ("openai", OPENAI_BASE)
