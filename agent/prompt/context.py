"""What a prompt is built from: the frozen PromptContext and the types the sections share.

The lowest module of agent/prompt/: sections, skills, AIEOS and the builder all read these
types, so they live here and import nothing of their neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from channels.capabilities import ChannelCapabilities
from tools.config import Autonomy
from tools.paths import PathRules

# compact: the essentials, shortly, for small models and small windows (compact.py)
PromptMode = Literal["full", "compact", "minimal", "none"]
SkillsMode = Literal["full", "compact", "names"]
Dispatch = Literal["native", "xml"]
TokenCounter = Callable[[str], int]

IDENTITY_LINE = "You are Pinclaw, a personal assistant running on your owner's own machine."

# The whole reply a model gives to a group message that needs no answer. The prompt teaches
# it; the runtime imports it to recognise such a reply and send nothing.
SILENT_REPLY = "NO_REPLY"

# The hardware tools (tools/board/pin_tools.py): with any of them the prompt gets a
# Hardware section.
HARDWARE_TOOLS = frozenset(
    {
        "gpio_read",
        "gpio_write",
        "pwm_write",
        "analog_read",
        "servo_write",
        "gpio_pattern",
        "hardware_board_info",
        "hardware_capabilities",
        "hardware_log",
        "plot_pin",
    }
)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    parameters_json: str = ""  # shown only with the xml dispatcher, which has no tools=


SkillOrigin = Literal["workspace", "bundled"]


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str
    location: Path  # its SKILL.md
    instructions: str
    origin: SkillOrigin = "workspace"
    always: bool = False  # inlined in compact mode too


@dataclass(frozen=True)
class HostInfo:
    host: str
    os: str
    python: str


@dataclass(frozen=True)
class IdentityInfo:
    format: Literal["markdown", "aieos"] = "markdown"
    aieos_path: str = ""
    aieos_inline: str = ""


@dataclass(frozen=True)
class PromptContext:
    """Everything the sections may read. Frozen: the budget shrinks a copy, never this."""

    workspace_dir: Path
    model_name: str
    channel: str
    capabilities: ChannelCapabilities
    host: HostInfo
    timezone: str
    tools: tuple[ToolInfo, ...] = ()
    # Tools whose schemas wait to be loaded (agent/prompt/deferred_tools.py), listed under
    # the tools shown whole: a name and one line each, or (`deferred_by_server`) a server's
    # prefix and its tools' names ("github__", "create_issue, list_issues").
    deferred_tools: tuple[ToolInfo, ...] = ()
    deferred_by_server: bool = False
    skills: tuple[SkillInfo, ...] = ()
    skills_mode: SkillsMode = "compact"
    skills_max_chars: int = 8_000
    identity: IdentityInfo = field(default_factory=IdentityInfo)
    dispatcher: Dispatch = "native"
    security_summary: str = ""
    autonomy: Autonomy = "supervised"
    mode: PromptMode = "full"
    bootstrap_max_chars: int = 20_000
    bootstrap_total_max_chars: int = 60_000
    bootstrap_scale: float = 1.0  # < 1 when the budget cuts the workspace files
    heartbeat_enabled: bool = False
    # The owner's private conversation (or the terminal): only then do the personal files
    # (USER.md, MEMORY.md) go in. Groups and other people never see them.
    private: bool = True
    # How the workspace's files are opened (links refused, forbidden paths kept out);
    # None: the workspace with no forbidden paths inside it.
    files: PathRules | None = None
    # Compact mode: the pins the hardware tools may use, said once in the Hardware section
    # instead of in each tool's description.
    pin_guide: str = ""
    # Several boards: a line each, its name and pins, for the Hardware section.
    boards: tuple[str, ...] = ()

    @property
    def workspace_files(self) -> PathRules:
        return self.files or PathRules.build(self.workspace_dir, ())


class PromptSection(Protocol):
    name: str

    def build(self, ctx: PromptContext) -> str: ...  # "" leaves the section out


@dataclass(frozen=True)
class SectionText:
    name: str
    text: str
