"""What the channel prompts are built from, and a cheap fingerprint of it.

A runtime keeps its prompt until the fingerprint changes: a workspace file's mtime or
size, the skills, or the tool set. Checking costs a few `stat` calls per turn: the paths are
worked out once, and the skills folder is listed again only when its own mtime moves (or
is too recent to trust).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import Settings
from agent.model.profiles.builtin import ModelProfile
from agent.model.profiles.lookup import profile_for
from agent.prompt.builder import BuiltPrompt, SystemPromptBuilder
from agent.prompt.compact import COMPACT_SKILLS_CHARS, CompactTools, compact_tool_infos, pin_guide
from agent.prompt.context import (
    Dispatch,
    HostInfo,
    IdentityInfo,
    PromptContext,
    PromptMode,
    TokenCounter,
    ToolInfo,
)
from agent.prompt.deferred_tools import NO_DEFERRAL, Deferral, TurnTools, plan_deferral
from agent.prompt.mode import ModeChoice, choose_mode
from agent.prompt.skills import SkillCatalog
from agent.workspace import BOOTSTRAP_FILES, SKILLS
from channels.capabilities import ChannelCapabilities
from tools.base import Tool, ToolRegistry, lean_schema
from tools.board.pin_names import PinNames
from tools.config import configured_boards
from tools.paths import PathRules
from tools.policy import SecurityPolicy

DEFAULT_BUDGET_TOKENS = 8_000
RACY_S = 2.0  # a folder changed this recently may change again within the same mtime
COMPACT_BOOTSTRAP_CHARS = 6_000

Fingerprint = tuple[object, ...]


def host_info() -> HostInfo:
    return HostInfo(
        host=socket.gethostname(),
        os=f"{platform.system()} {platform.release()} ({platform.machine()})",
        python=platform.python_version(),
    )


def host_timezone() -> str:
    """The host's IANA zone name: $TZ, /etc/timezone, or the zoneinfo file's name."""
    from_env = os.environ.get("TZ", "").lstrip(":")
    if from_env and not from_env.startswith("/"):
        return from_env
    if not from_env:
        try:
            return Path("/etc/timezone").read_text(encoding="utf-8").strip() or "UTC"
        except OSError:
            pass
    target = os.path.realpath(from_env or "/etc/localtime")  # TZ=":/etc/localtime" is a file
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "UTC"


@dataclass
class PromptSource:
    settings: Settings
    tools: ToolRegistry
    builder: SystemPromptBuilder
    security_summary: str
    host: HostInfo
    count_tokens: TokenCounter
    budget_tokens: int
    skills: SkillCatalog | None = None  # None: the settings' skills
    # What state.db holds about the model (agent/durable/learned_model_facts.py's `about`)
    learned: Mapping[str, str] = field(default_factory=dict)
    workspace: Path = field(init=False)
    files: PathRules = field(init=False)  # the workspace's files, opened as the tools' are
    profile: ModelProfile = field(init=False)  # what is known of the model (profile_for)
    choice: ModeChoice = field(init=False)  # the prompt mode it gets, and why
    _watched: tuple[str, ...] = field(init=False, repr=False)  # the files whose stat counts
    _skill_folders: SkillFolders = field(init=False, repr=False)
    _host_zone: tuple[str | None, str] | None = field(default=None, init=False, repr=False)
    # The deferral planned for a tool set: (the registry, its names) it was planned for.
    _deferral: tuple[object, Deferral] = field(default=((), NO_DEFERRAL), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.skills is None:
            self.skills = SkillCatalog.from_settings(self.settings)
        self.workspace = self.settings.workspace_dir
        security = self.settings.security
        self.files = SecurityPolicy.from_settings(
            security, self.workspace, home=self.settings.home
        ).paths
        watched = [self.workspace / name for name in BOOTSTRAP_FILES]
        aieos = self.settings.identity.aieos_path
        if aieos:
            watched.append(self.workspace / Path(aieos).expanduser())
        self._watched = tuple(os.fspath(path) for path in watched)
        self._skill_folders = SkillFolders(os.fspath(self.workspace / SKILLS))
        self._fit_model()

    def _fit_model(self) -> None:
        """The mode for this model; in compact mode the tools' `tools=` schemas are compact
        too."""
        llm = self.settings.llm
        self.profile = profile_for(llm.model, llm.api_base, self.learned)
        self.choice = choose_mode(self.settings, self.profile)
        full = self.tools.full if isinstance(self.tools, CompactTools) else self.tools
        self.tools = CompactTools(full) if self.choice.mode == "compact" else full

    def deferral(self) -> Deferral:
        """The tools whose schemas wait to be loaded (agent/prompt/deferred_tools.py),
        planned again only when the tool set changes."""
        key = (self.tools, tuple(self.tools.names()))  # a registry equals only itself
        if self._deferral[0] != key:
            budget = self.settings.agent.tool_schema_budget_tokens
            self._deferral = (key, plan_deferral(self.tools, budget, self.count_tokens))
        return self._deferral[1]

    def turn_tools(self) -> ToolRegistry:
        """The tools one turn offers: the registry itself, or when some schemas wait to be
        loaded a fresh view that remembers what this turn loads."""
        deferral = self.deferral()
        return TurnTools(self.tools, deferral) if deferral.tools else self.tools

    def budget_for(self, ctx: PromptContext) -> int:
        """The budget; a compact prompt's is capped by the window the requests must fit (a
        local server's): a third of it beside native tools' schemas, which take about as
        much again, half of it with the text protocol, whose tools are in the prompt."""
        window = self.choice.window
        if ctx.mode != "compact" or not window or self.settings.agent.prompt_budget_tokens:
            return self.budget_tokens
        return min(self.budget_tokens, window // (2 if ctx.dispatcher == "xml" else 3))

    @property
    def timezone(self) -> str:
        """The configured zone, else the host's (read again only when $TZ changes)."""
        configured = self.settings.agent.timezone
        if configured:
            return configured
        tz = os.environ.get("TZ")
        if self._host_zone is None or self._host_zone[0] != tz:
            self._host_zone = (tz, host_timezone())
        return self._host_zone[1]

    def context(
        self,
        channel: str,
        capabilities: ChannelCapabilities,
        *,
        dispatcher: Dispatch = "native",
        mode: PromptMode | None = None,
        private: bool = True,
    ) -> PromptContext:
        agent = self.settings.agent
        mode = mode or self.choice.mode
        compact = mode == "compact"
        per_file = self.settings.workspace.bootstrap_max_chars
        if agent.compact_context is True or compact:
            per_file = min(per_file, COMPACT_BOOTSTRAP_CHARS)
        identity = self.settings.identity
        skills = self.skills.infos() if self.skills is not None else ()
        skills_chars = self.settings.skills.max_prompt_chars
        offered = self.turn_tools()
        shown = offered.offered()
        return PromptContext(
            workspace_dir=self.workspace,
            model_name=self.settings.llm.model,
            channel=channel,
            capabilities=capabilities,
            host=self.host,
            timezone=self.timezone,
            tools=compact_tool_infos(shown) if compact else tool_infos(shown),
            deferred_tools=self.deferral().listing(),
            deferred_by_server=self.deferral().by_server,
            skills=skills,
            skills_mode=self.settings.skills.mode,
            skills_max_chars=min(skills_chars, COMPACT_SKILLS_CHARS) if compact else skills_chars,
            identity=IdentityInfo(identity.format, identity.aieos_path, identity.aieos_inline),
            dispatcher=dispatcher,
            security_summary=self.security_summary,
            autonomy=self.settings.security.autonomy,
            mode=mode,
            bootstrap_max_chars=per_file,
            bootstrap_total_max_chars=self.settings.workspace.bootstrap_total_max_chars,
            heartbeat_enabled=self.settings.heartbeat.enabled,
            private=private,
            files=self.files,
            pin_guide=pin_guide(self.tools) if compact else "",
            boards=board_lines(self.settings),
        )

    def build(self, ctx: PromptContext) -> BuiltPrompt:
        return self.builder.build_within(ctx, self.budget_for(ctx), self.count_tokens)

    def fingerprint(self) -> Fingerprint:
        stats: list[object] = [tuple(self.tools.names())]
        stats.extend(_stat(path) for path in self._watched)
        for name, skill in self._skill_folders.skill_files():
            found = _stat(skill)
            if found is not None:
                stats.append((name, found))
        return tuple(stats)


class SkillFolders:
    """The workspace's skill folders, listed again only when the skills folder's mtime
    moves, or while it is too recent to trust (two changes within one mtime tick)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._seen: tuple[int, int] | None = None  # the root's mtime_ns and size when listed
        self._listed_at = 0.0
        self._files: list[tuple[str, str]] = []  # (folder name, its SKILL.md), sorted

    def skill_files(self) -> list[tuple[str, str]]:
        try:
            info = os.stat(self.root)
        except OSError:
            self._seen, self._files = None, []
            return self._files
        seen = (info.st_mtime_ns, info.st_size)
        if seen != self._seen or self._listed_at - info.st_mtime_ns / 1e9 < RACY_S:
            self._listed_at = time.time()
            self._files = self._list()
            self._seen = seen
        return self._files

    def _list(self) -> list[tuple[str, str]]:
        try:
            with os.scandir(self.root) as entries:
                folders = sorted(entry.name for entry in entries if entry.is_dir())
        except OSError:
            return []
        return [(name, os.path.join(self.root, name, "SKILL.md")) for name in folders]


def _stat(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def board_lines(settings: Settings) -> tuple[str, ...]:
    """With several boards, a line each for the Hardware section (none with one board:
    the tools' descriptions name its pins)."""
    boards = configured_boards(settings.hardware, settings.boards)
    return PinNames(boards).board_lines() if len(boards) > 1 else ()


def tool_infos(tools: Iterable[Tool]) -> tuple[ToolInfo, ...]:
    """What the prompt shows of each tool, in registration order: its parameters lean, as
    `tools=` sends them (tools/base.py's lean_schema)."""
    return tuple(
        ToolInfo(t.name, t.description, _compact_json(lean_schema(t.parameters))) for t in tools
    )


def _compact_json(schema: dict[str, object]) -> str:
    return json.dumps(schema, separators=(",", ":"), sort_keys=True)


def default_budget(configured: int, window: int | None) -> int:
    """The configured budget, else a quarter of the model's context window, else 8,000."""
    if configured:
        return configured
    return window // 4 if window else DEFAULT_BUDGET_TOKENS
