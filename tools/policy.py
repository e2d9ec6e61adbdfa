"""SecurityPolicy: what the tools may touch — workspace paths, commands, autonomy level.

The policy is enforced here, in the tools, not in the prompt: a model that ignores its
instructions still cannot read outside the workspace or run a command that is not allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.base import ToolCallContext
from tools.boundaries import (
    DEFAULT_OWNER_PRIVATE,
    IDENTITY_FILES,
    hidden_from,
    is_identity_path,
)
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
    # Beyond IDENTITY_FILES, what shapes every prompt: the AIEOS identity, when in the workspace.
    prompt_files: tuple[str, ...] = ()
    tainted: bool = False  # the call's turn read words the owner did not write

    @classmethod
    def from_settings(
        cls,
        settings: SecuritySettings,
        workspace: Path,
        *,
        home: Path | None = None,
        identity_file: str = "",
    ) -> SecurityPolicy:
        """The policy for `workspace`; with `home` (the pinclaw home), its config, state
        database and logs are forbidden too, wherever PINCLAW_HOME points; `identity_file`:
        an AIEOS identity's path (relative to the workspace), guarded as SOUL.md is."""
        forbidden = [Path(p).expanduser() for p in settings.forbidden_paths]
        if home is not None:
            forbidden += [home / name for name in RUNTIME_FILES]
        workspace = workspace.expanduser().resolve()
        forbidden += [path for path in installation() if workspace in path.parents]
        return cls(
            workspace=workspace,
            autonomy=settings.autonomy,
            allowed_commands=tuple(settings.allowed_commands),
            forbidden_paths=tuple(p.resolve() for p in forbidden),
            owner_private=tuple(dict.fromkeys((*DEFAULT_OWNER_PRIVATE, *settings.owner_private))),
            prompt_files=_inside(workspace, identity_file),
        )

    def for_call(self, call: ToolCallContext) -> SecurityPolicy:
        """The policy of one call: for any turn but the owner's own private one, the
        owner-private files and the other chats' inbox folders are forbidden too, so the
        resolver, the shell's parser and the sandbox's masks all keep them out; a tainted
        turn's counts the owner's prompt files as identity files (`is_identity`)."""
        tainted = call.taint.tainted
        if call.owner_private:
            return dataclasses.replace(self, tainted=True) if tainted else self
        hidden = hidden_from(
            self.workspace, owner_private=self.owner_private, own_chat_key=call.chat_key
        )
        forbidden = (*self.forbidden_paths, *hidden)
        return dataclasses.replace(self, forbidden_paths=forbidden, tainted=tainted)

    def is_identity(self, path: Path) -> bool:
        """A resolved path that shapes later prompts (tools/boundaries.py): the identity
        files, skills and an AIEOS identity; in a tainted turn also MEMORY.md and USER.md,
        read into the owner's own turns' prompts (words planted there would be obeyed
        later in a turn that starts untainted). Changing one asks the owner each time."""
        more = (*self.prompt_files, *(DEFAULT_OWNER_PRIVATE if self.tainted else ()))
        return is_identity_path(self.workspace, path, more)

    @property
    def identity_paths(self) -> tuple[Path, ...]:
        """The files and folders that shape every chat's prompt, for a sandbox to freeze."""
        return tuple(self.workspace / name for name in (*IDENTITY_FILES, *self.prompt_files))

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


def installation() -> set[Path]:
    """Where the code that runs pinclaw lies: its Python's prefixes (a venv's site-packages,
    where a `.pth` file runs at every start), the folders imports are read from, and pinclaw's
    own packages. A workspace that holds one (the home folder, with uv's or pipx's venv under
    ~/.local) must not let a model write there: what it wrote would run, unconfined, at the
    next start."""
    here = Path(__file__).resolve().parent.parent  # beside tools/: agent/ and channels/
    found = {Path(sys.prefix), Path(sys.base_prefix), *(here / p for p in ("agent", "tools"))}
    found |= {here / "channels", *(Path(entry) for entry in sys.path if entry)}
    if site.ENABLE_USER_SITE:
        found.add(Path(site.getusersitepackages()))
    return {path.resolve() for path in found if path.is_absolute()}


def _inside(workspace: Path, name: str) -> tuple[str, ...]:
    """`name` relative to the workspace, when it lies inside (a file outside is no tool's)."""
    if not name:
        return ()
    path = Path(os.path.normpath(workspace / Path(name).expanduser()))
    return (path.relative_to(workspace).as_posix(),) if workspace in path.parents else ()
