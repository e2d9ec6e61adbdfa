"""`agent prompt show`: the exact prompt a channel's model receives, or its size by section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from agent.app import build_tools, make_board, prompt_source
from agent.config import Settings
from agent.prompt.context import PromptMode, SectionText
from agent.prompt.skills import SkillCatalog
from agent.turns.dispatch import configured_dispatcher
from agent.workspace import ensure_workspace
from channels.capabilities import BY_NAME, DELIVERY_BY_NAME
from tools.policy import SecurityPolicy


@dataclass(frozen=True)
class Inspected:
    text: str
    sections: tuple[SectionText, ...]
    budget_tokens: int


def _mode(mode: str | None) -> PromptMode | None:
    if mode in (None, "full", "minimal", "none"):
        return cast("PromptMode | None", mode)
    raise ValueError(f"unknown prompt mode {mode!r}")


def inspect_prompt(settings: Settings, channel: str, mode: str | None) -> Inspected:
    """The prompt as the channel's runtime builds it at start, with its sections."""
    ensure_workspace(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(
        settings.security, settings.workspace_dir, home=settings.home
    )
    skills = SkillCatalog.from_settings(settings)  # one catalog: each skipped skill logged once
    tools = build_tools(settings, policy, make_board(settings), skills)
    source = prompt_source(settings, tools, policy, skills=skills)
    ctx = source.context(
        channel,
        BY_NAME[channel],
        dispatcher=configured_dispatcher(settings.agent.tool_dispatcher, settings.llm.model),
        mode=_mode(mode),
    )
    built = source.build(ctx)
    sections, text = built.sections, built.text
    delivery = DELIVERY_BY_NAME[channel]
    if delivery and settings.agent.delivery_instructions == "system_prompt":
        sections = (*sections, SectionText("delivery_instructions", delivery))
        text = f"{text}\n\n{delivery}"
    return Inspected(text, sections, source.budget_tokens)


def prompt_text(settings: Settings, channel: str, mode: str | None) -> str:
    return inspect_prompt(settings, channel, mode).text


def prompt_stats(settings: Settings, channel: str, mode: str | None) -> str:
    """A table: one row per section with characters and tokens (LiteLLM's counter for the
    configured model), then the total and the budget."""
    from agent.llm import count_tokens

    found = inspect_prompt(settings, channel, mode)
    model = settings.llm.model
    rows = [(s.name, len(s.text), count_tokens(model, s.text)) for s in found.sections]
    width = max([len("section"), *(len(name) for name, _, _ in rows)])
    lines = [f"{'section':<{width}}  {'chars':>7}  {'tokens':>7}"]
    lines += [f"{name:<{width}}  {chars:>7,}  {tokens:>7,}" for name, chars, tokens in rows]
    total = count_tokens(model, found.text)
    lines.append(f"{'total':<{width}}  {len(found.text):>7,}  {total:>7,}")
    lines.append(f"{'budget':<{width}}  {'':>7}  {found.budget_tokens:>7,}")
    return "\n".join(lines)
