"""Many tools, a small prompt: the schemas of deferrable tools loaded when the model asks.

A tool that says `deferrable = True` (an MCP server's) may wait to be loaded. When the
schemas of all offered tools would pass `[agent] tool_schema_budget_tokens`, the prompt
lists each deferrable tool by its name and one line (too many for that, a third of the
budget: by name only, a line per server), and `tools=` carries only the core tools and two
more: `find_tools` (which of them fit a few words) and `load_tool` (a tool's
full schema, returned as its result and sent with the turn's following requests). ZeroClaw
does the same with its `tool_search`; OpenClaw's tool search describes a tool only when the
model picks it.

Deferral hides schemas, never tools: a call of any registered tool by name runs it, loaded
or not (a tool loaded in an earlier turn of the chat may simply be called again). What a
turn loaded lives in that turn's view (`TurnTools`), made afresh for each turn. Without a
deferrable tool, under the budget, or when hiding would save less than the listing and the
two tools cost, nothing changes: the prompt and `tools=` are what they were.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent.prompt.compact import CompactTools, short_text
from agent.prompt.context import TokenCounter, ToolInfo
from tools.base import FunctionTool, Tool, ToolCallContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

FIND_TOOLS = "find_tools"
LOAD_TOOL = "load_tool"
SUMMARY_CHARS = 80  # a deferred tool's line in the prompt, at most
LISTING_SHARE = 3  # lines of their own while they take at most a third of the budget
FOUND_MAX = 5  # tools find_tools names at most


def is_deferrable(tool: Tool) -> bool:
    """Whether `tool` may wait to be loaded (the core tools never do)."""
    return getattr(tool, "deferrable", False) is True


def one_line(description: str) -> str:
    """A description's first clause, without examples, cut to SUMMARY_CHARS."""
    line = short_text(description) or "(no description)"
    if len(line) <= SUMMARY_CHARS:
        return line
    return line[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0].rstrip(".,;:") + "…"


@dataclass(frozen=True)
class Deferral:
    """The tools whose schemas wait to be loaded, each with its one line (find_tools
    answers with these); `by_server`: too many for a line each, the prompt names them only,
    a line per server (`github__: create_issue, list_issues`)."""

    tools: tuple[ToolInfo, ...] = ()
    by_server: bool = False

    @property
    def names(self) -> frozenset[str]:
        return frozenset(info.name for info in self.tools)

    def listing(self) -> tuple[ToolInfo, ...]:
        """What the prompt lists, as `- name: line` each."""
        if not self.by_server:
            return self.tools
        groups: dict[str, list[str]] = {}
        alone: list[ToolInfo] = []
        for info in self.tools:
            server, cut, tool = info.name.partition("__")
            if cut and server and tool:
                groups.setdefault(f"{server}__", []).append(tool)
            else:
                alone.append(info)
        return (*(ToolInfo(server, ", ".join(names)) for server, names in groups.items()), *alone)


def listing_text(deferral: Deferral) -> str:
    return "\n".join(f"- {info.name}: {info.description}" for info in deferral.listing())


NO_DEFERRAL = Deferral()


def plan_deferral(tools: ToolRegistry, budget: int, count: TokenCounter) -> Deferral:
    """Which deferrable tools to hide: all of them when the schemas of every offered tool
    pass `budget` (0: never) and hiding them saves more than listing them costs."""
    candidates = [item for item in tools if is_deferrable(item)]
    if not candidates or budget <= 0:
        return NO_DEFERRAL
    taken = {FIND_TOOLS, LOAD_TOOL} & set(tools.names())
    if taken:
        log.warning("tool schemas not deferred: a tool is named %s", ", ".join(sorted(taken)))
        return NO_DEFERRAL
    schemas = tools.schemas()
    every = json.dumps(schemas)
    # A token is at least a byte: within the budget in bytes, no tokenizer is loaded.
    if len(every.encode()) <= budget or count(every) <= budget:
        return NO_DEFERRAL
    deferral = Deferral(
        tuple(ToolInfo(item.name, one_line(item.description)) for item in candidates)
    )
    if count(listing_text(deferral)) > budget // LISTING_SHARE:
        deferral = Deferral(deferral.tools, by_server=True)
    hidden = [s for s in schemas if s["function"]["name"] in deferral.names]
    added = json.dumps(TurnTools(tools, deferral).loader_schemas()) + listing_text(deferral)
    if count(json.dumps(hidden)) <= count(added):
        return NO_DEFERRAL  # a few small tools: cheaper to send them whole
    return deferral


_WORD = re.compile(r"[a-z0-9]+")
_COMMON = frozenset({"a", "an", "the", "to", "of", "in", "on", "for", "and", "or", "with", "my"})


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _COMMON


def _near(word: str, words: set[str]) -> bool:
    """One is the other with an ending ("issue", "issues"): both at least four letters."""
    return len(word) >= 4 and any(
        len(other) >= 4 and (other.startswith(word) or word.startswith(other)) for other in words
    )


def best_matches(query: str, tools: Iterable[ToolInfo], limit: int = FOUND_MAX) -> list[ToolInfo]:
    """The tools whose name or line share most words with `query`, best first (a word in
    the name counts most, a word only near one least). Hand-written: a few dozen one-line
    entries need no search engine."""
    wanted = _words(query)
    scored: list[tuple[float, int, ToolInfo]] = []
    for index, info in enumerate(tools):
        name, line = _words(info.name), _words(info.description)
        score = 0.0
        for word in wanted:
            if word in name:
                score += 3
            elif word in line:
                score += 1.5
            elif _near(word, name):
                score += 2
            elif _near(word, line):
                score += 1
        if score:
            scored.append((-score, index, info))
    return [info for _, _, info in sorted(scored, key=lambda row: row[:2])[:limit]]


class TurnTools(ToolRegistry):
    """One turn's tools: every registered tool runs by name, and `schemas()` is the core
    tools, find_tools and load_tool, then the tools this turn loaded, in the order loaded.
    Asked again before each request, so a tool loaded in one is sent with the next."""

    def __init__(self, tools: ToolRegistry, deferral: Deferral) -> None:
        self.base = tools
        self.deferral = deferral
        self.loaded: list[str] = []
        loaders: list[Tool] = [
            FunctionTool(self._find, name=FIND_TOOLS),
            FunctionTool(self._load, name=LOAD_TOOL),
        ]
        plain = ToolRegistry(loaders)
        self._loaders = CompactTools(plain) if isinstance(tools, CompactTools) else plain
        super().__init__([*tools, *loaders])

    def loader_schemas(self) -> list[dict[str, Any]]:
        return self._loaders.schemas()

    def offered(self) -> list[Tool]:
        """The tools the prompt shows whole: all but the deferred ones."""
        hidden = self.deferral.names
        return [item for item in super().offered() if item.name not in hidden]

    def schemas(self) -> list[dict[str, Any]]:
        every = self.base.schemas()
        hidden = self.deferral.names
        loaded = {s["function"]["name"]: s for s in every if s["function"]["name"] in hidden}
        shown = [s for s in every if s["function"]["name"] not in hidden]
        return [*shown, *self.loader_schemas(), *(loaded[name] for name in self.loaded)]

    async def _find(self, call: ToolCallContext, query: str) -> ToolResult:
        """Find tools to load by what they do: their names, each with one line.

        Args:
            query: A few words of what you need, e.g. "create issue" or "read file".
        """
        found = best_matches(query, self.deferral.tools)
        if not found:
            return ToolResult.success(
                f"No tool to load matches {query!r}. Try other words, or pick a name from "
                "the tools to load in your instructions."
            )
        lines = [f"- {info.name}: {info.description}" for info in found]
        return ToolResult.success("\n".join([*lines, "Load one with load_tool, then call it."]))

    async def _load(self, call: ToolCallContext, name: str) -> ToolResult:
        """Load a tool that waits to be loaded: returns its parameters; then call it.

        Args:
            name: The tool's name; several separated by commas.
        """
        names = [self._resolved(part.strip()) for part in name.split(",") if part.strip()]
        if not names:
            return ToolResult.error("Give load_tool the name of a tool from the tools to load")
        parts: list[str] = []
        unknown: list[str] = []
        for wanted in names:
            if wanted in self.deferral.names:
                if wanted not in self.loaded:
                    self.loaded.append(wanted)
                parts.append(
                    f"Loaded {wanted}; call it with these parameters:\n{self._spec(wanted)}"
                )
            elif self.get(wanted) is not None:
                parts.append(f"{wanted} needs no loading: call it directly.")
            else:
                unknown.append(wanted)
        if unknown:
            missing = self._unknown(unknown)
            if not parts:
                return ToolResult.error(missing)
            parts.append(missing)
        return ToolResult.success("\n".join(parts))

    def _resolved(self, name: str) -> str:
        """A deferred tool's name given without its server's prefix ("create_issue" for
        "github__create_issue") when only one tool ends so; else the name as given."""
        if name in self.deferral.names:
            return name
        ending = [known for known in self.deferral.names if known.endswith(f"__{name}")]
        return ending[0] if len(ending) == 1 else name

    def _spec(self, name: str) -> str:
        """The tool's schema as `tools=` carries it, as one line of JSON."""
        for schema in self.base.schemas():
            function = schema["function"]
            if function["name"] == name:
                return json.dumps(function, ensure_ascii=False, separators=(",", ":"))
        return "{}"

    def _unknown(self, names: list[str]) -> str:
        """What to do about names no tool has: the nearest ones, or find_tools."""
        said = ", ".join(repr(name) for name in names)
        near = best_matches(" ".join(names), self.deferral.tools, limit=3)
        if near:
            hint = "Did you mean " + ", ".join(info.name for info in near) + "?"
        else:
            hint = "find_tools finds tools by what they do."
        return f"No tool is named {said}. {hint}"
