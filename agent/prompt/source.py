"""What the channel prompts are built from, and a cheap fingerprint of it.

A runtime keeps its prompt until the fingerprint changes: a workspace file's mtime or
size, the skills, or the tool set. Checking costs a few `stat` calls per turn.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.config import Settings
from agent.prompt.builder import BuiltPrompt, SystemPromptBuilder
from agent.prompt.context import (
    Dispatch,
    HostInfo,
    IdentityInfo,
    PromptContext,
    PromptMode,
    TokenCounter,
    ToolInfo,
)
from agent.prompt.skills import SkillCatalog
from agent.workspace import BOOTSTRAP_FILES, SKILLS
from channels.base import ChannelCapabilities
from tools.base import Tool, ToolRegistry

DEFAULT_BUDGET_TOKENS = 8_000
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

    def __post_init__(self) -> None:
        if self.skills is None:
            self.skills = SkillCatalog.from_settings(self.settings)

    @property
    def workspace(self) -> Path:
        return self.settings.workspace_dir

    @property
    def timezone(self) -> str:
        return self.settings.agent.timezone or host_timezone()

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
        per_file = self.settings.workspace.bootstrap_max_chars
        if agent.compact_context:
            per_file = min(per_file, COMPACT_BOOTSTRAP_CHARS)
        identity = self.settings.identity
        skills = self.skills.infos() if self.skills is not None else ()
        return PromptContext(
            workspace_dir=self.workspace,
            model_name=self.settings.llm.model,
            channel=channel,
            capabilities=capabilities,
            host=self.host,
            timezone=self.timezone,
            tools=tool_infos(self.tools),
            skills=skills,
            skills_mode=self.settings.skills.mode,
            skills_max_chars=self.settings.skills.max_prompt_chars,
            identity=IdentityInfo(identity.format, identity.aieos_path, identity.aieos_inline),
            dispatcher=dispatcher,
            security_summary=self.security_summary,
            autonomy=self.settings.security.autonomy,
            mode=mode or agent.prompt_mode,
            bootstrap_max_chars=per_file,
            bootstrap_total_max_chars=self.settings.workspace.bootstrap_total_max_chars,
            heartbeat_enabled=self.settings.heartbeat.enabled,
            private=private,
        )

    def build(self, ctx: PromptContext) -> BuiltPrompt:
        return self.builder.build_within(ctx, self.budget_tokens, self.count_tokens)

    def fingerprint(self) -> Fingerprint:
        stats: list[object] = [tuple(self.tools.names())]
        for name in BOOTSTRAP_FILES:
            stats.append(_stat(self.workspace / name))
        skills_dir = self.workspace / SKILLS
        if skills_dir.is_dir():
            for skill in sorted(skills_dir.glob("*/SKILL.md")):
                stats.append((skill.parent.name, _stat(skill)))
        aieos = self.settings.identity.aieos_path
        if aieos:
            stats.append(_stat(self.workspace / Path(aieos).expanduser()))
        return tuple(stats)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def tool_infos(tools: Iterable[Tool]) -> tuple[ToolInfo, ...]:
    """What the prompt shows of each tool, in registration order."""
    return tuple(ToolInfo(t.name, t.description, _compact_json(t.parameters)) for t in tools)


def _compact_json(schema: dict[str, object]) -> str:
    return json.dumps(schema, separators=(",", ":"), sort_keys=True)


def default_budget(configured: int, window: int | None) -> int:
    """The configured budget, else a quarter of the model's context window, else 8,000."""
    if configured:
        return configured
    return window // 4 if window else DEFAULT_BUDGET_TOKENS
