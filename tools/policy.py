"""SecurityPolicy: what the tools may touch — workspace paths, commands, autonomy level.

The policy is enforced here, in the tools, not in the prompt: a model that ignores its
instructions still cannot read outside the workspace or run a command that is not allowed.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from tools.base import ToolCallContext
from tools.boundaries import DEFAULT_OWNER_PRIVATE, hidden_from, is_identity_path
from tools.config import Autonomy, SecuritySettings
from tools.paths import PathRules, PolicyError

__all__ = ["COMMANDS_ALLOWED", "PATHS_INSIDE", "PolicyError", "SecurityPolicy"]

# The summary's line on where paths may go: under full autonomy only the file tools' paths
# are held inside the workspace.
FILES_INSIDE = "- File tools stay inside the workspace"
PATHS_INSIDE = FILES_INSIDE + ", and so do shell path arguments"
COMMANDS_ALLOWED = "- Allowed shell commands:"


# The runtime's own files in its home: never reachable by a tool, wherever the home is.
RUNTIME_FILES = (
    "config.toml",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "logs",
    "agent.env",
    "agent.lock",
    "agent.sock",
)


@dataclass(frozen=True)
class SecurityPolicy:
    workspace: Path
    autonomy: Autonomy
    allowed_commands: tuple[str, ...]
    forbidden_paths: tuple[Path, ...]
    owner_private: tuple[str, ...] = DEFAULT_OWNER_PRIVATE  # workspace-relative names

    @classmethod
    def from_settings(
        cls, settings: SecuritySettings, workspace: Path, *, home: Path | None = None
    ) -> SecurityPolicy:
        """The policy for `workspace`; with `home` (the pinclaw home), its config, state
        database and logs are forbidden too, wherever PINCLAW_HOME points."""
        forbidden = [Path(p).expanduser() for p in settings.forbidden_paths]
        if home is not None:
            forbidden += [home / name for name in RUNTIME_FILES]
        return cls(
            workspace=workspace.expanduser().resolve(),
            autonomy=settings.autonomy,
            allowed_commands=tuple(settings.allowed_commands),
            forbidden_paths=tuple(p.resolve() for p in forbidden),
            owner_private=tuple(dict.fromkeys((*DEFAULT_OWNER_PRIVATE, *settings.owner_private))),
        )

    def for_call(self, call: ToolCallContext) -> SecurityPolicy:
        """The policy of one call: this one for the owner's own private turn; for any other
        turn, the owner-private files and the other chats' inbox folders are forbidden too,
        so the resolver, the shell's parser and the sandbox's masks all keep them out."""
        if call.owner_private:
            return self
        hidden = hidden_from(
            self.workspace, owner_private=self.owner_private, own_chat_key=call.chat_key
        )
        return dataclasses.replace(self, forbidden_paths=(*self.forbidden_paths, *hidden))

    def is_identity(self, path: Path) -> bool:
        """A resolved path that shapes every chat's prompt (tools/boundaries.py): changing
        it needs the owner's approval under supervised."""
        return is_identity_path(self.workspace, path)

    @functools.cached_property
    def paths(self) -> PathRules:
        return PathRules.build(self.workspace, self.forbidden_paths)

    @property
    def can_write(self) -> bool:
        return self.autonomy != "read_only"

    def resolve_path(self, raw: str) -> Path:
        """The real path of `raw` (relative to the workspace), refused unless inside it and
        outside the forbidden paths, and unless every hard link of it is inside too."""
        return self.paths.resolve(raw)

    def summary(self) -> str:
        """The policy in a few lines, for the prompt's Active Security Policy section."""
        commands = ", ".join(f"`{c}`" for c in self.allowed_commands) or "none"
        if self.autonomy == "full":
            commands = "any (autonomy is full)"
        lines = [
            f"- Autonomy level: {self.autonomy}",
            f"{COMMANDS_ALLOWED} {commands}",
            FILES_INSIDE if self.autonomy == "full" else PATHS_INSIDE,
        ]
        inside = [p for p in self.forbidden_paths if self.workspace in p.parents]
        if inside:  # the others are outside the workspace: already out of reach
            lines.append("- Forbidden inside it: " + ", ".join(f"`{p}`" for p in inside))
        return "\n".join(lines)
