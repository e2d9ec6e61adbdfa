"""Under `full` the command runs as written, but its forbidden paths are refused first.

The OS sandbox is the boundary at full autonomy; this is a second line in front of it, for
the words that can be read before the command runs. They are read by the same grammar and
program rules as under supervised, or, where the grammar refuses a construct (`$(...)`,
`for`, `~root`), by a plain word split. A word that names a path must not lie in a forbidden
path (/etc, /root, /proc, /var, ~/.ssh …, the pinclaw home's runtime files, what this call
may not see): the same refusal as under supervised. Nothing else is refused — a path
outside the workspace (/usr/bin/python3, /tmp, /usr/share/dict) is fine, nothing is asked,
the allow-list does not apply — and words known only when the command runs ($HOME, $(…),
backquotes) are left to the sandbox. A wrapper's words (env, sudo, python3 …) all count as
paths, and `sh -c SCRIPT` is read as a command line of its own.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

from tools.paths import PolicyError
from tools.policy import SecurityPolicy
from tools.shell.grammar import ShellRefused, Word, parse_command_line
from tools.shell.program_rules import check_program, runs_others


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Devices a command may always name: they hold nothing of anybody's.
DEVICES = _words(
    "/dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/stdin /dev/stdout /dev/stderr "
    "/dev/tty"
)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh"})
_KEYWORDS = _words(
    "if then else elif fi do done while until for in case esac select function time coproc "
    "! { } [[ ]]"
)
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "&>", "&>>", ">&", "<&", "<<<", "<<", "<<-"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)\\?([A-Za-z0-9_]+)\1")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_MAX_GLOB = 1_000
_MAX_DEPTH = 3

Simple = tuple[list[str], list[str]]  # the words of a simple command, its redirect targets


def check_full(command: str, policy: SecurityPolicy, depth: int = 0) -> None:
    """PolicyError when a word of `command` that can be read names a forbidden path."""
    if "\x00" in command:
        raise PolicyError("a NUL character in the command")  # no program can receive it
    try:
        command.encode()
    except UnicodeEncodeError:  # a lone surrogate: refused as supervised's parser does
        raise PolicyError("the command is not valid Unicode text") from None
    for argv, targets in _commands(command, policy.workspace):
        check_words(argv, policy, depth)
        for target in targets:
            check_forbidden(target, "the redirection to", policy)


def check_words(argv: Sequence[str], policy: SecurityPolicy, depth: int = 0) -> None:
    """One program's words, as check_full reads them."""
    if not argv:
        return
    name = os.path.basename(argv[0])
    if runs_others(name):
        paths = list(argv)
        script = _shell_script(argv[1:]) if name in _SHELLS else None
        if script is not None and depth < _MAX_DEPTH:
            check_full(script, policy, depth + 1)
    else:
        paths = list(check_program(argv[0], argv[1:]).paths)
    for raw in paths:
        check_forbidden(raw, f"{name}: the path", policy)


def check_forbidden(raw: str, what: str, policy: SecurityPolicy) -> None:
    """Refuse `raw` (relative to the workspace) when it, or where its links lead, lies in a
    forbidden path. A forbidden folder that holds the workspace (/root, when the home is
    there) forbids everything of it but the workspace."""
    if raw in DEVICES or "\x00" in raw:
        return
    workspace = policy.workspace
    lexical = Path(os.path.normpath(os.path.join(workspace, _home(raw, workspace))))
    try:
        real = lexical.resolve()
    except (OSError, RuntimeError):
        real = lexical
    for path in dict.fromkeys((lexical, real)):
        inside = path == workspace or workspace in path.parents
        for forbidden in policy.forbidden_paths:
            holds_workspace = forbidden == workspace or forbidden in workspace.parents
            if (path == forbidden or forbidden in path.parents) and not (
                holds_workspace and inside
            ):
                raise PolicyError(
                    f"{what} {raw!r} is inside the forbidden path {forbidden}",
                    short="it is forbidden",
                )


def _home(raw: str, workspace: Path) -> str:
    """`~` and `~/x` are the workspace (HOME in the sandbox); `~user/x` is that user's home."""
    if not raw.startswith("~"):
        return raw
    user, _, rest = raw[1:].partition("/")
    if not user:
        return os.path.join(workspace, rest)
    try:
        return os.path.join(pwd.getpwnam(user).pw_dir, rest)
    except KeyError:
        return raw


def _commands(command: str, workspace: Path) -> Iterator[Simple]:
    try:
        line = parse_command_line(command)
    except ShellRefused:
        yield from _loose(command, workspace)
        return
    for _connector, pipeline in line.steps:
        for simple in pipeline.commands:
            argv = [text for word in simple.argv for text in _expand(word, workspace)]
            targets = [r.target.text for r in simple.redirects if r.target is not None]
            yield argv, [target for raw in targets for target in _globbed(raw, workspace)]


def _expand(word: Word, workspace: Path) -> list[str]:
    text = str(workspace) + word.text[1:] if word.tilde else word.text
    if not word.glob:
        return [text]
    pattern = word.pattern or word.text
    pattern = glob.escape(str(workspace)) + pattern[1:] if word.tilde else pattern
    return _globbed(pattern, workspace, literal=text)


def _globbed(pattern: str, workspace: Path, literal: str | None = None) -> list[str]:
    """What the shell would make of a pattern (bounded), and the pattern's own text."""
    if not any(c in pattern for c in "*?["):
        return [pattern]
    found = itertools.islice(glob.iglob(pattern, root_dir=workspace), _MAX_GLOB)
    return [literal if literal is not None else pattern, *found]


def _loose(command: str, workspace: Path) -> Iterator[Simple]:
    """The plain words of a command line the grammar refused: split as sh would split the
    text it can read, here-document bodies left out; words with $ or ` are skipped."""
    lexer = shlex.shlex(_without_heredocs(command), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an open quote: nothing can be read with confidence
        return
    argv: list[str] = []
    targets: list[str] = []
    redirect = ""
    for token in [*tokens, ";"]:
        readable = "$" not in token and "`" not in token
        if token and all(c in "();<>|&" for c in token):
            if token in _REDIRECTS:
                redirect = token
                continue
            yield _simple(argv), targets
            argv, targets, redirect = [], [], ""
        elif redirect:
            if readable and redirect not in ("<<", "<<-") and not token.isdigit():
                targets += _globbed(token, workspace)
            redirect = ""
        elif readable:
            argv += _globbed(token, workspace)


def _simple(words: list[str]) -> list[str]:
    """Leading keywords (if, do, {, !) and assignments (X=1) are not the program."""
    while words and (words[0] in _KEYWORDS or _ASSIGNMENT.match(words[0])):
        words = words[1:]
    return words


def _without_heredocs(command: str) -> str:
    """The text without the lines of its here-documents: they are data, not words."""
    lines = command.split("\n")
    kept: list[str] = []
    ends: list[str] = []
    for line in lines:
        if ends:
            if line.lstrip("\t") == ends[0]:
                ends.pop(0)
            continue
        kept.append(line)
        ends += [match.group(2) for match in _HEREDOC.finditer(line)]
    return "\n".join(kept)


def _shell_script(args: Sequence[str]) -> str | None:
    """The SCRIPT of `sh -c SCRIPT` (also `-ec`, `-lc`): the first word after the options."""
    for index, arg in enumerate(args):
        if not arg.startswith("-") or arg in ("-", "--"):
            return None
        if "c" in arg[1:] and not arg.startswith("--"):
            rest = [a for a in args[index + 1 :] if not a.startswith("-")]
            return rest[0] if rest else None
    return None
