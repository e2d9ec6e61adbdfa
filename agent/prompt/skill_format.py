"""The SKILL.md format: YAML front matter, then Markdown instructions.

Compatible with the Agent Skills layout other agent runtimes read: a folder named like the
skill, holding SKILL.md (`name`, `description`, and the optional `license`,
`compatibility`, `metadata`, `allowed-tools`) and, when it needs them, `scripts/` and
`references/`. pinclaw reads three keys more:

    requires:            # the skill is offered only when all of these hold
      hardware: true     #   [hardware] is enabled
      bins: [git]        #   these programs are on PATH
      env: [GITHUB_TOKEN]  # these environment variables are set (not passed to commands)
    always: true         # inline the instructions in compact mode too
    tools: [...]         # command templates with typed parameters (tools/skills/spec.py)

A file that breaks these rules raises SkillError, whose message is the one line the log
and `agent skills list` show. A missing or empty `description` is not an error here: the
skill parses (`agent skills show` reads it) with an empty one, and the catalog does not
offer it until it has one (skills.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.prompt.context import SkillInfo, SkillOrigin
from tools.paths import PathRules, PolicyError
from tools.skills.spec import SkillToolSpec, parse_tool

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILE_BYTES = 256 * 1024
# The Agent Skills keys pinclaw accepts and does not use, and the ones it reads.
SPEC_KEYS = frozenset({"license", "compatibility", "metadata", "allowed-tools"})
OWN_KEYS = frozenset({"name", "description", "requires", "always", "tools"})
_REQUIRES_KEYS = frozenset({"hardware", "bins", "env"})


class SkillError(ValueError):
    """A SKILL.md that cannot be used; the message says why, in one line."""


@dataclass(frozen=True)
class Requirements:
    hardware: bool = False
    bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillFile:
    """One parsed SKILL.md."""

    info: SkillInfo
    requires: Requirements
    tools: tuple[SkillToolSpec, ...]
    ignored: tuple[str, ...]  # front-matter keys nobody reads (a typo shows here)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def folder(self) -> Path:
        return self.info.location.parent


def parse_skill(path: Path, origin: SkillOrigin, files: PathRules | None = None) -> SkillFile:
    """The skill in `path` (a SKILL.md), or SkillError saying what is wrong with it.
    A workspace skill is read through `files` (the workspace's resolver: no link followed);
    a bundled one ships with pinclaw and is read where it is."""
    try:
        if files is not None:
            inside = (
                f"{path.parent.parent.name}/{path.parent.name}/{path.name}"  # skills/x/SKILL.md
            )
            data = files.read_bytes(inside, MAX_FILE_BYTES + 1)
        else:
            data = path.read_bytes()[: MAX_FILE_BYTES + 1]
        if len(data) > MAX_FILE_BYTES:
            raise SkillError(f"larger than {MAX_FILE_BYTES // 1024} KiB")
        raw = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError("not UTF-8 text") from None
    except PolicyError as exc:
        raise SkillError(f"refused: {exc.short}") from None
    except OSError as exc:
        raise SkillError(f"cannot read it: {exc.strerror}") from None
    meta, body = split_front_matter(raw)
    name = _name(meta, path.parent.name)
    description = meta.get("description", "")
    if description is None:  # `description:` with nothing after it
        description = ""  # none yet: parsed, but not offered (skills.py)
    if not isinstance(description, str):
        raise SkillError("front matter: description is text (what it does, when to use it)")
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(f"front matter: description is over {MAX_DESCRIPTION} characters")
    always = meta.get("always", False)
    if not isinstance(always, bool):
        raise SkillError("front matter: always is true or false")
    info = SkillInfo(
        name, " ".join(description.split()), path, body.strip(), origin=origin, always=always
    )
    ignored = tuple(sorted(str(k) for k in meta if k not in OWN_KEYS | SPEC_KEYS))
    return SkillFile(info, _requires(meta.get("requires")), _tools(meta, path.parent), ignored)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter as a mapping, and the Markdown after it; SkillError if there is
    none or it is not a YAML mapping."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError("no front matter: the file must start with a --- line")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")), 0)
    if not end:
        raise SkillError("front matter: no closing --- line")
    block = "".join(lines[1:end])
    try:
        meta = yaml.load(block, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None or mark.index >= len(block.rstrip()):  # found only at the end
            mark = getattr(exc, "context_mark", None) or mark
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SkillError(f"front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(meta, dict):
        raise SkillError("front matter must be a mapping (key: value lines)")
    return meta, "".join(lines[end + 1 :])


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _name(meta: Mapping[str, Any], folder: str) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SkillError("front matter: name is required")
    if len(name) > MAX_NAME or not NAME.match(name):
        raise SkillError(
            f"front matter: name {name!r}: lowercase letters, digits and single hyphens, "
            f"at most {MAX_NAME} characters"
        )
    if name != folder:
        raise SkillError(f"front matter: name {name!r} differs from its folder {folder!r}")
    return name


def _requires(raw: object) -> Requirements:
    if raw is None:
        return Requirements()
    if not isinstance(raw, Mapping):
        raise SkillError("front matter: requires is a mapping (hardware, bins, env)")
    unknown = sorted(set(map(str, raw)) - _REQUIRES_KEYS)
    if unknown:
        raise SkillError(f"front matter: requires: unknown key {unknown[0]!r}")
    hardware = raw.get("hardware", False)
    if not isinstance(hardware, bool):
        raise SkillError("front matter: requires.hardware is true or false")
    return Requirements(hardware, _names(raw, "bins"), _names(raw, "env"))


def _names(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise SkillError(f"front matter: requires.{key} is a list of names")
    return tuple(items)


def _tools(meta: Mapping[str, Any], folder: Path) -> tuple[SkillToolSpec, ...]:
    raw = meta.get("tools") or []
    if not isinstance(raw, list):
        raise SkillError("front matter: tools is a list")
    specs: list[SkillToolSpec] = []
    for index, entry in enumerate(raw):
        label = entry.get("name") if isinstance(entry, Mapping) else None
        try:
            spec = parse_tool(entry, folder, folder.name)
        except ValueError as exc:
            raise SkillError(f"tools[{index}] ({label or 'unnamed'}): {exc}") from None
        if any(s.name == spec.name for s in specs):
            raise SkillError(f"tools[{index}]: a second tool named {spec.name!r}")
        specs.append(spec)
    return tuple(specs)
