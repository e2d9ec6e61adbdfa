"""What the App holds, made again from reloaded settings and handed to the runtimes between
turns (agent/daemon/reload.py decides when).

Nothing a running turn uses is changed under it: a turn takes its runner (its prompt source,
settings and tools) and its model when it starts (TurnAnswerer._turn), so each runtime gets
new objects — a PromptSource over a new tool registry, a TurnRunner, the model client when
`[llm]` changed — and the old ones live on in the turns that hold them. What cannot be
shared by two generations (the boards' links, the MCP servers' processes) is replaced only
while no turn runs, not even one waiting for a person's approval (`TurnSlots.quiet`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from agent.app import (
    App,
    build_tools,
    history_budget,
    prompt_source,
    timezone_of,
)
from agent.config import Settings
from agent.daemon.setting_changes import SettingChanges
from agent.durable.file_sources import FileSources
from agent.durable.hardware_records import StateRecords
from agent.durable.schedules import Schedules
from agent.model.client import LLMClient
from agent.proactive.hardware import make_boards
from agent.proactive.schedule_book import ChatSchedules
from agent.proactive.watch_book import ChatWatches
from agent.prompt.skills import SkillCatalog
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.turn_setup import Access
from tools.base import ToolRegistry
from tools.mcp.manager import McpManager, start_servers
from tools.proactive.schedule_times import zone_named

log = logging.getLogger(__name__)

BOARDS = ("hardware", "boards")
SHARED_ONCE = (*BOARDS, "mcp")  # replaced only while no turn runs


async def close_shared(app: App, changes: SettingChanges) -> None:
    """The boards and the MCP servers whose settings changed, closed (no turn runs): the
    boards put in their safe states as at a stop, the servers' processes ended."""
    if changes.touches(*BOARDS) and app.boards is not None:
        await app.boards.close(grace_s=app.settings.agent.shutdown_grace_s)
        app.boards = None
    if changes.touches("mcp") and app.mcp is not None:
        await app.mcp.close()
        app.mcp = None


async def next_generation(
    app: App, changes: SettingChanges, runtimes: Iterable[ChannelRuntime]
) -> None:
    """The App made over for `changes.settings` and each of `runtimes` given its part."""
    new = changes.settings
    db = app.store.db
    if changes.touches(*BOARDS):
        # connect when used, or when started
        app.boards = make_boards(new, StateRecords(db), claims=app.store.claims)
    skills = SkillCatalog.from_settings(new)
    app.schedules = ChatSchedules(Schedules(db), new)
    app.watches = ChatWatches(Schedules(db), new)
    tools = build_tools(
        new,
        app.policy,
        app.boards,
        skills,
        app.schedules,
        app.watches,
        app.memory,
        sandbox=app.sandbox,
        scrub=app.scrub,
        file_sources=FileSources(db, new.workspace_dir),
        jobs=app.jobs,
    )
    if changes.touches("mcp"):
        app.mcp = await start_servers(new.mcp, new.home / "mcp", app.policy, app.sandbox, tools)
    elif app.mcp is not None:
        move_server_tools(app.mcp, app.tools, tools)
    app.settings = new
    app.tools = tools
    app.source = prompt_source(new, tools, app.policy, skills=skills)
    if app.mcp is not None:  # compact mode's copy follows the servers' lists too
        app.mcp.also_in(app.source.tools)
    if changes.touches("llm"):
        app.llm = LLMClient(new.llm)
    app.history_tokens = history_budget(new)
    for runtime in runtimes:
        adopt(app, runtime)


def move_server_tools(mcp: McpManager, old: ToolRegistry, new: ToolRegistry) -> None:
    """The MCP servers go on as they run: their tools join the new registry, which their
    next listings keep in step (the old one too, for a turn that still holds it)."""
    prefixes = tuple(f"{name}__" for name in mcp.links)
    for tool in old:
        if tool.name.startswith(prefixes) and new.get(tool.name) is None:
            new.register(tool)
    mcp.registry = new
    mcp.also_in(new)


def adopt(app: App, runtime: ChannelRuntime) -> None:
    """The runtime's next turns run with the App's current generation."""
    settings, setup = app.settings, runtime.setup
    setup.adopt(app.source, app.llm, app.runner(runtime.channel), app.history_tokens)
    runtime.controls.budget.zone = zone_named(timezone_of(settings))
    if not setup.access.open_to_all:  # its doorkeeper reads it at each check
        setup.access = channel_access(settings, runtime.channel.name)


def channel_access(settings: Settings, channel: str) -> Access:
    return Access(frozenset(getattr(settings.channels, channel).allowed_users))
