"""What the owner is asked before a shell command runs, and what "Always allow" would cover.

A rule is the string "Always allow" remembers (agent/runtime/approvals.py); each says exactly
one thing, and `describe` says it in words before the button is pressed:

- `shell:PROGRAM`: running PROGRAM, which is not in the allowed commands (for rm, rmdir,
  unlink and shred, whose running is deleting, also their deleting files);
- `shell:overwrite:BY` (BY a program, `>`, or a git command such as `git checkout`): BY
  replacing, moving or deleting existing files outside tmp/ and scratch/;
- `shell:find -delete`: find deleting the files it matches;
- `shell:network:WHAT` (WHAT: `curl`, `git ls-remote`): WHAT running with network access
  (tools/shell/network.py);
- `each-time:NAME`: a change to an identity file, which shapes every chat's prompt: never
  remembered, so it is asked each time, whatever else was allowed.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable
from pathlib import Path

from tools.base import ASK_EACH_TIME
from tools.boundaries import IDENTITY_FILES, SCRATCH_DIRS
from tools.shell.effects.file_effects import DELETERS, Effect, abs_path
from tools.shell.network import network_reason

_IDENTITY = ", ".join(name + "/" * (name == "skills") for name in IDENTITY_FILES)
_SHOWN_NAMES = 5
_INODE_LIMIT = 2_000  # folders of skills/ looked at for hard links to an identity file
_NAME_ONLY = ("creates", "deletes", "moves")  # verbs that change a name, not the file's bytes
_TEMPLATES = {  # (verb, a whole folder) -> the reason, {by} and {names} filled in
    ("replaces", False): "{by} overwrites the existing file{s} {names}",
    ("deletes", False): "{by} deletes {names}",
    ("moves", False): "{by} moves {names} away (the old name is deleted)",
    ("may change", False): "{by} may overwrite or delete {names}",
    ("may change", True): "{by} may overwrite or delete files in {names}",
    ("identity", False): "{by} changes {names}, read into every chat's prompt (asked each time)",
}
_DOING = {  # what a rule's program does to existing files, where more precise than the default
    "mv": "moving away or replacing",
    "git mv": "moving away or replacing",
    ">": "replacing",
    "cp": "replacing",
    "install": "replacing",
    "tee": "replacing",
    "dd": "replacing",
    "sed": "rewriting",
    "truncate": "cutting or extending",
    "git apply": "patching or deleting",
}


class Asks:
    """The reasons to ask, grouped by rule, with the files each one names."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._found: dict[tuple[str, str], list[str]] = {}  # (rule, template) -> names
        self._identity_inodes: dict[tuple[int, int], str] | None = None
        self.reaching: list[str] = []  # what would run with network access, if approved

    def program(self, program: str) -> None:
        why = f"{_literal(program)} is not in the allowed commands"
        self._found = {(f"shell:{program}", why): [], **self._found}  # said first

    def network(self, what: str) -> None:
        """Ask before `what` ("curl", "git ls-remote") runs with network access."""
        if what not in self.reaching:
            self.reaching.append(what)
        self._add(f"shell:network:{what}", _literal(network_reason(what)), what, "")

    def effect(self, effect: Effect, path: Path, is_identity: Callable[[Path], bool]) -> None:
        """Ask about `effect` (its real path: `path`) when it changes an identity file, or
        replaces, deletes or moves an existing file outside tmp/ and scratch/."""
        lexical = Path(os.path.normpath(abs_path(self.workspace, effect.raw)))
        exists = os.path.lexists(lexical)
        shown = self._shown(lexical)
        everything = effect.tree and path == self.workspace
        identity = everything or is_identity(path) or is_identity(lexical)
        linked = "" if identity or effect.verb in _NAME_ONLY else self._hard_linked(lexical)
        if (identity or linked) and not (effect.verb == "creates" and exists):
            what = f"the identity files ({_IDENTITY})" if everything else shown
            what += f" (a hard link to {linked})" if linked else ""
            self._add(ASK_EACH_TIME + shown, _TEMPLATES["identity", False], effect.by, what)
        scratch = self._scratch(path) and self._scratch(lexical)
        if effect.verb in ("creates", "writes") or not exists or scratch:
            return
        rule = f"shell:{effect.by}"
        if effect.by not in DELETERS and effect.by != "find -delete":
            rule = f"shell:overwrite:{effect.by}"
        elif any(r == rule for r, _ in self._found):
            return  # "rm is not in the allowed commands" already asks, under the same rule
        folder = os.path.isdir(lexical)
        template = _TEMPLATES.get(
            (effect.verb, effect.tree and folder), _TEMPLATES[effect.verb, False]
        )
        self._add(rule, template, effect.by, shown + "/" * folder)

    def _add(self, rule: str, template: str, by: str, name: str) -> None:
        names = self._found.setdefault((rule, template.replace("{by}", _literal(by))), [])
        if name not in names:
            names.append(name)

    def reasons(self) -> tuple[str, ...]:
        found = []
        for (_rule, template), names in self._found.items():
            listed = ", ".join(names[:_SHOWN_NAMES])
            if len(names) > _SHOWN_NAMES:
                listed += f" and {len(names) - _SHOWN_NAMES} more"
            found.append(template.format(names=listed, s="s" * (len(names) > 1)))
        return tuple(dict.fromkeys(found))

    def rules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(rule for rule, _ in self._found))

    def covers(self) -> str:
        """What pressing "Always allow" would let through from now on, in words."""
        rules = self.rules()
        if not rules:
            return ""
        kept = [describe(rule) for rule in rules if not rule.startswith(ASK_EACH_TIME)]
        never = f"never a change to an identity file ({_IDENTITY}): those are asked each time"
        return f"Always allow covers, in this workspace: {'; '.join(kept) or 'nothing'}; {never}"

    def _hard_linked(self, path: Path) -> str:
        """The identity file `path` is another name of (a hard link the owner made, or one
        made under full): writing through it changes that file. "" when none."""
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            return ""
        if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
            return ""
        if self._identity_inodes is None:
            self._identity_inodes = _inodes(self.workspace)
        return self._identity_inodes.get((info.st_dev, info.st_ino), "")

    def _shown(self, path: Path) -> str:
        if path == self.workspace:
            return "."
        inside = self.workspace in path.parents
        return str(path.relative_to(self.workspace)) if inside else str(path)

    def _scratch(self, path: Path) -> bool:
        """In tmp/ or scratch/, or one of those folders itself."""
        return any(self.workspace / f in (path, *path.parents) for f in SCRATCH_DIRS)


def _literal(text: str) -> str:
    """`text` inside a template that str.format fills in later: its braces kept as they are."""
    return text.replace("{", "{{").replace("}", "}}")


def _inodes(workspace: Path) -> dict[tuple[int, int], str]:
    """The identity files' inodes (skills/ up to _INODE_LIMIT entries), by their names."""
    found: dict[tuple[int, int], str] = {}
    paths = [workspace / name for name in IDENTITY_FILES]
    for folder, _dirs, files in itertools.islice(os.walk(workspace / "skills"), _INODE_LIMIT):
        paths += [Path(folder, name) for name in files]
    for path in paths:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found[info.st_dev, info.st_ino] = str(path.relative_to(workspace))
    return found


def describe(rule: str) -> str:
    """A remembered rule in words: exactly what it lets through."""
    body = rule.removeprefix("shell:")
    outside = "existing files outside tmp/ and scratch/"
    if body.startswith("network:"):
        return f"{body.removeprefix('network:')} running with network access"
    if body.startswith("overwrite:"):
        by = body.removeprefix("overwrite:")
        return f"{by} {_DOING.get(by, 'replacing or deleting')} {outside}"
    if body == "find -delete":
        return f"find -delete deleting the files it matches, {outside} too"
    if body in DELETERS:
        return f"running {body}, also deleting {outside}"
    return f"running {body}, which is not in the allowed commands"
