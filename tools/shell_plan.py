"""From a command line to what runs: parsed, every word checked, rendered back quoted.

Under `read_only` and `supervised` the model's text never reaches a shell. It is parsed
(tools/shell_grammar.py), globs and `~` are expanded here inside the workspace, every path —
argument, attached option value, redirection — goes through the one resolver, each program's
options are checked by its rules (tools/program_rules.py), and the script that runs is
rendered from the checked structure with every word single-quoted, so /bin/sh reads exactly
the words that were checked. Under `full` the text runs as written: the OS sandbox is then
the only boundary, as it is the first one at every level.
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.program_rules import WRAPPERS, check_program
from tools.shell_grammar import CommandLine, Redirect, ShellRefused, Word, parse_command_line
from tools.shell_grammar import render_posix as render

# Where a deletion or an overwrite needs nobody's approval.
SCRATCH_DIRS = ("tmp", "scratch")
_DELETERS = frozenset({"rm", "rmdir", "unlink", "shred"})
_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin"})


@dataclass(frozen=True)
class ShellPlan:
    script: str  # what /bin/sh runs, inside the sandbox
    ask: tuple[str, ...] = ()  # why the owner must approve first (supervised); empty: go
    rules: tuple[str, ...] = ()  # what "Always allow" remembers, e.g. "shell:rm"


@dataclass
class _Planner:
    policy: SecurityPolicy
    asks: dict[str, str] = field(default_factory=dict)  # rule -> reason
    expansions: dict[Word, list[str]] = field(default_factory=dict)

    def expand(self, word: Word) -> list[str]:
        """A word as the program will receive it: `~` is the workspace (HOME in the
        sandbox), a glob is matched inside the workspace (sorted, dot files left out, the
        pattern itself when nothing matches, as bash does)."""
        if word in self.expansions:
            return self.expansions[word]
        text = word.text
        pattern = word.pattern or text
        if word.tilde:
            home = str(self.policy.workspace)
            text, pattern = home + text[1:], glob.escape(home) + pattern[1:]
        found = [text]
        if word.glob:
            matches = sorted(glob.glob(pattern, root_dir=self.policy.workspace))
            for match in matches:
                self.check_path(match, f"the glob {word.text!r} matches")
            found = matches or [text]
        self.expansions[word] = found
        return found

    def check_path(self, raw: str, what: str) -> Path:
        try:
            return self.policy.resolve_path(raw)
        except PolicyError as exc:
            raise PolicyError(f"{what} {exc}", short=exc.short) from None

    def check_writable(self, raw: str, path: Path, what: str) -> None:
        try:
            self.policy.paths.check_write(raw, path)
        except PolicyError as exc:
            raise PolicyError(f"{what} {exc}", short=exc.short) from None

    def check_command(self, argv: list[str]) -> None:
        program, args = argv[0], argv[1:]
        name = os.path.basename(program)
        read_only = self.policy.autonomy == "read_only"
        allowed = "/" not in program and name in self.policy.allowed_commands
        if name in WRAPPERS:
            raise PolicyError(
                f"{name} runs other programs, which cannot be checked; run the program itself"
            )
        if not allowed:
            if read_only:
                raise PolicyError(
                    f"command {program!r} is not in the allowed commands "
                    f"({', '.join(self.policy.allowed_commands) or 'none'}) and autonomy is "
                    "read_only"
                )
            self.asks[f"shell:{program}"] = f"{program} is not in the allowed commands"
        verdict = check_program(name, args)
        if verdict.refusal:
            raise PolicyError(verdict.refusal)
        if name == "find" and "-delete" in args and not read_only:
            self.asks["shell:find -delete"] = "find -delete deletes every file it matches"
        if verdict.writes and read_only:
            raise PolicyError(f"{name} writes files, and autonomy is read_only")
        for raw in verdict.paths:
            if raw not in _DEVICES:
                path = self.check_path(raw, f"{name}: the path")
                if verdict.writes:  # which of its paths it writes is not known: all count
                    self.check_writable(raw, path, f"{name} writes, and")
                if name in _DELETERS and not self._scratch(path) and allowed:
                    self.asks[f"shell:{name}"] = f"{name} deletes {raw}"

    def check_redirect(self, redirect: Redirect) -> None:
        if redirect.target is None:
            return  # a dup (2>&1) or a here-document: no file
        [raw] = self.expand(redirect.target) or [""]
        if raw in _DEVICES:
            return
        path = self.check_path(raw, "the redirection to")
        if redirect.op == "<":
            return
        if self.policy.autonomy == "read_only":
            raise PolicyError(
                f"writing to {raw} with {redirect.op} is refused: autonomy is read_only"
            )
        self.check_writable(raw, path, f"the redirection {redirect.op}")
        if redirect.op == ">" and path.is_file() and not self._scratch(path):
            self.asks["shell:overwrite"] = f"> overwrites the existing file {raw}"

    def _scratch(self, path: Path) -> bool:
        return any(self.policy.workspace / d in path.parents for d in SCRATCH_DIRS)


def plan_command(command: str, policy: SecurityPolicy) -> ShellPlan:
    """The script to run for `command`, and what needs the owner's approval; PolicyError
    when it cannot run at this autonomy level at all."""
    if not command.strip():
        raise PolicyError("the command is empty")
    if policy.autonomy == "full":
        return ShellPlan(command)
    try:
        line: CommandLine = parse_command_line(command)
    except ShellRefused as exc:
        raise PolicyError(str(exc)) from None
    planner = _Planner(policy)
    for _connector, pipeline in line.steps:
        for simple in pipeline.commands:
            argv = [arg for word in simple.argv for arg in planner.expand(word)]
            planner.check_command(argv)
            for redirect in simple.redirects:
                planner.check_redirect(redirect)
    script = render(line, planner.expand)
    return ShellPlan(script, tuple(planner.asks.values()), tuple(planner.asks))


def check_argv(argv: Sequence[str], policy: SecurityPolicy) -> ShellPlan:
    """One program's words as given (a skill tool's, never parsed from text), checked as
    the shell checks a simple command: allow-list, the program's options, every path."""
    if policy.autonomy == "full":
        return ShellPlan(shlex.join(argv))
    planner = _Planner(policy)
    planner.check_command(list(argv))
    return ShellPlan(shlex.join(argv), tuple(planner.asks.values()), tuple(planner.asks))
