"""Render checked commands back as a POSIX sh script: what the shell tool runs.

The shell tool never runs the text it was given: tools/shell/grammar.py parses it into static
simple commands, tools/shell/plan.py checks them, and `render_posix` writes them out again,
every word single-quoted and every here-document with a quoted delimiter, so what runs is
exactly what was checked. It lives apart from the parser because it only reads the parsed
data (CommandLine, Redirect, Word) and the parser never needs it.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.shell.grammar import CommandLine, Redirect, Word


def quote(text: str) -> str:
    """Always single-quoted: a quoted word is never a keyword, an assignment or a pattern."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def render_posix(line: CommandLine, words: Callable[[Word], list[str]] | None = None) -> str:
    """A POSIX sh script doing exactly `line`: words single-quoted, here-docs with a quoted
    delimiter, `;` as a new line. `words` expands a Word (globs, ~); default: its text."""
    expand = words or (lambda word: [word.text])
    script: list[str] = []
    bodies: list[str] = []
    for connector, pipeline in line.steps:
        if connector == ";":
            script += ["\n", *bodies]
            bodies.clear()
        elif connector:
            script.append(f" {connector} ")
        commands: list[str] = []
        for command in pipeline.commands:
            argv = [quote(arg) for word in command.argv for arg in expand(word)]
            if not argv:
                raise ValueError("a command expanded to no words")
            redirects = [_render_redirect(r, expand, bodies) for r in command.redirects]
            commands.append(" ".join(argv + redirects))
        script.append(" | ".join(commands))
    return "".join([*script, "\n", *bodies])


def _render_redirect(r: Redirect, expand: Callable[[Word], list[str]], bodies: list[str]) -> str:
    """The fd is left out where it is the default: tree-sitter misreads an explicit 0."""
    if r.op == "dup":
        return ("<" if r.fd == 0 else ">" if r.fd == 1 else f"{r.fd}>") + f"&{r.dup_fd}"
    fd = "" if r.fd == (0 if r.op == "<" else 1) else str(r.fd)
    if r.heredoc is not None:
        if r.heredoc and not r.heredoc.endswith("\n"):
            raise ValueError("a here-document body must end with a newline")
        delimiter = "PINCLAW_EOF"
        while delimiter in r.heredoc.split("\n"):
            delimiter += "_"
        bodies.append(f"{r.heredoc}{delimiter}\n")
        return f"{fd}<<'{delimiter}'"
    targets = expand(r.target) if r.target else []
    if len(targets) != 1:
        raise ValueError(f"ambiguous redirect: {r.target.text if r.target else None!r}")
    return f"{fd}{r.op}{quote(targets[0])}"
