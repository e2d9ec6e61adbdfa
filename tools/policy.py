"""SecurityPolicy: what the tools may touch — workspace paths, commands, autonomy level.

The policy is enforced here, in the tools, not in the prompt: a model that ignores its
instructions still cannot read outside the workspace or run a command that is not allowed.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tools.config import Autonomy, SecuritySettings
from tools.paths import PathRules, PolicyError

__all__ = ["PolicyError", "SecurityPolicy"]


# Command substitution and process substitution would run commands the check never sees.
_SUBSTITUTION = re.compile(r"`|\$\(|<\(|>\(")
# Split a command line into the simple commands of a pipeline or list.
_SEPARATORS = re.compile(r"\|\||&&|[|;&\n]")
_WRITE_REDIRECT = re.compile(r"(?<![<&0-9])>|[0-9]>(?!&)")
_HARMLESS_PATHS = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})
# Arguments that make an allowed program run another one (find -exec rm ...) or delete.
_RUNS_OTHERS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete"})


# The runtime's own files in its home: never reachable by a tool, wherever the home is.
RUNTIME_FILES = ("config.toml", "state.db", "state.db-wal", "state.db-shm", "logs",
                 "agent.env", "agent.lock", "agent.sock")  # fmt: skip


@dataclass(frozen=True)
class SecurityPolicy:
    workspace: Path
    autonomy: Autonomy
    allowed_commands: tuple[str, ...]
    forbidden_paths: tuple[Path, ...]

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
        )

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

    def check_command(self, command: str) -> None:
        """Refuse a command line the autonomy level or the allow-list does not permit."""
        if not command.strip():
            raise PolicyError("the command is empty")
        if self.autonomy == "full":
            return
        if _SUBSTITUTION.search(command):
            raise PolicyError(
                "command substitution (`...`, $(...), <(...)) is not allowed at this autonomy level"
            )
        if self.autonomy == "read_only" and _WRITE_REDIRECT.search(command):
            raise PolicyError("writing with > is not allowed: autonomy is read_only")
        for part in _SEPARATORS.split(command):
            if not part.strip():
                continue
            program, arguments = _split_command(part)
            if program not in self.allowed_commands:
                allowed = ", ".join(self.allowed_commands) or "none"
                raise PolicyError(
                    f"command {program!r} is not in the allowed commands ({allowed}); "
                    "ask the owner to add it to [security] allowed_commands"
                )
            for argument in arguments:
                if argument in _RUNS_OTHERS:
                    raise PolicyError(f"{program} {argument} is not allowed at this autonomy level")
                self._check_argument(argument)

    def _check_argument(self, argument: str) -> None:
        """An argument that names a path must name one inside the workspace, and not a
        forbidden one there. Words that are not paths resolve inside it and pass."""
        value = argument.partition("=")[2] if argument.startswith("-") else argument
        if not value or value in _HARMLESS_PATHS:
            return
        try:
            self.resolve_path(value)
        except PolicyError as exc:
            raise PolicyError(f"argument refused: {exc}") from None

    def summary(self) -> str:
        """The policy in a few lines, for the prompt's Active Security Policy section."""
        commands = ", ".join(f"`{c}`" for c in self.allowed_commands) or "none"
        if self.autonomy == "full":
            commands = "any (autonomy is full)"
        lines = [
            f"- Autonomy level: {self.autonomy}",
            f"- Allowed shell commands: {commands}",
            "- File tools stay inside the workspace"
            + ("" if self.autonomy == "full" else ", and so do shell path arguments"),
        ]
        inside = [p for p in self.forbidden_paths if self.workspace in p.parents]
        if inside:  # the others are outside the workspace: already out of reach
            lines.append("- Forbidden inside it: " + ", ".join(f"`{p}`" for p in inside))
        return "\n".join(lines)


def _split_command(simple_command: str) -> tuple[str, list[str]]:
    """The program's name and its arguments, after any leading VAR=value assignments."""
    try:
        words = shlex.split(simple_command)
    except ValueError:
        words = simple_command.split()
    for index, word in enumerate(words):
        if "=" in word and not word.startswith(("=", "-")):
            continue
        return os.path.basename(word), words[index + 1 :]
    return "", []
