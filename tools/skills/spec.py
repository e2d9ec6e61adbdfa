"""A skill tool as its SKILL.md declares it: a command template with typed parameters.

    tools:
      - name: check_release
        description: Check that a release tag builds and its tests pass.
        command: ./scripts/check.sh {target}
        parameters:
          target: {type: str, description: "The tag, e.g. v1.2"}

The template is split into words once, when the skill is loaded, by the author's quoting
(shlex). A placeholder fills in inside its one word and never makes another, so the value
`x; rm -rf ~` reaches the program as one argument; no shell ever reads it. The program is
literal: a script inside the skill's folder (run directly, or by an interpreter named
before it), or a program on PATH that the shell policy checks like any other.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Formatter
from typing import Any, Literal, cast

from tools.paths import PolicyError
from tools.shell.program_rules import check_program

ParamType = Literal["str", "int", "float", "bool", "path"]
PARAM_TYPES: tuple[ParamType, ...] = ("str", "int", "float", "bool", "path")
TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_PARAM_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
_TOOL_KEYS = frozenset({"name", "description", "command", "parameters", "writes"})
_PARAM_KEYS = frozenset({"type", "description", "default", "enum"})
# Programs that would lend the skill's command other privileges: never a skill tool's.
_PRIVILEGED = frozenset({"sudo", "doas", "su", "pkexec", "runuser", "setpriv", "chroot"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox"})
_PYTHON_TYPES: dict[ParamType, type] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "path": str,
}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: ParamType
    description: str = ""
    required: bool = True
    default: str | int | float | bool | None = None
    choices: tuple[str, ...] = ()  # for str: the only values allowed


@dataclass(frozen=True)
class SkillToolSpec:
    skill: str  # the skill that declares it
    name: str
    description: str
    words: tuple[str, ...]  # the command template, split into argv words
    params: tuple[ParamSpec, ...]
    writes: bool  # it changes something: refused under read_only
    command: str = ""  # the template as written
    script: Path | None = None  # the skill's own script it runs (resolved), if any
    script_index: int = -1  # which word names that script


def parse_tool(raw: object, folder: Path, skill: str) -> SkillToolSpec:
    """One `tools:` entry of a SKILL.md, checked; ValueError says what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError("each tool is a mapping with name, description and command")
    unknown = sorted(set(map(str, raw)) - _TOOL_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOOL_KEYS))})")
    name = _text(raw, "name")
    if not TOOL_NAME.match(name):
        raise ValueError(f"name {name!r}: use lowercase letters, digits and _ (check_release)")
    description = _text(raw, "description")
    params = _params(raw.get("parameters") or {})
    writes = raw.get("writes", False)
    if not isinstance(writes, bool):
        raise ValueError("writes is true or false")
    command = _text(raw, "command")
    try:
        words = tuple(shlex.split(command))
    except ValueError as exc:
        raise ValueError(f"command: {exc}") from None
    used = _placeholders(words, {p.name for p in params})
    unused = [p.name for p in params if p.name not in used]
    if unused:
        raise ValueError(f"parameter {unused[0]!r} is not used in the command")
    script_index = _script_index(words)
    script = _script(words[script_index], folder) if script_index >= 0 else None
    return SkillToolSpec(
        skill, name, description, words, params, writes, command, script, script_index
    )


def _text(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} is required and must be text")
    return value.strip()


def _params(raw: object) -> tuple[ParamSpec, ...]:
    if not isinstance(raw, Mapping):
        raise ValueError("parameters is a mapping of name: type")
    return tuple(_param(str(name), value) for name, value in raw.items())


def _param(name: str, raw: object) -> ParamSpec:
    if not _PARAM_NAME.match(name):
        raise ValueError(f"parameter name {name!r}: use lowercase letters, digits and _")
    options: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {"type": raw}
    unknown = sorted(set(map(str, options)) - _PARAM_KEYS)
    if unknown:
        raise ValueError(f"parameter {name!r}: unknown key {unknown[0]!r}")
    kind = options.get("type", "str")
    if kind not in PARAM_TYPES:
        known = ", ".join(PARAM_TYPES)
        raise ValueError(f"parameter {name!r}: type {kind!r} is not one of {known}")
    description = options.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"parameter {name!r}: description must be text")
    choices = options.get("enum", [])
    if choices and (kind != "str" or not all(isinstance(c, str) for c in choices)):
        raise ValueError(f"parameter {name!r}: enum is a list of texts, for type str only")
    required = "default" not in options
    default = options.get("default")
    if not required and (not _fits(default, kind) or (choices and default not in choices)):
        raise ValueError(f"parameter {name!r}: the default {default!r} is not a {kind}")
    return ParamSpec(
        name, cast(ParamType, kind), description.strip(), required, default, tuple(choices)
    )


def _fits(value: object, kind: ParamType) -> bool:
    if isinstance(value, bool):
        return kind == "bool"
    return isinstance(value, _PYTHON_TYPES[kind]) or (kind == "float" and isinstance(value, int))


def _fields(word: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder or None) pieces of one template word; `{{` is a brace."""
    try:
        parsed = list(Formatter().parse(word))
    except ValueError as exc:
        raise ValueError(f"command word {word!r}: {exc}") from None
    pieces: list[tuple[str, str | None]] = []
    for literal, field, spec, conversion in parsed:
        if field is not None and (spec or conversion or not _PARAM_NAME.match(field)):
            raise ValueError(f"command word {word!r}: write a placeholder as {{name}}")
        pieces.append((literal, field))
    return pieces


def _placeholders(words: Sequence[str], declared: set[str]) -> set[str]:
    if not words:
        raise ValueError("command is empty")
    used: set[str] = set()
    for index, word in enumerate(words):
        for _literal, field in _fields(word):
            if field is None:
                continue
            if field not in declared:
                raise ValueError(f"command uses {{{field}}}, which is not a parameter")
            if index == 0:
                raise ValueError("the program cannot come from a parameter")
            used.add(field)
    return used


def _literal(word: str) -> str | None:
    """The word's text when it holds no placeholder, else None."""
    pieces = _fields(word)
    return None if any(field for _, field in pieces) else "".join(t for t, _ in pieces)


def _script_index(words: Sequence[str]) -> int:
    """Which word names the skill's own script: the program itself when it is a path, or
    the first word after an interpreter and its options (`python3 -u scripts/x.py`). -1:
    the program is a command on PATH."""
    program = _literal(words[0]) or ""
    name = program.rsplit("/", 1)[-1]
    if name in _PRIVILEGED:
        raise ValueError(f"{name} cannot run a skill's command")
    if "/" in program:
        return 0
    if check_program(name, ()).refusal is None:
        return -1  # a plain program: the shell's rules check its arguments
    for index, word in enumerate(words[1:], start=1):
        text = _literal(word)
        if text is None or _inline_code(name, text):
            break
        if not text.startswith("-"):
            return index
    raise ValueError(
        f"{name} runs code: name a script of the skill right after it "
        f"(`{name} scripts/run.py {{arg}}`); inline code and parameters before it are refused"
    )


def _inline_code(program: str, word: str) -> bool:
    """An option that hands the interpreter code to run: sh -c, python -c, perl -e, php -r,
    node -p, --eval."""
    if word.startswith("--"):
        return word.split("=")[0] in ("--eval", "--command", "--print", "--exec")
    letters = "c" if program in _SHELLS or program.startswith(("python", "pypy")) else "ceEpr"
    return word.startswith("-") and any(letter in letters for letter in word[1:])


def _script(word: str, folder: Path) -> Path:
    raw = Path(word)
    base = folder.resolve()
    path = (raw if raw.is_absolute() else base / raw).resolve()
    if base not in path.parents:
        raise ValueError(
            f"{word}: a script must be inside the skill's folder (name a program on PATH "
            "without a path: git, not /usr/bin/git)"
        )
    if not path.is_file():
        raise ValueError(f"{word}: no such file in the skill's folder")
    return path


def render(
    spec: SkillToolSpec, values: Mapping[str, object], resolve: Callable[[str], Path]
) -> list[str]:
    """The argv for these (already validated) values: each template word stays one word.
    `resolve` confines a `path` value (the policy's resolver); a value that would turn its
    word into an option (a leading `-`) is refused unless the template has `--` before it."""
    kinds = {p.name: p.type for p in spec.params}
    argv: list[str] = []
    options_end = False
    for index, word in enumerate(spec.words):
        if index == spec.script_index and spec.script is not None:
            argv.append(str(spec.script))
            continue
        pieces = _fields(word)
        text = "".join(
            literal + ("" if field is None else _value(field, values[field], kinds[field], resolve))
            for literal, field in pieces
        )
        literal_start = pieces[0][0] if pieces else ""
        if text.startswith("-") and not literal_start.startswith("-") and not options_end:
            raise PolicyError(
                f"the value for {word} starts with '-' and would be read as an option"
            )
        options_end = options_end or (word == "--" and index > 0)
        argv.append(text)
    return argv


def _value(name: str, value: object, kind: ParamType, resolve: Callable[[str], Path]) -> str:
    if kind == "bool":
        return "true" if value else "false"
    text = str(value)
    if "\x00" in text:
        raise PolicyError(f"the value for {name} contains a NUL byte")
    return str(resolve(text)) if kind == "path" else text
