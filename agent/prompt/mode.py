"""The prompt mode a model gets, and why: chosen from its profile (agent/model/profiles/)
unless the owner set it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.config import LLMSettings, Settings
from agent.model.profiles.builtin import ModelProfile
from agent.prompt.context import PromptMode

SMALL_WINDOW = 8_192  # a window this small or smaller gets the compact prompt


@dataclass(frozen=True)
class ModeChoice:
    mode: PromptMode
    why: str
    window: int | None  # what the first request must fit, when known or assumed


def choose_mode(settings: Settings, profile: ModelProfile) -> ModeChoice:
    """The prompt mode: as the owner set it, else compact for a model served locally or a
    window of 8,192 tokens or less, else full."""
    agent, llm = settings.agent, settings.llm
    window = profile.fitting_window
    if agent.prompt_mode != "auto":
        return ModeChoice(agent.prompt_mode, f'agent.prompt_mode = "{agent.prompt_mode}"', window)
    if isinstance(agent.compact_context, bool):
        mode: PromptMode = "compact" if agent.compact_context else "full"
        return ModeChoice(mode, f"agent.compact_context = {str(mode == 'compact').lower()}", window)
    if profile.local:
        return ModeChoice("compact", f"served locally ({where_served(llm)})", window)
    if window is not None and window <= SMALL_WINDOW:
        return ModeChoice("compact", f"a context window of {window:,} tokens", window)
    return ModeChoice("full", "a hosted model, no small context window known", window)


def where_served(llm: LLMSettings) -> str:
    if llm.model.startswith(("ollama/", "ollama_chat/")):
        return "an Ollama model"
    return f"api_base on {urlsplit(llm.api_base).hostname}"
