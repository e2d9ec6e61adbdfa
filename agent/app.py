"""Composition root: Settings -> tools, LLM, sessions, runtimes. The only module that picks
concrete channels and tools; heavy ones are imported when needed, not at start-up."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agent.config import Settings, secret_values
from agent.llm import LLMClient, context_window, count_tokens
from agent.prompt import SystemPromptBuilder
from agent.prompt_source import PromptSource, default_budget, host_info
from agent.runtime import ChannelRuntime, ChannelSpec, ProviderQuirks
from agent.security import Scrubber
from agent.sessions import SessionStore
from agent.workspace import ensure_workspace
from tools.base import Tool, ToolRegistry
from tools.files import FileTools
from tools.policy import SecurityPolicy
from tools.shell import ShellTool


@dataclass
class App:
    settings: Settings
    tools: ToolRegistry
    llm: LLMClient
    sessions: SessionStore
    source: PromptSource
    scrub: Scrubber
    quirks: ProviderQuirks = field(default_factory=ProviderQuirks)
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(16))

    def runtime(self, spec: ChannelSpec) -> ChannelRuntime:
        return ChannelRuntime(
            spec,
            source=self.source,
            llm=self.llm,
            sessions=self.sessions,
            turn_slots=self.slots,
            quirks=self.quirks,
            scrub=self.scrub,
        )

    async def close(self) -> None:
        await self.sessions.close()


def make_scrubber(settings: Settings) -> Scrubber:
    return Scrubber.from_environment(extra=secret_values(settings))


def build_tools(settings: Settings, policy: SecurityPolicy) -> ToolRegistry:
    tools: list[Tool] = [ShellTool(policy, settings.shell), *FileTools(policy).tools()]
    return ToolRegistry(tools)


def prompt_source(
    settings: Settings,
    tools: ToolRegistry,
    policy: SecurityPolicy,
    *,
    budget_tokens: int | None = None,
) -> PromptSource:
    model = settings.llm.model
    budget = budget_tokens or default_budget(
        settings.agent.prompt_budget_tokens,
        None if settings.agent.prompt_budget_tokens else context_window(model),
    )
    return PromptSource(
        settings=settings,
        tools=tools,
        builder=SystemPromptBuilder.with_defaults(),
        security_summary=policy.summary(),
        host=host_info(),
        count_tokens=lambda text: count_tokens(model, text),
        budget_tokens=budget,
    )


async def build_app(settings: Settings) -> App:
    workspace = settings.workspace_dir
    ensure_workspace(workspace)
    policy = SecurityPolicy.from_settings(settings.security, workspace)
    tools = build_tools(settings, policy)
    sessions = await SessionStore(settings.state_db).open()
    return App(
        settings=settings,
        tools=tools,
        llm=LLMClient(settings.llm),
        sessions=sessions,
        source=prompt_source(settings, tools, policy),
        scrub=make_scrubber(settings),
        slots=asyncio.Semaphore(settings.agent.max_concurrent_turns),
    )
