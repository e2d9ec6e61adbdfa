"""TurnSetup: what a channel's next turns are made with — the settings, the prompt source,
the model, the turn runner, the history budget, who may talk. One object shared by the
runtime's parts (intake, commands, turn answering) and read as fields, never through
callbacks; a reload (agent/daemon/reloaded_app.py) puts a new generation in between turns,
and a running turn keeps what it took when it started."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.config import Settings
from agent.model.responses import ModelClient
from agent.prompt.source import PromptSource
from agent.turns.turn import TurnRunner


@dataclass(frozen=True)
class Access:
    """Who may talk to the agent on a channel: ids or @usernames; "*" is anyone."""

    allowed_users: frozenset[str] = frozenset()
    open_to_all: bool = False  # the terminal: whoever runs the command owns it


@dataclass
class TurnSetup:
    source: PromptSource
    llm: ModelClient
    runner: TurnRunner
    history_tokens: int  # tokens of earlier turns a turn sends
    access: Access  # the channel's allow-list, as configured
    settings: Settings = field(init=False)  # the source's

    def __post_init__(self) -> None:
        self.settings = self.source.settings

    def adopt(
        self, source: PromptSource, llm: ModelClient, runner: TurnRunner, history_tokens: int
    ) -> None:
        """The next turns run with a new generation (the settings come with its source)."""
        self.source, self.settings, self.llm = source, source.settings, llm
        self.runner, self.history_tokens = runner, history_tokens
