"""Composition root: Settings -> tools, LLM, state.db, runtimes. The only module that picks
concrete channels and tools; heavy ones are imported when needed, not at start-up."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.config import Settings, make_scrubber
from agent.conversation.memories import memory_embedder, memory_store
from agent.conversation.scopes import LegacyScope
from agent.durable.file_sources import FileSources
from agent.durable.hardware_records import StateRecords
from agent.durable.jobs import Jobs
from agent.durable.learned_model_facts import LearnedModelFacts, learned_rows
from agent.durable.schedules import Schedules
from agent.durable.store import Store, open_store, read_state
from agent.home import ENV_FILE_NAME
from agent.model.client import LLMClient
from agent.model.keys import check_model
from agent.model.profiles.litellm_facts import token_counter, window_of
from agent.model.responses import ModelClient
from agent.model.side_calls import transcribe
from agent.proactive.hardware import board_tools, make_boards
from agent.proactive.schedule_book import ChatSchedules
from agent.proactive.scheduler import Scheduler
from agent.proactive.watch_book import ChatWatches
from agent.prompt.builder import SystemPromptBuilder
from agent.prompt.skills import SkillCatalog
from agent.prompt.source import PromptSource, default_budget, host_info, host_timezone
from agent.runtime.attachments import Transcriber
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.jobs.delegate_tool import DelegateTool, JobDesk
from agent.runtime.queues.turn_slots import TurnSlots
from agent.runtime.turn_setup import Access, TurnSetup
from agent.security import Scrubber
from agent.turns.turn import TurnRunner
from agent.workspace import ensure_workspace
from channels.base import Channel
from channels.registry import channel_kinds
from tools.base import Tool, ToolRegistry, read_only
from tools.files import FileTools
from tools.mcp.manager import McpManager, start_servers
from tools.memory.memory_tools import MemoryTools
from tools.memory.store import MemoryStore
from tools.policy import SecurityPolicy
from tools.proactive.schedule_times import zone_named
from tools.proactive.schedule_tools import ScheduleBook, ScheduleTools
from tools.proactive.watch_tools import WatchBook
from tools.sandbox.sandboxes import Sandbox, choose_sandbox
from tools.shell.shell_tool import ShellTool
from tools.skills.skill_tools import ReadSkillTool, SkillDoc, SkillTool
from tools.taint import FileProvenance
from tools.web.web_tools import web_tools

if TYPE_CHECKING:
    from agent.proactive.pin_watcher import PinWatcher
    from tools.board.oversight.keeper import Keeper

log = logging.getLogger(__name__)


@dataclass
class App:
    settings: Settings
    tools: ToolRegistry
    llm: ModelClient
    store: Store
    source: PromptSource
    scrub: Scrubber
    policy: SecurityPolicy
    sandbox: Sandbox  # every command's OS sandbox: probed once, by build_app
    quirks: LearnedModelFacts = field(default_factory=LearnedModelFacts)
    slots: TurnSlots = field(default_factory=lambda: TurnSlots(16))
    boards: Keeper | None = None  # every board, with their log, limits and interlocks
    history_tokens: int = 16_000
    memory: MemoryStore | None = None  # for auto-recall
    schedules: ChatSchedules | None = None  # what the schedule tools keep
    watches: ChatWatches | None = None  # what the pin-watch tools keep
    mcp: McpManager | None = None  # the MCP servers, whose tools are in `tools`
    jobs: JobDesk | None = None  # sub-agents' jobs (the delegate tool), per channel

    def runner(self, channel: Channel) -> TurnRunner:
        """What runs this generation's turns on `channel`."""
        return TurnRunner(
            channel, source=self.source, llm=self.llm, quirks=self.quirks, scrub=self.scrub
        )

    def runtime(self, channel: Channel, access: Access) -> ChannelRuntime:
        setup = TurnSetup(self.source, self.llm, self.runner(channel), self.history_tokens, access)
        return ChannelRuntime(
            channel,
            setup,
            self.store,
            slots=self.slots,
            scrub=self.scrub,
            policy=self.policy,
            transcribe=voice_transcriber(self.settings, channel.name),
            memory=self.memory,
            jobs=self.jobs,
        )

    async def close(self, *, board_grace_s: float | None = None) -> None:
        """`board_grace_s`: how long running light patterns may go on (default: the tool
        timeout, as a one-shot that started one waits for it)."""
        if self.boards is not None:
            await self.boards.close(grace_s=board_grace_s)
        if self.memory is not None:
            await self.memory.close()
        if self.mcp is not None:
            await self.mcp.close()
        await self.store.close()


def timezone_of(settings: Settings) -> str:
    """The IANA zone dates are read and shown in: configured, else the host's."""
    return settings.agent.timezone or host_timezone()


async def start_scheduler(app: App, runtimes: Sequence[ChannelRuntime]) -> Scheduler | None:
    """Run the schedules and the heartbeat in the channels that started (None: neither is
    enabled). Stop it before the runtimes."""
    settings = app.settings
    if not (settings.schedules.enabled or settings.heartbeat.enabled):
        return None
    by_channel = {runtime.channel.name: runtime for runtime in runtimes}
    zone = zone_named(timezone_of(settings))
    schedules = Schedules(app.store.db)
    scheduler = Scheduler(schedules, by_channel, settings, zone, claims=app.store.claims)
    await scheduler.start()
    if app.schedules is not None:
        app.schedules.on_change = scheduler.wake
    return scheduler


async def start_watcher(app: App, runtimes: Sequence[ChannelRuntime]) -> PinWatcher | None:
    """Listen to the boards for the pin watches of the channels that started, and tell them
    what pinclaw switches off by itself (None: no board, or `[watches]` off). Stop it before
    the runtimes and the boards."""
    if app.boards is None:
        return None
    from agent.proactive.hardware import start_boards
    from agent.proactive.pin_watcher import PinWatcher

    by_channel = {runtime.channel.name: runtime for runtime in runtimes}
    await start_boards(app.boards, by_channel, lambda: app.settings, app.store.db)
    if not app.settings.watches.enabled:
        return None
    boards = app.boards.boards
    watcher = PinWatcher(Schedules(app.store.db), by_channel, boards, app.settings)
    await watcher.start()
    if app.watches is not None:
        app.watches.live = watcher
    return watcher


def voice_transcriber(settings: Settings, channel: str) -> Transcriber | None:
    """Speech to text for the channel's voice notes and audio, when it names a model."""
    model = getattr(getattr(settings.channels, channel, None), "transcription_model", "")
    if not model:
        return None

    async def transcribe_voice(name: str, data: bytes) -> str:
        limit_s = settings.channels.download_timeout_s  # as the file's download
        return await transcribe(
            name, data, model, api_base=settings.llm.api_base, timeout_s=limit_s
        )

    return transcribe_voice


def build_tools(
    settings: Settings,
    policy: SecurityPolicy,
    boards: Keeper | None = None,
    skills: SkillCatalog | None = None,
    schedules: ScheduleBook | None = None,
    watches: WatchBook | None = None,
    memories: MemoryStore | None = None,
    *,
    sandbox: Sandbox | None = None,
    scrub: Scrubber | None = None,
    file_sources: FileProvenance | None = None,
    jobs: JobDesk | None = None,
) -> ToolRegistry:
    """Every tool of this configuration. `schedules`, `watches`: where the schedule and
    pin-watch tools keep theirs (without one they are offered all the same, and refuse);
    `memories`: the store auto-recall searches too. `sandbox`, `scrub`: the App's (made
    here when not given, as for `agent prompt show`); `file_sources`: see tools/taint.py."""
    security = settings.security
    if scrub is None:
        scrub = make_scrubber(settings)
    if sandbox is None:
        sandbox = choose_sandbox(security.sandbox)
    shell = ShellTool(
        policy,
        settings.shell,
        sandbox,
        network=security.sandbox_network,
        sandbox_off_by_owner=security.sandbox == "off",
        provenance=file_sources,
    )
    tools: list[Tool] = [shell, *FileTools(policy, file_sources).tools()]
    if settings.memory.enabled:
        memory = MemoryTools(
            settings.state_db,
            settings.memory,
            scrub=scrub,
            embed=memory_embedder(settings),
            legacy_scope=LegacyScope(settings.people),
            store=memories,
        )
        tools += memory.tools()
    if boards is not None:
        zone = timezone_of(settings)
        tools += board_tools(settings, boards, policy.autonomy, watches, zone, scrub)
    if settings.schedules.enabled:
        timezone = timezone_of(settings)
        tools += ScheduleTools(schedules, timezone, scrub=scrub).tools()
    tools += web_tools(settings.web, network=security.sandbox_network)
    tools += skill_tools(skills or SkillCatalog.from_settings(settings), shell, policy, tools)
    tools += [DelegateTool(jobs)] if settings.agent.sub_agents else []  # no desk: it refuses
    return ToolRegistry(read_only(tools) if policy.autonomy == "read_only" else tools)


def prompt_source(
    settings: Settings,
    tools: ToolRegistry,
    policy: SecurityPolicy,
    *,
    budget_tokens: int | None = None,
    skills: SkillCatalog | None = None,
) -> PromptSource:
    fixed = settings.agent.prompt_budget_tokens
    budget = budget_tokens or default_budget(fixed, None if fixed else window_of(settings.llm))
    return PromptSource(
        settings=settings,
        tools=tools,
        builder=SystemPromptBuilder.with_defaults(),
        security_summary=policy.summary(),
        host=host_info(),
        count_tokens=token_counter(settings.llm),
        budget_tokens=budget,
        skills=skills,
        learned=LearnedModelFacts(read_state(settings, learned_rows) or []).about(
            settings.llm.model
        ),
    )


def skill_tools(
    skills: SkillCatalog, shell: ShellTool, policy: SecurityPolicy, taken: Sequence[Tool]
) -> list[Tool]:
    """read_skill, and the tools the active skills declare (fixed at start-up). One whose
    name is taken, or whose script the sandbox cannot see, is left out with a log line."""
    if not skills.enabled:
        return []

    def docs() -> list[SkillDoc]:
        return [SkillDoc(s.name, s.folder, s.info.instructions) for s in skills.active()]

    found: list[Tool] = [ReadSkillTool(docs, policy.forbidden_paths)]
    names = {t.name for t in taken} | {"read_skill"}
    for skill in skills.active():
        for spec in skill.tools:
            script = spec.script
            if spec.name in names:
                problem = "the name is taken by another tool"
            elif script is not None and policy.workspace not in script.parents:
                problem = "its script is outside the workspace, where commands cannot see it"
            else:
                names.add(spec.name)
                found.append(SkillTool(spec, shell, policy))
                continue
            log.warning("skill %s: tool %s left out: %s", skill.info.location, spec.name, problem)
    return found


def build_channels(app: App, only: Sequence[str] = ()) -> list[tuple[Channel, Access]]:
    """The enabled chat channels (`only` these, when named), each with who may use it, made
    by their kinds (channels/registry.py). A channel that cannot even be built (no token) is
    reported and left out."""
    built: list[tuple[Channel, Access]] = []
    for kind in channel_kinds():
        section = app.settings.channels.section(kind.name)
        if section is None or not section.enabled or (only and kind.name not in only):
            continue
        try:
            built.append((kind.build(section), Access(frozenset(section.allowed_users))))
        except ValueError as exc:  # no token: the others still start
            log.error("%s", exc)
    return built


async def build_app(settings: Settings, *, model: ModelClient | None = None) -> App:
    """Everything `settings` asks for; `model`: the model to call (tests pass a double),
    else LLMClient on `settings.llm`, whose name and key are checked first (ModelUnusable)."""
    # The home and state.db first: a bad one is said before the model's check imports LiteLLM.
    workspace = settings.workspace_dir
    ensure_workspace(workspace)
    store = await open_store(
        settings.state_db,
        url=settings.state_url,
        workspace=workspace,
        legacy_scope=LegacyScope(settings.people),
    )
    if model is None:
        try:
            check_model(settings.llm, str(settings.home / ENV_FILE_NAME))
        except BaseException:
            await store.close()
            raise
    aieos = settings.identity.aieos_path if settings.identity.format == "aieos" else ""
    policy = SecurityPolicy.from_settings(
        settings.security, workspace, home=settings.home, identity_file=aieos
    )
    sandbox = choose_sandbox(settings.security.sandbox)  # a probe run: once per App
    boards = make_boards(settings, StateRecords(store.db), claims=store.claims)
    skills = SkillCatalog.from_settings(settings)
    schedules = ChatSchedules(Schedules(store.db), settings)
    watches = ChatWatches(Schedules(store.db), settings)
    memories = memory_store(settings, store.db) if settings.memory.enabled else None
    scrub = make_scrubber(settings)  # one for the tools, the replies and the logs' lines
    jobs = JobDesk(Jobs(store.db), settings.agent.max_jobs) if settings.agent.sub_agents else None
    tools = build_tools(
        settings,
        policy,
        boards,
        skills,
        schedules,
        watches,
        memories,
        sandbox=sandbox,
        scrub=scrub,
        file_sources=FileSources(store.db, workspace),
        jobs=jobs,
    )
    mcp = await start_servers(settings.mcp, settings.home / "mcp", policy, sandbox, tools)
    app = App(
        settings=settings,
        tools=tools,
        llm=model if model is not None else LLMClient(settings.llm),
        store=store,
        source=prompt_source(settings, tools, policy, skills=skills),
        scrub=scrub,
        policy=policy,
        sandbox=sandbox,
        slots=TurnSlots(settings.agent.max_concurrent_turns),
        boards=boards,
        history_tokens=history_budget(settings),
        quirks=await LearnedModelFacts.load(store.db),
        memory=memories,
        schedules=schedules,
        watches=watches,
        mcp=mcp,
        jobs=jobs,
    )
    if mcp is not None:  # compact mode's copy of the tools follows the servers' lists too
        mcp.also_in(app.source.tools)
    return app


def history_budget(settings: Settings) -> int:
    """Tokens of earlier turns sent with each message: as configured, else half the model's
    window (the other half is the system prompt's quarter, the message and the answer)."""
    configured = settings.agent.history_budget_tokens
    return configured or (window_of(settings.llm) or 16_000) // 2
