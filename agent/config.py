"""Settings: defaults < config.toml < PINCLAW_SECTION__KEY environment variables.

The file is parsed here (not by a pydantic-settings TOML source) so that every problem can
be reported as `file: key: reason`, one line each, and so that secrets found in the file
are refused: API keys and bot tokens come from the environment only.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agent.home import ENV_PREFIX, default_home, find_config_file, load_env_file
from agent.http.config import HttpSettings
from channels.config import ChannelsSettings, VoiceSettings
from channels.config import PersonSettings as PersonSettings  # [people.NAME], re-exported
from tools.config import (
    BoardSettings,
    HardwareSettings,
    MemorySettings,
    SecuritySettings,
    ShellSettings,
    WebSettings,
    check_board_names,
    configured_boards,
)
from tools.mcp.config import McpSettings


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


DEFAULT_TIMEOUT_S = 120.0
DEFAULT_TURN_DEADLINE_S = 300.0
# The first token's limit when llm.first_token_timeout_s is 0 (a CPU reads for minutes)
LOCAL_FIRST_TOKEN_S = 600.0
HOSTED_FIRST_TOKEN_S = 60.0
_LOCAL_SUFFIXES = (".localhost", ".local", ".lan", ".internal", ".home.arpa")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")  # Tailscale and other overlay networks


def served_locally(model: str, api_base: str = "") -> bool:
    """Ollama's models, and any at an api_base on this machine or the local network."""
    if model.startswith(("ollama/", "ollama_chat/")):
        return True
    host = (urlsplit(api_base).hostname or "") if api_base else ""
    if not host:
        return False
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host  # a single label: a container's or the LAN's name for it
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip in _CGNAT


class LLMSettings(_Section):
    model: str = ""
    vision: Literal["auto", "on", "off"] = "auto"  # auto: as LiteLLM knows the model
    vision_max_px: int = Field(default=1568, ge=64)
    api_base: str = ""
    api_key: SecretStr | None = None
    # auto: the OpenAI SDK for a server of your own and OpenAI's chat models (routes.py)
    client: Literal["auto", "litellm"] = "auto"
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=0, ge=0)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    first_token_timeout_s: float = Field(default=0.0, ge=0)  # 0: see first_token_limit_s
    num_retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    fallback_models: list[str] = Field(default_factory=list)
    choices: list[str] = Field(default_factory=list)  # more models a chat may pick (/model)

    @property
    def configured_models(self) -> list[str]:
        """Every model a chat may be switched to: the main one, the fallbacks, the choices."""
        return list(dict.fromkeys([self.model, *self.fallback_models, *self.choices]))

    @property
    def local(self) -> bool:
        return served_locally(self.model, self.api_base)

    def first_token_limit_s(self, model: str | None = None) -> float:
        """How long `model` (the main one by default) may take to its first token: as set, else
        llm.timeout_s changed from 120 (a chosen wait), else 600 s local and 60 s hosted."""
        if self.first_token_timeout_s:
            return self.first_token_timeout_s
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            return self.timeout_s
        local = served_locally(model or self.model, self.api_base)
        return LOCAL_FIRST_TOKEN_S if local else HOSTED_FIRST_TOKEN_S

    def call_limit_s(self, model: str | None = None) -> float:
        """A reply that is not streamed shows no first token: it must be whole within the
        longer of the two limits. (A streamed one may run on while chunks keep coming.)"""
        return max(self.timeout_s, self.first_token_limit_s(model))


class AgentSettings(_Section):
    max_tool_iterations: int = Field(default=10, ge=1, le=100)
    max_tool_calls_per_reply: int = Field(default=8, ge=1, le=100)  # parallel ones each count
    max_tool_calls_per_turn: int = Field(default=30, ge=1, le=1000)
    tool_timeout_s: float = Field(default=60.0, gt=0)
    compact_context: bool | Literal["auto"] = "auto"  # "auto": see agent/prompt/mode.py
    prompt_mode: Literal["auto", "full", "compact", "minimal", "none"] = "auto"
    prompt_budget_tokens: int = Field(default=0, ge=0)
    tool_dispatcher: Literal["auto", "native", "xml"] = "auto"
    tool_schema_budget_tokens: int = Field(default=1_500, ge=0)  # past it MCP tools load on demand
    timezone: str = ""
    delivery_instructions: Literal["after_user", "in_user", "system_prompt"] = "after_user"
    max_concurrent_turns: int = Field(default=16, ge=1)
    max_history_messages: int = Field(default=40, ge=2)
    history_budget_tokens: int = Field(default=0, ge=0)  # 0: half the model's window
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    turn_deadline_s: float = Field(default=DEFAULT_TURN_DEADLINE_S, gt=0)
    retry_failed_turns_for_s: float = Field(default=1800.0, ge=0)
    turn_retry_backoff_s: float = Field(default=5.0, gt=0)
    sub_agents: bool = False  # the delegate tool: its schema costs ~150 tokens a request
    max_jobs: int = Field(default=3, ge=1)  # sub-agents' jobs at once, and each job's limits
    job_time_limit_s: float = Field(default=300.0, gt=0)
    job_token_limit: int = Field(default=50_000, ge=1)
    outage_notice_after_s: float = Field(default=10.0, ge=0)  # failures this long: say so
    still_thinking_after_s: float = Field(default=60.0, ge=0)  # nothing shown: say so (0: never)


class WorkspaceSettings(_Section):
    path: str = ""
    bootstrap_max_chars: int = Field(default=20_000, ge=100)
    bootstrap_total_max_chars: int = Field(default=60_000, ge=100)


class SkillsSettings(_Section):
    enabled: bool = True
    mode: Literal["compact", "full"] = "compact"
    max_prompt_chars: int = Field(default=8_000, ge=0)


class IdentitySettings(_Section):
    format: Literal["markdown", "aieos"] = "markdown"
    aieos_path: str = ""
    aieos_inline: str = ""


class SchedulesSettings(_Section):
    enabled: bool = True
    catch_up_s: float = Field(default=3600.0, ge=0)  # missed by less: run once at start
    max_per_chat: int = Field(default=20, ge=1)


class HeartbeatSettings(_Section):
    enabled: bool = False
    interval_minutes: float = Field(default=30.0, gt=0)


class WatchesSettings(_Section):
    """Pin watches (watch_pin): a turn when a watched pin's reading crosses a threshold."""

    enabled: bool = True
    min_interval_s: float = Field(default=60.0, ge=0)  # least time between two firings
    hysteresis: float = Field(default=20.0, ge=0)  # raw units (of 1023) before it re-arms
    max_per_chat: int = Field(default=10, ge=1)


class BudgetSettings(_Section):
    """Spending limits in US dollars (LiteLLM's prices), 0: none; days in agent.timezone."""

    daily_usd: float = Field(default=0.0, ge=0)
    monthly_usd: float = Field(default=0.0, ge=0)
    heartbeat_daily_usd: float = Field(default=0.0, ge=0)
    schedules_daily_usd: float = Field(default=0.0, ge=0)
    watches_daily_usd: float = Field(default=0.0, ge=0)
    jobs_daily_usd: float = Field(default=0.0, ge=0)
    max_tokens_per_turn: int = Field(default=0, ge=0)  # a turn's calls to unpriced models


class StateSettings(_Section):
    """state.db: the daemon's daily backups in <home>/backups (`agent state backup` by hand)."""

    backups_kept: int = Field(default=7, ge=0)  # the newest daily backups kept; 0: none made


class _EnvOnlyKnownKeys(EnvSettingsSource):
    """PINCLAW_HOME and PINCLAW_CONFIG pick the files; they are not settings keys. A channel's
    section is found by the registry (`PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS` is a list)."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        return {key: value for key, value in data.items() if key not in ("home", "config")}

    def next_field(self, field: Any, key: str, case_sensitive: bool | None = None) -> Any:
        found = super().next_field(field, key, case_sensitive)
        if found is None and getattr(field, "annotation", None) is ChannelsSettings:
            return ChannelsSettings.section_models().get(key.lower())  # [channels.NAME]'s model
        return found


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    llm: LLMSettings = Field(default_factory=LLMSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    hardware: HardwareSettings = Field(default_factory=HardwareSettings)
    boards: dict[str, BoardSettings] = Field(default_factory=dict)  # more boards, by name
    memory: MemorySettings = Field(default_factory=MemorySettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    schedules: SchedulesSettings = Field(default_factory=SchedulesSettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    watches: WatchesSettings = Field(default_factory=WatchesSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)  # [mcp.servers.NAME]: tools/mcp/
    http: HttpSettings = Field(default_factory=HttpSettings)  # agent/http/
    voice: VoiceSettings = Field(default_factory=VoiceSettings)  # replies as voice notes
    people: dict[str, PersonSettings] = Field(default_factory=dict)

    _home: Path = PrivateAttr(default_factory=lambda: default_home(os.environ))
    _config_file: Path | None = PrivateAttr(default=None)

    @field_validator("boards")
    @classmethod
    def _board_names(cls, boards: dict[str, BoardSettings]) -> dict[str, BoardSettings]:
        check_board_names(boards)
        return boards

    @model_validator(mode="after")
    def _one_board_per_name(self) -> Settings:
        configured_boards(self.hardware, self.boards)  # [hardware] is the board "board"
        return self

    @model_validator(mode="after")
    def _slow_local_turns(self) -> Settings:
        """A local model's turn left at the default deadline gets its first_token_limit_s
        more: the deadline must not cut what the model's timeout allows."""
        if self.llm.local and self.agent.turn_deadline_s == DEFAULT_TURN_DEADLINE_S:
            longer = DEFAULT_TURN_DEADLINE_S + self.llm.first_token_limit_s()
            agent = self.agent.model_copy(update={"turn_deadline_s": longer})
            object.__setattr__(self, "agent", agent)  # frozen: set once, while validating
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file arrives as init kwargs; the environment overrides it.
        return (_EnvOnlyKnownKeys(settings_cls), init_settings)

    @property
    def home(self) -> Path:
        return self._home

    @property
    def config_file(self) -> Path | None:
        """The file these settings were read from, or None when it did not exist."""
        return self._config_file

    @property
    def workspace_dir(self) -> Path:
        configured = self.workspace.path
        if not configured:
            return self._home / "workspace"
        path = Path(configured).expanduser()
        return path if path.is_absolute() else self._home / path

    @property
    def state_db(self) -> Path:
        return self._home / "state.db"


class ConfigError(Exception):
    """A configuration that cannot be used; `problems` holds one `file: key: reason` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def load_settings(
    explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Read the settings, or raise ConfigError listing every problem found. Reading this
    process's own environment, `<home>/agent.env` joins it first (under what is exported)."""
    env = os.environ if environ is None else environ
    if environ is None:
        load_env_file(default_home(env), os.environ)
    path = find_config_file(explicit, env)
    data: dict[str, Any] = {}
    if path.exists():
        data = _read_toml(path)
    elif explicit is not None or env.get(f"{ENV_PREFIX}CONFIG"):
        raise ConfigError([f"{path}: file not found"])
    problems = [f"{path}: {key}: {reason}" for key, reason in _secrets_in_file(data)]
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        problems += [_describe(path, error, env) for error in exc.errors()]
    if problems:
        raise ConfigError(problems)
    settings._home = default_home(env)
    settings._config_file = path if path.exists() else None
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: not valid TOML: {exc}"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None


def _describe(path: Path, error: Any, environ: Mapping[str, str]) -> str:
    keys = [str(part) for part in error["loc"]]
    dotted = ".".join(keys)
    env_name = ENV_PREFIX + "__".join(keys).upper()
    origin = f"environment variable {env_name}" if env_name in environ else str(path)
    reason = str(error["msg"])
    if error["type"] == "extra_forbidden":
        reason = "unknown key"
    elif error["type"] == "missing":
        reason = "required value missing"
    elif "input" in error and not isinstance(error["input"], dict):  # a table may hold a secret
        reason += f" (got {error['input']!r})"
    return f"{origin}: {dotted}: {reason}"


def _secrets_in_file(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Yield every secret key written in the file: those belong in the environment."""
    for dotted in secret_keys(Settings):
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            env_name = ENV_PREFIX + dotted.replace(".", "__").upper()
            yield dotted, f"secrets are read from the environment only; set {env_name} instead"


def secret_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted names of every SecretStr field, found from the models' annotations."""
    found: list[str] = []
    fields = {name: field.annotation for name, field in model.model_fields.items()}
    if model is ChannelsSettings:
        fields |= ChannelsSettings.section_models()  # the registered channels' sections
    for name, annotation in fields.items():
        args = getattr(annotation, "__args__", ())
        if annotation is SecretStr or SecretStr in args:
            found.append(prefix + name)
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.extend(secret_keys(annotation, f"{prefix}{name}."))
    return found


def secret_values(settings: Settings) -> list[str]:
    """Every configured secret's value, so scrubbing can remove it from text."""
    values: list[str] = []
    for dotted in secret_keys(Settings):
        node: Any = settings
        for part in dotted.split("."):
            node = getattr(node, part)
        if isinstance(node, SecretStr) and node.get_secret_value():
            values.append(node.get_secret_value())
    return values + settings.mcp.secret_values()  # the variables its env and headers name
