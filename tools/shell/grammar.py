"""Parse a shell command line into static simple commands, for render.py to write as POSIX sh.

The shell tool runs `render_posix(parse_command_line(text))`, never the text: what is checked
is what runs, and what is only known at run time (expansions, compound commands) is refused.
tree-sitter forgives syntax errors, so the walk allows only node types it knows, accounts for
every byte, and reads each word itself rather than trusting the tree's view of it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal, cast

import tree_sitter_bash
from tree_sitter import Language, Node, Parser


class ShellRefused(Exception):
    """The command line cannot be checked before it runs; the message says what and why."""


@dataclass(frozen=True)
class Word:
    """A word after quote removal. `glob`: an unquoted *, ? or [...], for the caller to
    expand in the workspace with `pattern` (the text with quoted metacharacters bracketed,
    '*' -> [*]). `tilde`: an unquoted leading ~ or ~/, for the caller to map to HOME."""

    text: str
    glob: bool = False
    tilde: bool = False
    pattern: str | None = None


@dataclass(frozen=True)
class Redirect:
    """`&>f` is two redirects, 1>f then 2>&1. A here-doc or here-string is op "<" with no
    target and its text in `heredoc`; "dup" is fd>&dup_fd."""

    fd: int
    op: Literal["<", ">", ">>", "dup"]
    target: Word | None
    dup_fd: int | None = None
    heredoc: str | None = None


@dataclass(frozen=True)
class SimpleCommand:
    argv: tuple[Word, ...]  # argv[0] is the program
    redirects: tuple[Redirect, ...] = ()


@dataclass(frozen=True)
class Pipeline:
    commands: tuple[SimpleCommand, ...]


Connector = Literal["", ";", "&&", "||"]


@dataclass(frozen=True)
class CommandLine:
    steps: tuple[tuple[Connector, Pipeline], ...]  # the connector before each ("" first)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PARSER = Parser(Language(tree_sitter_bash.language()))
_WORDS = frozenset({"word", "string", "raw_string", "concatenation", "number", "$"})
# Argument nodes read by scan_word, which refuses the expansions among them with a reason.
_ARGUMENTS = _WORDS | _words(
    "simple_expansion expansion command_substitution arithmetic_expansion process_substitution "
    "ansi_c_string translated_string brace_expression"
)
# export, declare, unset ...: programs like any other, for the allow-list to judge
_DECLARATION_ARGUMENTS = _ARGUMENTS | _words(
    "variable_name variable_assignment declare export local readonly typeset unset"
)
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
_KEYWORDS = _words(
    "! [[ ]] { } if then else elif fi case esac for select while until do done in function time "
    "coproc"
)
_EXPANSIONS = ("$((", "$(", "${", "$'", '$"', "$", "`", "<(", ">(")
_FILE_OPS: dict[str, Literal["<", ">", ">>"]] = {"<": "<", ">": ">", ">|": ">", ">>": ">>"}
_REASONS = {  # node types, and the text that starts an expansion inside a word
    "subshell": "a subshell ( ... )",
    "compound_statement": "a group { ...; } or arithmetic (( ... ))",
    "function_definition": "a function definition",
    "if_statement": "if/then/fi",
    "for_statement": "a for or select loop",
    "c_style_for_statement": "a for (( )) loop",
    "while_statement": "a while or until loop",
    "case_statement": "case/esac",
    "test_command": "[ ... ] or [[ ... ]] (run the program: test -f x)",
    "negated_command": "! negation",
    "variable_assignment": "a VAR=value assignment (the environment cannot be changed)",
    "$((": "arithmetic expansion $((...))",
    "$(": "command substitution $(...)",
    "`": "command substitution `...`",
    "${": "parameter expansion ${...} (including ${IFS})",
    "$'": "$'...' quoting (use '...' with the characters typed as they are)",
    '$"': '$"..." quoting (use "..." or \'...\')',
    "$": "variable expansion ($NAME)",
    "<(": "process substitution <(...)",
    ">(": "process substitution >(...)",
    "{": "brace expansion ({a,b} or {1..3})",
}


def _refuse(key: str, detail: str = "") -> ShellRefused:
    """The reason for a node type, or for the expansion that `key` (a word's text) starts."""
    key = next((k for k in _EXPANSIONS if key.startswith(k)), key)
    reason = _REASONS.get(key, f"the shell syntax {key!r}")
    return ShellRefused(f"{reason}{detail} is not allowed: only static commands run")


@dataclass
class _Cmd:
    argv: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    def freeze(self) -> SimpleCommand:
        return SimpleCommand(tuple(self.argv), tuple(self.redirects))


class _Walker:
    """Walks the tree in source order, building the steps and accounting for every byte."""

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.pos = 0  # every byte before this is accounted for
        self.newline_ok = True  # the next token may start on a new line
        self.last, self.word_end = "", -1  # the last node's text; where the last word ended
        self.steps: list[tuple[Connector, list[_Cmd]]] = []
        self.connector: Connector | None = ""  # None: no connector since the last command
        self.piped = False

    def consume(self, node: Node, *, newline: bool = False) -> str:
        """The node's text, after blanks (or a newline where allowed); `newline`: one may follow."""
        if node.start_byte < self.pos:
            raise ShellRefused("the command line's structure could not be followed")
        _check_gap(self.src[self.pos : node.start_byte], self.newline_ok)
        self.pos, self.newline_ok = node.end_byte, newline
        self.last = self.src[node.start_byte : node.end_byte].decode()
        return self.last

    def word(self, node: Node, *, newline: bool = False) -> str:
        gap = self.src[self.pos : node.start_byte].replace(b"\\\n", b"")
        if self.word_end == self.pos and not gap:  # bash reads them as one word (or a#b)
            raise ShellRefused(f"a word the parser splits: {self.last!r} and what follows")
        self.word_end = node.end_byte
        return self.consume(node, newline=newline)

    def walk(self, node: Node) -> None:
        kind = node.type
        if kind == "comment":
            self.newline_ok = True
            self.word(node, newline=True)
        elif kind in ("|", "|&", "&&", "||", ";"):
            if self.connector is not None or self.piped:
                raise ShellRefused(f"{kind!r} with no command before it")
            self.consume(node, newline=True)
            if kind == "|&":  # bash: 2>&1 after the command's own redirections
                self.current().redirects.append(Redirect(2, "dup", None, dup_fd=1))
            self.piped = kind in ("|", "|&")
            self.connector = None if self.piped else cast(Connector, kind)
        elif kind == "&":
            raise ShellRefused("a background job (&): commands run in the foreground")
        elif kind in ("command", "declaration_command", "unset_command"):
            self.command(node)
        elif kind in ("program", "pipeline", "list", "redirected_statement"):
            if kind == "redirected_statement" and node.children[0].type in _REDIRECTS:
                raise ShellRefused("a redirection with no command: name the program to run")
            for child in node.children:
                redirect = child.type in _REDIRECTS and kind == "redirected_statement"
                (self.redirect if redirect else self.walk)(child)
        else:
            raise _refuse(kind)

    def current(self) -> _Cmd:
        if not self.steps:
            raise ShellRefused("a redirection with no command: name the program to run")
        return self.steps[-1][1][-1]

    def command(self, node: Node) -> None:
        cmd = _Cmd()
        if self.piped:
            self.steps[-1][1].append(cmd)
        else:
            if self.connector is None:  # only a new line separates the commands
                if b"\n" not in self.src[self.pos : node.start_byte]:
                    raise ShellRefused("two commands with no separator between them")
                self.connector, self.newline_ok = ";", True
            self.steps.append((self.connector, [cmd]))
        self.connector, self.piped = None, False
        arguments = _ARGUMENTS if node.type == "command" else _DECLARATION_ARGUMENTS
        for child in node.children:
            if child.type == "command_name" and child.named_child_count == 1:
                self.argument(cmd, child.named_children[0])
            elif child.type in arguments:
                self.argument(cmd, child)
            elif child.type in _REDIRECTS:
                self.redirect(child)
            else:
                raise _refuse(child.type)
        if not cmd.argv:
            raise ShellRefused("a redirection with no command: name the program to run")

    def argument(self, cmd: _Cmd, node: Node) -> None:
        raw = self.word(node)
        if raw == "$":  # tree-sitter splits $"..." into $ and a string
            raise _refuse(self.src[self.pos - 1 : self.pos + 1].decode(errors="replace"))
        if not cmd.argv and raw in _KEYWORDS:
            raise ShellRefused(f"the shell keyword {raw!r}: only simple commands run")
        cmd.argv.append(scan_word(raw))

    def redirect(self, node: Node) -> None:
        children = list(node.children)
        fd = None
        if children and children[0].type == "file_descriptor":
            text = self.consume(children.pop(0))
            if text not in tuple("0123456789"):
                raise ShellRefused(f"file descriptor {text!r}: only 0 to 9")
            fd = int(text)
        elif self.pos == node.start_byte and (self.last.isdigit() or self.last[:1] == "{"):
            raise ShellRefused("a file descriptor the parser does not see (0<f, {fd}>f)")
        op = self.consume(children.pop(0)) if children else ""
        if node.type == "heredoc_redirect":
            return self.heredoc(op, fd, children)
        if not children or any(c.type not in _WORDS for c in children):
            raise ShellRefused(f"the redirection {op!r} is not supported")
        for index, child in enumerate(children):
            word = scan_word(self.word(child))
            if index:  # `cat >f x`: the words after the target are arguments
                self.current().argv.append(word)
            else:
                self.redirect_to(op, fd, word)

    def redirect_to(self, op: str, fd: int | None, word: Word) -> None:
        add = self.current().redirects.append
        if op == "<<<" and not word.tilde:
            add(Redirect(fd or 0, "<", None, heredoc=word.text + "\n"))
        elif op in _FILE_OPS:
            add(Redirect((0 if op == "<" else 1) if fd is None else fd, _FILE_OPS[op], word))
        elif fd is None and op in ("&>", "&>>"):
            add(Redirect(1, ">>" if op == "&>>" else ">", word))
            add(Redirect(2, "dup", None, dup_fd=1))
        elif op in (">&", "<&") and word.text in tuple("0123456789"):
            default = 1 if op == ">&" else 0
            add(Redirect(default if fd is None else fd, "dup", None, dup_fd=int(word.text)))
        else:
            raise ShellRefused(f"the redirection {op!r} to {word.text!r} is not supported")

    def heredoc(self, op: str, fd: int | None, rest: list[Node]) -> None:
        """`<<END` or `<<-END`: the rest of its line comes first, then the body lines."""
        if op not in ("<<", "<<-") or not rest:
            raise ShellRefused(f"the here-document operator {op!r} is not supported")
        raw = self.consume(rest.pop(0))
        delimiter, cmd = scan_word(raw).text, self.current()
        index = len(cmd.redirects)  # before the redirections later on the line
        for child in rest:
            if child.type in _REDIRECTS:
                self.redirect(child)
            elif child.type in _WORDS:  # `cat <<EOF -n`: arguments after the here-doc
                self.argument(cmd, child)
            elif child.type not in ("heredoc_body", "heredoc_end"):
                self.walk(child)
        ends = [c for c in rest if c.type == "heredoc_end"]
        newline = self.src.find(b"\n", self.pos)
        if len(ends) != 1 or newline < 0 or self.src[self.pos : newline].strip(b" \t"):
            raise ShellRefused("a here-document whose lines could not be followed")
        start, end = newline + 1, ends[0]
        line = self.src.rfind(b"\n", 0, end.start_byte) + 1
        tabs = "\t" if op == "<<-" else ""  # <<- strips leading tabs
        indent = self.src[line : end.start_byte].decode().lstrip(tabs)
        closing = self.src[end.start_byte : end.end_byte + 1].rstrip(b"\n").decode()
        lines = [x.lstrip(tabs) for x in self.src[start:line].decode().split("\n")]
        if line < start or indent or closing != delimiter or delimiter in lines[:-1]:
            raise ShellRefused(f"the here-document's end line {delimiter!r} is not clear")
        body = "\n".join(lines)
        if not any(q in raw for q in "'\"\\") and any(c in body for c in "$`\\"):
            raise ShellRefused("$ ` or \\ in a here-document with an unquoted delimiter: <<'EOF'")
        cmd.redirects.insert(index, Redirect(fd or 0, "<", None, heredoc=body))
        self.pos = end.end_byte


def _check_gap(gap: bytes, newline_ok: bool) -> None:
    """Between tokens: blanks, line continuations, and a newline where one may be."""
    rest = re.sub(rb"\\\n|[ \t\n]" if newline_ok else rb"\\\n|[ \t]", b"", gap)
    if rest:
        crlf = " (a CRLF line ending? use LF)" if b"\r" in rest else ""
        raise ShellRefused(f"text the parser did not place: {rest.decode('latin-1')!r}{crlf}")


def parse_command_line(text: str) -> CommandLine:
    """The static structure of `text`, or ShellRefused saying what cannot be checked."""
    if "\x00" in text:
        raise ShellRefused("a NUL character in the command")
    try:
        src = text.encode()
    except UnicodeEncodeError:
        raise ShellRefused("the command is not valid Unicode text") from None
    root = _PARSER.parse(src).root_node
    if root.has_error:
        node: Node | None = root
        while node and node.type != "ERROR" and not node.is_missing:
            node = next((c for c in node.children if c.has_error or c.is_missing), None)
        at = node.start_byte if node else 0
        where = src[at : at + 20] or src[max(0, at - 20) : at]
        raise ShellRefused(f"a syntax error near {where.decode(errors='replace')!r}")
    walker = _Walker(src)
    walker.walk(root)
    _check_gap(src[walker.pos :], True)
    if not walker.steps:
        raise ShellRefused("the command is empty")
    return CommandLine(tuple((c, Pipeline(tuple(map(_Cmd.freeze, p)))) for c, p in walker.steps))


# Unquoted: \newline (dropped), \x, '...', "..." or a character. In "...": \ escapes $`"\ newline
_PIECE = re.compile(r"""\\\n|\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|(.)""", re.DOTALL)
_IN_DOUBLE = re.compile(r"""\\([$`"\\\n])|(.)""", re.DOTALL)


def scan_word(raw: str) -> Word:
    """Quote removal and escapes, by hand: the tree says where a word is, this says what
    it is, and refuses whatever would expand when it runs."""
    chars: list[tuple[str, bool]] = []  # (character, quoted)
    for piece in _PIECE.finditer(raw):
        escaped, single, double, plain = piece.groups()
        if escaped is not None or single is not None:
            chars += [(c, True) for c in escaped or single or ""]
        elif double is not None:
            for inner in _IN_DOUBLE.finditer(double):
                char = inner[2] or ("" if inner[1] == "\n" else inner[1])
                if inner[2] in ("`", "$") and inner.end() < len(double):  # "a$" is a $
                    raise _refuse(double[inner.start() :])
                chars += [(char, True)] if char else []
        elif plain is not None and raw.startswith(_EXPANSIONS, piece.start()):
            raise _refuse(raw[piece.start() :])
        elif plain is not None and plain in " \t\n\r;&|<>()'\"\\":
            raise ShellRefused(f"an unquoted {plain!r} in the word {raw!r} (or an open quote)")
        elif plain is not None:
            chars.append((plain, False))
    return _make_word(chars)


def _make_word(chars: list[tuple[str, bool]]) -> Word:
    text = "".join(c for c, _ in chars)
    tilde = bool(chars) and chars[0] == ("~", False)
    if tilde and len(chars) > 1 and chars[1] != ("/", False):
        raise ShellRefused(f"{text!r}: only ~ and ~/ are supported (not ~user, ~+ or ~-)")
    for before, after in pairwise(chars):
        if after == ("~", False) and before in (("=", False), (":", False)):
            raise ShellRefused(f"{text!r}: bash may expand a ~ after = or :; quote it")
    bare = "".join(c for c, quoted in chars if not quoted)
    braces = bare[bare.find("{") : bare.rfind("}") + 1] if "{" in bare else ""
    if "," in braces or ".." in braces:
        raise _refuse("{", f" in {text!r}")
    bracket = "[" in bare and "]" in bare[bare.find("[") + 1 :]
    if not ("*" in bare or "?" in bare or bracket):
        return Word(text, tilde=tilde)
    pattern = "".join(f"[{c}]" if quoted and c in "*?[" else c for c, quoted in chars)
    return Word(text, glob=True, tilde=tilde, pattern=pattern)
