"""From a command line to what runs: parsed, every word checked, rendered back quoted.

Under `read_only` and `supervised` the model's text never reaches a shell. It is parsed
(tools/shell/grammar.py), globs and `~` are expanded here inside the workspace, every path —
argument, attached option value, redirection — goes through the one resolver, each program's
options are checked by its rules (tools/shell/program_rules.py), and the script that runs is
rendered from the checked structure with every word single-quoted, so /bin/sh reads exactly
the words that were checked. Under `supervised` a command makes no link (tools/shell/links.py)
and what it would replace, delete or move (tools/shell/effects/effects.py) asks the owner: an
existing
file outside tmp/ and scratch/ under a rule "Always allow" may remember, an identity file each
time (tools/shell/asks.py), and so does a program that reaches the network
(tools/shell/network.py: nothing else gets it). Under `full` the text runs as written, after
the forbidden paths among the words that can be read are refused (tools/shell/full_mode.py):
the OS sandbox is the boundary there, as it is the first one at every level.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.shell.asks import Asks
from tools.shell.effects.effects import effects
from tools.shell.effects.file_effects import NOTHING, Effect, Stdin
from tools.shell.effects.git_effects import git_effects
from tools.shell.full_mode import DEVICES, check_full, check_words
from tools.shell.grammar import (
    CommandLine,
    Pipeline,
    Redirect,
    ShellRefused,
    Word,
    parse_command_line,
)
from tools.shell.links import injected, program_refusal
from tools.shell.network import reaches_network
from tools.shell.program_rules import WRAPPERS, check_program
from tools.shell.render import render_posix as render

Injection = tuple[tuple[str, ...], tuple[str, ...]]  # words after the program; words last


@dataclass(frozen=True)
class ShellPlan:
    script: str  # what /bin/sh runs, inside the sandbox
    ask: tuple[str, ...] = ()  # why the owner must approve first (supervised); empty: go
    rules: tuple[str, ...] = ()  # what "Always allow" remembers, e.g. "shell:rm"
    covers: str = ""  # what "Always allow" would cover, in words, for the owner to read
    argv: tuple[str, ...] = ()  # check_argv: the words to run (with the words it adds)
    # What reaches the network ("curl", "git ls-remote"): approved, the command runs with
    # it (tools/shell/network.py); nothing else gets the network below autonomy full.
    network: tuple[str, ...] = ()


@dataclass
class _Planner:
    policy: SecurityPolicy
    network: bool = True  # [security] sandbox_network: False, nothing asks for it
    asks: Asks = field(init=False)
    expansions: dict[Word, list[str]] = field(default_factory=dict)
    injections: dict[int, Injection] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.asks = Asks(self.policy.workspace)

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

    def check_command(self, argv: list[str], stdin: Stdin = NOTHING, index: int = 0) -> None:
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
            self.asks.program(program)
        verdict = check_program(name, args)
        if verdict.refusal:
            raise PolicyError(verdict.refusal)
        if verdict.writes and read_only:
            raise PolicyError(f"{name} writes files, and autonomy is read_only")
        for raw in verdict.paths:
            if raw not in DEVICES:
                path = self.check_path(raw, f"{name}: the path")
                if verdict.writes:  # which of its paths it writes is not known: all count
                    self.check_writable(raw, path, f"{name} writes, and")
        reaching = reaches_network(program, args) if self.network else None
        if reaching and read_only:
            raise PolicyError(
                f"{reaching} reaches the network, which needs the owner's approval, and "
                "autonomy is read_only"
            )
        if read_only:
            return
        if reaching:
            self.asks.network(reaching)
        if why := program_refusal(name):
            raise PolicyError(why)
        self.injections[index] = injected(name, args)
        found = effects(name, program, args, verdict, self.policy.workspace, stdin)
        if name == "git":
            found += git_effects(args, self.policy.workspace, stdin)
        for effect in found:
            self.effect(effect)

    def check_redirect(self, redirect: Redirect) -> None:
        if redirect.target is None:
            return  # a dup (2>&1) or a here-document: no file
        targets = self.expand(redirect.target)
        if len(targets) != 1:
            raise PolicyError(
                f"the redirection to {redirect.target.text!r} names {len(targets)} files"
            )
        [raw] = targets
        if raw in DEVICES:
            return
        path = self.check_path(raw, "the redirection to")
        if redirect.op == "<":
            return
        if self.policy.autonomy == "read_only":
            raise PolicyError(
                f"writing to {raw} with {redirect.op} is refused: autonomy is read_only"
            )
        self.check_writable(raw, path, f"the redirection {redirect.op}")
        self.effect(Effect(raw, "replaces" if redirect.op == ">" else "writes", redirect.op))

    def effect(self, effect: Effect) -> None:
        """A change a command would make: confined and out of git folders like any path,
        then asked about when it replaces or deletes, or touches an identity file."""
        if effect.raw in DEVICES:
            return
        path = self.check_path(effect.raw, f"{effect.by}: the path")
        self.check_writable(effect.raw, path, f"{effect.by} writes, and")
        self.asks.effect(effect, path, self.policy.is_identity)

    def stdin(self, simple_redirects: Sequence[Redirect], first: bool) -> Stdin:
        """What the command reads on standard input: a file, a here-document, nothing (the
        first of a pipeline: the sandbox gives it /dev/null), or a pipe (unknown)."""
        found = Stdin() if not first else NOTHING
        for redirect in simple_redirects:
            if redirect.fd != 0:
                continue
            if redirect.op == "dup" or (redirect.target is None and redirect.heredoc is None):
                found = Stdin()
            elif redirect.heredoc is not None:
                found = Stdin(text=redirect.heredoc)
            elif redirect.target is not None:
                found = Stdin(path=self.expand(redirect.target)[0])
        return found

    def plan(self, script: str, argv: Sequence[str] = ()) -> ShellPlan:
        asks = self.asks
        return ShellPlan(
            script, asks.reasons(), asks.rules(), asks.covers(), tuple(argv), tuple(asks.reaching)
        )


def plan_command(command: str, policy: SecurityPolicy, *, network: bool = True) -> ShellPlan:
    """The script to run for `command`, and what needs the owner's approval; PolicyError
    when it cannot run at this autonomy level at all. `network`: [security]
    sandbox_network (False: no command gets the network, so none asks for it)."""
    if not command.strip():
        raise PolicyError("the command is empty")
    if policy.autonomy == "full":
        check_full(command, policy)
        return ShellPlan(command)
    try:
        line: CommandLine = parse_command_line(command)
    except ShellRefused as exc:
        raise PolicyError(str(exc)) from None
    planner = _Planner(policy, network)
    index = 0
    for _connector, pipeline in line.steps:
        for position, simple in enumerate(pipeline.commands):
            argv = [arg for word in simple.argv for arg in planner.expand(word)]
            for redirect in simple.redirects:
                planner.check_redirect(redirect)
            stdin = planner.stdin(simple.redirects, position == 0)
            planner.check_command(argv, stdin, index)
            index += 1
    script = render(_with_injections(line, planner), planner.expand)
    return planner.plan(script)


def _with_injections(line: CommandLine, planner: _Planner) -> CommandLine:
    """The line with the words the link rules add: after the program, and last among its
    options (before a `--`). The program must be one plain word for that."""
    steps = []
    index = 0
    for connector, pipeline in line.steps:
        commands = []
        for simple in pipeline.commands:
            after, last = planner.injections.get(index, ((), ()))
            index += 1
            argv = list(simple.argv)
            if (after or last) and len(planner.expand(argv[0])) != 1:
                raise PolicyError(f"name the program {argv[0].text!r} plainly, not by a glob")
            at = next((i for i, w in enumerate(argv) if i and w.text == "--"), len(argv))
            argv[at:at] = [Word(text) for text in last]
            argv[1:1] = [Word(text) for text in after]
            commands.append(dataclasses.replace(simple, argv=tuple(argv)))
        steps.append((connector, Pipeline(tuple(commands))))
    return CommandLine(tuple(steps))


def check_argv(argv: Sequence[str], policy: SecurityPolicy) -> ShellPlan:
    """One program's words as given (a skill tool's, never parsed from text), checked as
    the shell checks a simple command: allow-list, the program's options, every path.
    `argv` of the plan: the words to run, with those the link rules add."""
    if policy.autonomy == "full":
        check_words(list(argv), policy)
        return ShellPlan(shlex.join(argv), argv=tuple(argv))
    planner = _Planner(policy)
    planner.check_command(list(argv))
    after, last = planner.injections.get(0, ((), ()))
    words = list(argv[1:])
    at = words.index("--") if "--" in words else len(words)
    words[at:at] = last
    run = [argv[0], *after, *words]
    return planner.plan(shlex.join(run), run)
