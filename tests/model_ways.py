"""The three ways a model call goes (agent/model/profiles/routes.py's roads), for the model
client's tests: each test of a module that imports `each_way` runs once per way, over the
fake LLM — as a server of one's own, as OpenAI itself (the fake through OPENAI_BASE_URL),
and through LiteLLM."""

from __future__ import annotations

import pytest
from fakes.llm_server import FakeLLM

from agent.config import LLMSettings
from agent.model.client import LLMClient

# The settings of each way, over the fake as llm.api_base.
WAYS: dict[str, dict[str, str]] = {
    "own server": {"client": "auto"},
    "openai": {"client": "auto", "api_base": ""},
    "litellm": {"client": "litellm"},
}
# The same two priced ways as environment variables, for a daemon's tests (the budget, the
# usage rows): the fake as a provider LiteLLM calls (it is local, so a model at it is priced
# only through LiteLLM), and as OpenAI itself (no api_base; the OpenAI SDK, at OPENAI_BASE_URL).
PRICED_WAYS = {
    "litellm": {"PINCLAW_LLM__CLIENT": "litellm"},
    "openai": {"PINCLAW_LLM__API_BASE": ""},
}
VIA: dict[str, str] = {}  # the way of the running test, set by `each_way`


@pytest.fixture(autouse=True, params=list(WAYS))
def each_way(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM
) -> None:
    monkeypatch.setitem(VIA, "way", request.param)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)  # read without an api_base


def client_over(fake: FakeLLM, **overrides: object) -> LLMClient:
    """An LLMClient of model openai/primary over `fake`, the running test's way; `overrides`:
    other settings (num_retries, fallbacks...)."""
    options: dict[str, object] = {
        "model": "openai/primary",
        "api_base": fake.base_url,
        "retry_backoff_s": 0.01,
        **WAYS[VIA["way"]],
        **overrides,
    }
    return LLMClient(LLMSettings(**options))  # type: ignore[arg-type]
