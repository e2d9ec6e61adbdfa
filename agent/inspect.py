"""`agent prompt show`: the exact prompt a channel's model receives, or its size by section."""

from __future__ import annotations

from agent.app import build_tools, prompt_source
from agent.config import Settings
from agent.prompt import PromptMode
from agent.workspace import ensure_workspace
from channels.capabilities import BY_NAME
from tools.policy import SecurityPolicy


def _built(
    settings: Settings, channel: str, mode: str | None
) -> tuple[str, list[tuple[str, str]], int]:
    ensure_workspace(settings.workspace_dir)
    policy = SecurityPolicy.from_settings(settings.security, settings.workspace_dir)
    source = prompt_source(settings, build_tools(settings, policy), policy)
    chosen: PromptMode | None = mode  # type: ignore[assignment]
    ctx = source.context(channel, BY_NAME[channel], mode=chosen)
    built = source.build(ctx)
    return built.text, [(s.name, s.text) for s in built.sections], source.budget_tokens


def prompt_text(settings: Settings, channel: str, mode: str | None) -> str:
    return _built(settings, channel, mode)[0]


def prompt_stats(settings: Settings, channel: str, mode: str | None) -> str:
    from agent.llm import count_tokens

    text, sections, budget = _built(settings, channel, mode)
    model = settings.llm.model
    rows = [(name, len(body), count_tokens(model, body)) for name, body in sections]
    width = max([len("section"), *(len(name) for name, _, _ in rows)])
    lines = [f"{'section':<{width}}  {'chars':>7}  {'tokens':>7}"]
    lines += [f"{name:<{width}}  {chars:>7,}  {tokens:>7,}" for name, chars, tokens in rows]
    lines.append(f"{'total':<{width}}  {len(text):>7,}  {count_tokens(model, text):>7,}")
    lines.append(f"{'budget':<{width}}  {'':>7}  {budget:>7,}")
    return "\n".join(lines)
