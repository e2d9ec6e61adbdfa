"""The builder: pluggable sections in order, joined, and shrunk to fit a token budget.

Sections read only the PromptContext (and the workspace files it points at), so the same
context always gives the same bytes; nothing in it changes with the clock, which keeps
provider prompt caches warm across turns.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent.prompt.context import (
    IDENTITY_LINE,
    PromptContext,
    PromptSection,
    SectionText,
    TokenCounter,
)
from agent.prompt.sections import default_sections
from agent.workspace import BOOTSTRAP_FLOOR_CHARS

log = logging.getLogger(__name__)

_SHRINK_STEPS = (0.75, 0.5, 0.3, 0.15, 0.0)
NONE_MODE_XML_SECTIONS = frozenset({"tools"})  # what mode "none" keeps with the xml dispatcher


@dataclass(frozen=True)
class BuiltPrompt:
    text: str
    sections: tuple[SectionText, ...]
    cuts: tuple[str, ...] = ()  # what the budget cut, in order


class SystemPromptBuilder:
    def __init__(self, sections: Sequence[PromptSection] = ()) -> None:
        self._sections: list[PromptSection] = list(sections)

    @classmethod
    def with_defaults(cls) -> SystemPromptBuilder:
        return cls(default_sections())

    def sections(self, ctx: PromptContext) -> tuple[SectionText, ...]:
        if ctx.mode != "none":
            return self._built(ctx, self._sections)
        # One identity line; but with the xml dispatcher no tools= carries the tools, so the
        # Tools section (with its call protocol) is the only way the model learns of them.
        tools = [s for s in self._sections if s.name in NONE_MODE_XML_SECTIONS]
        kept = self._built(ctx, tools) if ctx.dispatcher == "xml" else ()
        return (SectionText("identity", IDENTITY_LINE), *kept)

    @staticmethod
    def _built(ctx: PromptContext, chosen: Sequence[PromptSection]) -> tuple[SectionText, ...]:
        built = (SectionText(s.name, s.build(ctx).strip()) for s in chosen)
        return tuple(section for section in built if section.text)

    def build(self, ctx: PromptContext) -> str:
        return join(self.sections(ctx))

    def build_within(
        self, ctx: PromptContext, budget_tokens: int, count: TokenCounter
    ) -> BuiltPrompt:
        """Build, then shrink until the prompt fits the budget: workspace files first
        (proportionally, down to a floor), then skills to compact, then to names only.
        Tools, Safety and Channel Capabilities are never cut. One warning names the cuts."""
        sections = self.sections(ctx)
        text = join(sections)
        # A token is at least one byte of UTF-8, so a prompt with no more bytes than the
        # budget fits without loading a tokenizer (which costs a quarter second).
        if len(text.encode()) <= budget_tokens or count(text) <= budget_tokens:
            return BuiltPrompt(text, sections)
        cuts: dict[str, str] = {}  # kind -> label of the deepest cut of that kind
        for attempt in _shrunk_contexts(ctx):
            smaller = self.sections(attempt.ctx)
            smaller_text = join(smaller)
            if len(smaller_text) >= len(text):
                continue  # this step cuts nothing more
            cuts[attempt.kind] = attempt.label
            sections, text = smaller, smaller_text
            if count(text) <= budget_tokens:
                break
        still_over = count(text) > budget_tokens
        log.warning(
            "system prompt over its budget of %d tokens: %s%s",
            budget_tokens,
            "; ".join(cuts.values()) or "nothing could be cut",
            " (still over: raise agent.prompt_budget_tokens)" if still_over else "",
        )
        return BuiltPrompt(text, sections, tuple(cuts.values()))


@dataclass(frozen=True)
class _Attempt:
    ctx: PromptContext
    kind: str
    label: str


def _shrunk_contexts(ctx: PromptContext) -> list[_Attempt]:
    """The shrinking steps, each smaller than the one before, in the fixed order."""
    steps = [
        _Attempt(
            replace(ctx, bootstrap_scale=scale),
            "workspace",
            _workspace_cut(scale),
        )
        for scale in _SHRINK_STEPS
    ]
    smallest = steps[-1].ctx
    with_skills = ctx.mode in ("full", "compact") and bool(ctx.skills)
    if with_skills and ctx.skills_mode == "full":
        compact = replace(smallest, skills_mode="compact")
        steps.append(_Attempt(compact, "skills", "skills listed compactly"))
    if with_skills:
        names = replace(smallest, skills_mode="names")
        steps.append(_Attempt(names, "skills", "skills listed by name only"))
    return steps


def _workspace_cut(scale: float) -> str:
    if scale <= 0:
        return f"workspace files cut to at most {BOOTSTRAP_FLOOR_CHARS} characters each"
    return (
        f"workspace files cut to {scale:.0%} of their length "
        f"(at least {BOOTSTRAP_FLOOR_CHARS} characters each)"
    )


def join(sections: Sequence[SectionText]) -> str:
    return "\n\n".join(section.text for section in sections)
