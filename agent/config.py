"""Settings: defaults < config.toml < PINCLAW_SECTION__KEY environment variables.

The file is parsed here (not by a pydantic-settings TOML source) so that every problem can
be reported as `file: key: reason`, one line each, and so that secrets found in the file
are refused: API keys and bot tokens come from the environment only.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import (
    BaseModel,
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
    SettingsError,
)

from agent.home import ENV_PREFIX, default_home, find_config_file, load_env_file
from agent.http.config import HttpSettings
from agent.security import Scrubber
from agent.settings.llm import LLMSettings as LLMSettings
from agent.settings.llm import served_locally as served_locally
from agent.settings.sections import (
    DEFAULT_TURN_DEADLINE_S,
    HeartbeatSettings,
    IdentitySettings,
    SchedulesSettings,
    SkillsSettings,
    StateSettings,
    WatchesSettings,
)
from agent.settings.sections import (
    AgentSettings as AgentSettings,
)
from agent.settings.sections import (
    BudgetSettings as BudgetSettings,
)
from agent.settings.sections import (
    WorkspaceSettings as WorkspaceSettings,
)
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
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )

    llm: LLMSettings = Field(default_factory=LLMSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    hardware: HardwareSettings = Field(default_factory=HardwareSettings)
    boards: dict[str, BoardSettings] = Field(default_factory=dict)
    """more boards, one [boards.NAME] table each with every key of [hardware]"""
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
    """one [people.NAME] table per person: their id on each channel; memories follow them"""

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

    @property
    def state_url(self) -> str | None:
        """[state] url, the PostgreSQL database in place of state.db (None: state.db)."""
        url = self.state.url
        return None if url is None else url.get_secret_value()


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
    except SettingsError as exc:  # a list or table from the environment, not JSON
        problems.append(_not_json(exc, env))
    if problems:
        raise ConfigError(problems)
    settings._home = default_home(env)
    settings._config_file = path if path.exists() else None
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    """The file's tables. A UTF-8 byte order mark (Notepad's) is accepted; tomllib refuses
    it as an "invalid statement" at line 1, which no one could see in the file."""
    try:
        text = path.read_bytes().decode("utf-8")
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: not valid TOML: {exc}"]) from None
    except UnicodeDecodeError as exc:  # saved as Latin-1 or the like
        problem = f"not UTF-8 text (byte {exc.start}); save it as UTF-8"
        raise ConfigError([f"{path}: {problem}"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None


def _not_json(exc: SettingsError, environ: Mapping[str, str]) -> str:
    """The line for a list or table setting written in the environment as plain text
    (PINCLAW_LLM__FALLBACK_MODELS=openai/gpt-4o-mini): pydantic-settings reads those as JSON
    only, and its error names neither the variable nor the key. The value is not quoted."""
    cause = exc.__cause__
    value = cause.doc if isinstance(cause, json.JSONDecodeError) else None
    names = sorted(
        name
        for name, text in environ.items()
        if name.upper().startswith(ENV_PREFIX) and text == value
    )
    if not names:
        return f"environment: {exc}"
    dotted = names[0][len(ENV_PREFIX) :].lower().replace("__", ".")
    return (
        f"environment variable {names[0]}: {dotted}: must be JSON, not plain text "
        '(a list: ["a", "b"]; a table: {"key": "value"})'
    )


def _describe(path: Path, error: Any, environ: Mapping[str, str]) -> str:
    keys = [str(part) for part in error["loc"]]
    dotted = ".".join(keys)
    env_name = ENV_PREFIX + "__".join(keys).upper()
    # The variable itself, or one inside the table (PINCLAW_CHANNELS__TELEGRAMM__BOT_TOKEN
    # for the unknown table channels.telegramm); else the file.
    inside = sorted(name for name in environ if name.upper().startswith(f"{env_name}__"))
    origin = str(path)
    if env_name in environ or inside:
        origin = f"environment variable {env_name if env_name in environ else inside[0]}"
    reason = str(error["msg"])
    if error["type"] == "extra_forbidden":
        reason = "unknown key"
    elif error["type"] == "missing":
        reason = "required value missing"
    elif _secret(dotted):
        pass  # its value is not quoted: the line goes to stderr, the log and the owner's chat
    elif "input" in error and not isinstance(error["input"], dict):  # a table may hold a secret
        reason += f" (got {error['input']!r})"
    return f"{origin}: {dotted}: {masked_urls(reason)}"


def _secret(dotted: str) -> bool:
    """A secret key's error, or one inside it (a union's member): its value is never shown."""
    return any(dotted == key or dotted.startswith(f"{key}.") for key in secret_keys(Settings))


_URL_PASSWORD = re.compile(r"(://[^\s/:@]*:)[^\s@]*@")


def masked_urls(text: str) -> str:
    """`text` with the password of every URL in it as ***: any key may hold a URL with one."""
    return _URL_PASSWORD.sub(r"\1***@", text)


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
    password = urlsplit(settings.state_url or "").password  # also seen apart from its URL
    if password:
        values.append(unquote(password))
    return values + settings.mcp.secret_values()  # the variables its env and headers name


def make_scrubber(settings: Settings) -> Scrubber:
    """What takes this configuration's secrets, and the environment's, out of any text:
    here, beside the settings, so a command that only reads them never imports the app."""
    return Scrubber.from_environment(extra=secret_values(settings))
