"""[agent], [workspace], [skills], [identity], [schedules], [heartbeat], [watches], [budget]
and [state]: the agent's own tables of config.toml."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

DEFAULT_TURN_DEADLINE_S = 300.0


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class AgentSettings(_Section):
    """How turns run: tool calls per turn, the prompt's mode and budgets, history, deadlines,
    retries and sub-agents' jobs."""

    max_tool_iterations: int = Field(default=10, ge=1, le=100)
    """model calls with tools per turn before it must answer"""
    max_tool_calls_per_reply: int = Field(default=8, ge=1, le=100)
    """tool calls run of one model reply (parallel ones each count)"""
    max_tool_calls_per_turn: int = Field(default=30, ge=1, le=1000)
    """tool calls run in one turn; past it the model must answer"""
    tool_timeout_s: float = Field(default=60.0, gt=0)
    """seconds a tool call may take"""
    compact_context: bool | Literal["auto"] = "auto"
    """"auto": compact for a local model or a context window of 8,192 tokens or less; true: always
    compact (also cuts workspace files at 6,000 characters in any mode); false: never unless
    prompt_mode = "compact\""""
    prompt_mode: Literal["auto", "full", "compact", "minimal", "none"] = "auto"
    """"auto" (see compact_context), "full", "compact" (short sections and tool schemas: the first
    request fits a 4,096-token window), "minimal" (sub-agents) or "none" (one identity line; plus
    the tools with the xml protocol)"""
    prompt_budget_tokens: int = Field(default=0, ge=0)
    """system prompt budget; 0: a quarter of the model's context window"""
    tool_dispatcher: Literal["auto", "native", "xml"] = "auto"
    """"native" (tools=), "xml" (<tool_call> text) or "auto\""""
    tool_schema_budget_tokens: int = Field(default=1_500, ge=0)
    """past this many tokens of tool schemas, MCP tools are listed by name and one line, and the
    model loads a tool's schema when it needs it; 0: always send every schema"""
    timezone: str = ""
    """IANA zone for dates, e.g. "Europe/Berlin"; empty: the host's"""

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, timezone: str) -> str:
        """A misspelt zone is refused: schedules and budgets would quietly run on UTC while
        the prompt tells the model the zone as written."""
        if timezone:
            try:
                ZoneInfo(timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    'unknown time zone; give an IANA name, e.g. "Europe/Berlin"'
                ) from None
        return timezone

    delivery_instructions: Literal["after_user", "in_user", "system_prompt"] = "after_user"
    """channel delivery rules: "after_user", "in_user" (an operator note), "system_prompt\""""
    max_concurrent_turns: int = Field(default=16, ge=1)
    """turns running at once across all chats"""
    max_history_messages: int = Field(default=40, ge=2)
    """prior messages of a chat sent with each turn"""
    history_budget_tokens: int = Field(default=0, ge=0)
    """and at most this many tokens of them; 0: half the model's window"""
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    """seconds running turns may finish after SIGINT/SIGTERM"""
    turn_deadline_s: float = Field(default=DEFAULT_TURN_DEADLINE_S, gt=0)
    """a turn still running after this counts as "no model answered"; left at 300, a local model's
    turns get its first-token limit more"""
    retry_failed_turns_for_s: float = Field(default=1800.0, ge=0)
    """a message no model could answer is tried again this long"""
    turn_retry_backoff_s: float = Field(default=5.0, gt=0)
    """first wait before trying it again (doubles, at most 60 s)"""
    sub_agents: bool = False
    """true: the model may hand tasks to sub-agents (the delegate tool; its schema costs every
    request about 150 tokens)"""
    max_jobs: int = Field(default=3, ge=1)
    """sub-agents' jobs running at once; more wait their turn"""
    job_time_limit_s: float = Field(default=300.0, gt=0)
    """a job is stopped after this long (a job may ask for less)"""
    job_token_limit: int = Field(default=50_000, ge=1)
    """...or past this many tokens (prompt + completion, all its model calls)"""
    outage_notice_after_s: float = Field(default=10.0, ge=0)
    """"the model is unreachable" only once its calls have failed this long"""
    still_thinking_after_s: float = Field(default=60.0, ge=0)
    """"still thinking" when a turn has shown nothing this long; 0: never"""
    warm_start_s: float = Field(default=600.0, ge=0)
    """a one-shot answered in its own process leaves a warm start process (imports done) for the
    next ones, which ends after this many seconds without one; 0: none"""


class WorkspaceSettings(_Section):
    """The agent's working folder and how much of its files goes into the prompt."""

    path: str = ""
    """the agent's working folder; empty: <home>/workspace"""
    bootstrap_max_chars: int = Field(default=20_000, ge=100)
    """characters of each workspace file put in the prompt"""
    bootstrap_total_max_chars: int = Field(default=60_000, ge=100)
    """characters of all workspace files together"""


class SkillsSettings(_Section):
    """Skills: folders with a SKILL.md in the workspace's skills/, listed or inlined in the
    prompt."""

    enabled: bool = True
    """load skills/NAME/SKILL.md folders"""
    mode: Literal["compact", "full"] = "compact"
    """"compact" (list, loaded on demand) or "full" (inline)"""
    max_prompt_chars: int = Field(default=8_000, ge=0)
    """characters of the prompt's skills section"""


class IdentitySettings(_Section):
    """Who the agent is: the workspace's Markdown files, or an AIEOS JSON identity."""

    format: Literal["markdown", "aieos"] = "markdown"
    """"markdown" (the workspace files) or "aieos" (a JSON identity)"""
    aieos_path: str = ""
    """AIEOS JSON file, relative to the workspace"""
    aieos_inline: str = ""
    """or the AIEOS JSON itself"""


class SchedulesSettings(_Section):
    """Tasks the agent schedules for later (schedule_task), run by `agent run`."""

    enabled: bool = True
    """register schedule_task, list_schedules and cancel_schedule"""
    catch_up_s: float = Field(default=3600.0, ge=0)
    """a schedule missed while the daemon was down runs once at start if less late than this, else
    it is skipped (and the chat told)"""
    max_per_chat: int = Field(default=20, ge=1)
    """active schedules a chat may have"""


class HeartbeatSettings(_Section):
    """A periodic turn in the owner's private chat that goes through HEARTBEAT.md."""

    enabled: bool = False
    """every interval, the agent goes through HEARTBEAT.md in the owner's private chat"""
    interval_minutes: float = Field(default=30.0, gt=0)
    """minutes between heartbeats; a reply that is only NO_REPLY sends nothing"""


class WatchesSettings(_Section):
    """Pin watches (watch_pin): a turn when a watched pin's reading crosses a threshold."""

    enabled: bool = True
    """with [hardware] enabled: register watch_pin, list_watches and cancel_watch (run by the
    daemon)"""
    min_interval_s: float = Field(default=60.0, ge=0)
    """least seconds between two firings of one watch; a watch may ask for more, not less"""
    hysteresis: float = Field(default=20.0, ge=0)
    """raw units (of 1023) a reading must move back past the threshold before the watch fires again,
    when the watch gives none"""
    max_per_chat: int = Field(default=10, ge=1)
    """active pin watches a chat may have"""


class BudgetSettings(_Section):
    """Spending limits in US dollars (LiteLLM's prices), 0: none; days in agent.timezone."""

    daily_usd: float = Field(default=0.0, ge=0)
    """US dollars a day (LiteLLM's prices, days in agent.timezone); 0: no limit. At 80 % the owner
    is told; at 100 % proactive turns stop and chats get one line until midnight"""
    monthly_usd: float = Field(default=0.0, ge=0)
    """the same for the calendar month"""
    heartbeat_daily_usd: float = Field(default=0.0, ge=0)
    """what the heartbeat may spend a day; past it the heartbeat stops, chats go on"""
    schedules_daily_usd: float = Field(default=0.0, ge=0)
    """the same for scheduled tasks"""
    watches_daily_usd: float = Field(default=0.0, ge=0)
    """the same for pin watches"""
    jobs_daily_usd: float = Field(default=0.0, ge=0)
    """the same for sub-agents' jobs (the delegate tool)"""
    max_tokens_per_turn: int = Field(default=0, ge=0)
    """tokens (in + out) a turn may send to models LiteLLM has no price for (local ones); 0: no
    limit"""


class StateSettings(_Section):
    """Where pinclaw keeps its tables: state.db in the home, or a PostgreSQL database that
    several processes share; the daemon's daily backups of state.db."""

    url: SecretStr | None = None
    """a PostgreSQL database (postgresql://user:password@host:5432/pinclaw) for every table
    instead of state.db, so several `agent run` processes share one bot (docs/several-processes.md);
    put it in agent.env as PINCLAW_STATE__URL when it holds a password. Needs
    `pip install 'pinclaw[postgres]'`"""

    @field_validator("url")
    @classmethod
    def _postgres_only(cls, url: SecretStr | None) -> SecretStr | None:
        if url is not None and not url.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("must be a postgresql:// URL (leave it out for state.db)")
        return url

    backups_kept: int = Field(default=7, ge=0)
    """the daemon backs state.db up once a day to <home>/backups and keeps this many (0: none);
    `agent state backup` by hand"""
