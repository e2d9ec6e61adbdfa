"""`agent prompt show`: the exact prompt a channel's model receives, or its size by section
and what the model's first request weighs in the mode it gets (`--stats [--model NAME]`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from agent.app import build_tools, prompt_source
from agent.config import LLMSettings, Settings
from agent.durable.learned_model_facts import LearnedModelFacts, learned_rows
from agent.durable.store import read_state
from agent.model.profiles.builtin import LOCAL_WINDOW, ModelProfile
from agent.proactive.hardware import make_boards
from agent.prompt.context import Dispatch, PromptMode, SectionText
from agent.prompt.mode import ModeChoice
from agent.prompt.skills import SkillCatalog
from agent.turns.dispatch import configured_dispatcher
from agent.workspace import ensure_workspace
from channels.registry import capabilities_of, delivery_of
from tools.policy import SecurityPolicy

MODES = ("full", "compact", "minimal", "none")


@dataclass(frozen=True)
class Inspected:
    text: str
    sections: tuple[SectionText, ...]
    budget_tokens: int
    schemas: list[dict[str, Any]]  # the `tools=` list sent along (none with the xml protocol)
    choice: ModeChoice  # the mode the model gets, and why
    profile: ModelProfile
    dispatcher: Dispatch


def _mode(mode: str | None) -> PromptMode | None:
    if mode is None or mode in MODES:
        return cast("PromptMode | None", mode)
    raise ValueError(f"unknown prompt mode {mode!r}")


def with_model(settings: Settings, model: str | None) -> Settings:
    """The settings as they would be with `model` (same api_base, workspace and tools)."""
    if not model:
        return settings
    return settings.model_copy(update={"llm": settings.llm.model_copy(update={"model": model})})


def dispatcher_for(settings: Settings) -> Dispatch:
    """The way tools travel, as a turn picks it: a lesson or a profile without native calls
    first (agent/durable/learned_model_facts.py), then agent.tool_dispatcher."""
    model = settings.llm.model
    if model in LearnedModelFacts(read_state(settings, learned_rows) or []).xml_tools:
        return "xml"
    return configured_dispatcher(settings, model)


def inspect_prompt(
    settings: Settings, channel: str, mode: str | None, model: str | None = None
) -> Inspected:
    """The prompt as the channel's runtime builds it at start, with its sections."""
    settings = with_model(settings, model)
    ensure_workspace(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(
        settings.security, settings.workspace_dir, home=settings.home
    )
    skills = SkillCatalog.from_settings(settings)  # one catalog: each skipped skill logged once
    tools = build_tools(settings, policy, make_boards(settings), skills)
    source = prompt_source(settings, tools, policy, skills=skills)
    dispatcher = dispatcher_for(settings)
    shown = capabilities_of(channel)
    ctx = source.context(channel, shown, dispatcher=dispatcher, mode=_mode(mode))
    built = source.build(ctx)
    sections, text = built.sections, built.text
    delivery = delivery_of(channel)
    if delivery and settings.agent.delivery_instructions == "system_prompt":
        sections = (*sections, SectionText("delivery_instructions", delivery))
        text = f"{text}\n\n{delivery}"
    schemas = source.turn_tools().schemas() if dispatcher == "native" else []  # as a turn sends
    if ctx.mode != source.choice.mode:  # --mode: the schemas follow the mode asked for
        choice = ModeChoice(ctx.mode, "--mode", source.choice.window)
        schemas = _schemas(tools, ctx.mode) if schemas else []
    else:
        choice = source.choice
    budget = source.budget_for(ctx)
    return Inspected(text, sections, budget, schemas, choice, source.profile, dispatcher)


def _schemas(tools: Any, mode: str) -> list[dict[str, Any]]:
    from agent.prompt.compact import CompactTools

    return list(CompactTools(tools).schemas() if mode == "compact" else tools.schemas())


def prompt_stats(
    settings: Settings, channel: str, mode: str | None, model: str | None = None
) -> tuple[str, str]:
    """A table: one row per section with characters and tokens (counted as the budget
    counts them for the model), then the total and the budget; and what the model gets, for
    stderr: its profile, the mode and why, and the first request (prompt + tool schemas)."""
    from agent.model.profiles.litellm_facts import token_counter

    found = inspect_prompt(settings, channel, mode, model)
    model = model or settings.llm.model
    count = token_counter(settings.llm, model)
    rows = [(s.name, len(s.text), count(s.text)) for s in found.sections]
    width = max([len("section"), *(len(name) for name, _, _ in rows)])
    lines = [f"{'section':<{width}}  {'chars':>7}  {'tokens':>7}"]
    lines += [f"{name:<{width}}  {chars:>7,}  {tokens:>7,}" for name, chars, tokens in rows]
    total = count(found.text)
    lines.append(f"{'total':<{width}}  {len(found.text):>7,}  {total:>7,}")
    lines.append(f"{'budget':<{width}}  {'':>7}  {found.budget_tokens:>7,}")
    schemas = count(json.dumps(found.schemas)) if found.schemas else 0
    return "\n".join(lines), _summary(found, settings.llm, model, total, schemas)


def _summary(found: Inspected, llm: LLMSettings, model: str, prompt: int, schemas: int) -> str:
    profile, choice = found.profile, found.choice
    about = f"{profile.family}: {profile.works}" if profile.family else "no built-in profile"
    tools = (
        f"+ {schemas:,} in {len(found.schemas)} tool schemas"
        if found.schemas
        else "(its tools in it: the <tool_call> text protocol)"
    )
    first = prompt + schemas
    window = choice.window
    room = f"; {window - first:,} of a {window:,}-token window left" if window else ""
    if window is None:
        from agent.model.profiles.litellm_facts import window_of

        known = window_of(llm, model)
        window_line = f"{known:,} tokens (LiteLLM's table)" if known else "unknown"
    else:
        window_line = _window_line(profile, window)
    return "\n".join(
        [
            f"model          {model} ({about})",
            f"mode           {choice.mode}: {choice.why}",
            f"window         {window_line}",
            f"first request  {prompt:,} system prompt {tools} = {first:,} tokens{room}",
        ]
    )


def _window_line(profile: ModelProfile, window: int) -> str:
    if profile.served_window:
        return f"{window:,} tokens (its server said so: `agent doctor --check-model`)"
    if window == LOCAL_WINDOW:
        return (
            f"{window:,} tokens assumed: what Ollama, llama-server and LM Studio serve unless "
            "started with more (`agent doctor --check-model` asks the server)"
        )
    return f"{window:,} tokens (its profile)"
