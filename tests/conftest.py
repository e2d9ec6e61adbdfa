"""Shared fixtures: an isolated home folder, the fake LLM, settings pointed at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM

# LiteLLM reads its bundled price map instead of fetching one at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

TEST_MODEL = "openai/test-model"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PINCLAW_HOME in a temporary folder, and no PINCLAW_* from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("PINCLAW_"):
            monkeypatch.delenv(name)
    path = tmp_path / "home"
    monkeypatch.setenv("PINCLAW_HOME", str(path))
    return path


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def llm_env(home: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment variables that point pinclaw at the fake LLM (also for subprocesses)."""
    values = {
        "PINCLAW_HOME": str(home),
        "PINCLAW_LLM__MODEL": TEST_MODEL,
        "PINCLAW_LLM__API_BASE": fake_llm.base_url,
        "PINCLAW_LLM__RETRY_BACKOFF_S": "0.01",
        "OPENAI_API_KEY": "sk-test-key-not-real-0000",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
