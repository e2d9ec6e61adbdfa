"""Skills at run time: `read_skill`, and each declared skill tool as a real tool.

A skill tool runs like the shell does — inside the OS sandbox, with the shell's limits and
small environment — but from fixed words: the template's, with each parameter filled into
its one word (tools/skills/spec.py). What the policy asks of it:

- `full`: it runs (the sandbox is the boundary, as for the shell).
- `supervised`: a command on PATH is checked as the shell checks it (allow-list, the
  program's options, every path through the one resolver), and asks the owner when the
  shell would. The skill's own script is not on the allow-list, so it asks; "Always allow"
  remembers that tool with that version of the script (`skill:NAME@DIGEST`), so a script
  changed since (by anyone, the model too) asks again.
- `read_only`: a tool declared `writes: true` is refused (tools.base.read_only); a command
  on PATH must be allowed and not write; the skill's script runs only inside an OS
  sandbox, which holds the workspace read-only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from shlex import quote
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from tools.base import (
    ApprovalRequest,
    FunctionTool,
    ToolCallContext,
    ToolResult,
    _brief,
    _clean_schema,
)
from tools.boundaries import make_placeholders
from tools.paths import PathRules, PolicyError
from tools.policy import SecurityPolicy
from tools.shell.plan import check_argv
from tools.shell.shell_tool import ShellTool
from tools.skills.spec import ParamSpec, SkillToolSpec, render

MAX_READ_CHARS = 50_000
_MAX_LISTED_FILES = 40


@dataclass(frozen=True)
class SkillDoc:
    """What read_skill serves of one active skill."""

    name: str
    folder: Path
    instructions: str  # SKILL.md without its front matter


class ReadSkillTool(FunctionTool):
    """read_skill(name, file): the instructions of an active skill, or a file of its folder.
    `skills` is asked on each call, so a skill added since start-up can be read at once."""

    def __init__(
        self, skills: Callable[[], Sequence[SkillDoc]], forbidden: Sequence[Path] = ()
    ) -> None:
        self._skills = skills
        self._forbidden = tuple(forbidden)
        super().__init__(self.read_skill, name="read_skill")

    async def read_skill(self, call: ToolCallContext, name: str, file: str = "") -> ToolResult:
        """Load a skill listed under Skills: its instructions, to follow before doing its
        job.

        Args:
            file: A file its instructions name; empty: the instructions.
        """
        skills = {skill.name: skill for skill in self._skills()}
        skill = skills.get(name.strip())
        if skill is None:
            known = ", ".join(sorted(skills)) or "none"
            return ToolResult.error(f"No skill named {name!r}. Known skills: {known}.")
        if not file.strip():
            return ToolResult.success(_with_files(skill))
        try:
            fd, _ = PathRules.build(skill.folder, self._forbidden).open_checked(file, os.O_RDONLY)
            with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
                text = handle.read(MAX_READ_CHARS + 1)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}".replace(str(skill.folder), "the skill"))
        except OSError as exc:
            return ToolResult.error(f"Cannot read {file} of {name}: {exc.strerror}")
        if len(text) > MAX_READ_CHARS:
            text = text[:MAX_READ_CHARS] + f"\n[... cut at {MAX_READ_CHARS} characters]"
        return ToolResult.success(text)


def _with_files(skill: SkillDoc) -> str:
    files = sorted(
        str(path.relative_to(skill.folder))
        for path in skill.folder.rglob("*")
        if path.is_file() and path.name != "SKILL.md" and not path.name.startswith(".")
    )
    instructions = skill.instructions or "(No instructions beyond its description.)"
    if not files:
        return instructions
    shown = ", ".join(files[:_MAX_LISTED_FILES])
    more = f" and {len(files) - _MAX_LISTED_FILES} more" if len(files) > _MAX_LISTED_FILES else ""
    return (
        f"{instructions}\n\n[Files of this skill: {shown}{more}. "
        f'Read one with read_skill(name="{skill.name}", file="...").]'
    )


class SkillTool:
    """One tool a skill declares: arguments checked against its schema, its argv rendered
    from the template, the policy applied, then run by the shell's sandboxed runner."""

    def __init__(self, spec: SkillToolSpec, runner: ShellTool, policy: SecurityPolicy) -> None:
        self.spec = spec
        self.name = spec.name
        self.description = f"{spec.description} (skill {spec.skill})"
        self.writes = spec.writes
        self._runner = runner
        self._policy = policy
        self._model = _args_model(spec)
        self.parameters = _clean_schema(self._model.model_json_schema())

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        try:
            values = dict(self._model.model_validate(args))
        except ValidationError as exc:
            return ToolResult.error(f"Invalid arguments for {self.name}: {_brief(exc)}")
        refusal = self._runner.unconfined_refusal()
        if refusal:
            return ToolResult.error(refusal)
        if not call.owner_private and self._policy.can_write:  # read_only: nothing is made
            make_placeholders(self._policy.paths, self._policy.owner_private)
        policy = self._policy.for_call(call)
        try:
            argv = render(self.spec, values, policy.resolve_path)
            request, argv = self._approval(argv, policy)
        except PolicyError as exc:
            return ToolResult.error(f"Refused: {exc}")
        except OSError as exc:  # the script vanished or cannot be read since start-up
            return ToolResult.error(f"The skill's script cannot be read: {exc.strerror}")
        if request is not None and not await call.ask(request):
            return ToolResult.error(
                f"Not run: the owner did not approve it ({request.reason}). Say what you "
                "wanted to do, or do it another way."
            )
        # Under full nothing asks, so in someone else's turn the files that shape every
        # prompt are read-only in the sandbox, as for the shell.
        someone_elses = not call.owner_private and policy.autonomy == "full"
        frozen = policy.identity_paths if someone_elses else ()
        return await self._runner.execute(argv, policy, frozen=frozen)

    def _approval(
        self, argv: list[str], policy: SecurityPolicy
    ) -> tuple[ApprovalRequest | None, list[str]]:
        """What the owner must approve first (None: nothing), and the words to run (a
        program's, as the shell's check made them: git gets `-c core.symlinks=false`);
        PolicyError: never runs."""
        if self.spec.script is None:
            plan = check_argv(argv, policy)
            words = list(plan.argv or argv)
            if not plan.ask:
                return None, words
            reason = "; ".join(plan.ask)
            request = ApprovalRequest(
                self.name, plan.script, reason, plan.rules, always_covers=plan.covers
            )
            return request, words
        return self._script_approval(argv, policy), argv

    def _script_approval(self, argv: list[str], policy: SecurityPolicy) -> ApprovalRequest | None:
        """A skill's own script asks under supervised ("Always allow" keyed to its digest)."""
        if policy.autonomy == "full":
            return None
        script = policy.resolve_path(str(self.spec.script))  # inside, not forbidden
        if policy.autonomy == "read_only":
            if self._runner.sandbox_kind == "none":
                raise PolicyError(
                    "autonomy is read_only and no OS sandbox would keep the skill's script "
                    "from writing"
                )
            return None
        shown = " ".join(_shown(word, policy.workspace) for word in argv)
        where = script.relative_to(policy.workspace)
        return ApprovalRequest(
            self.name,
            shown,
            f"it runs the skill's script {where}, which is not an allowed command",
            (f"skill:{self.name}@{_digest(self.spec, script)}",),
        )


def _shown(word: str, workspace: Path) -> str:
    """A word as the owner reads it: quoted when needed, workspace paths made relative."""
    if word.startswith(f"{workspace}/"):
        word = word[len(str(workspace)) + 1 :]
    return quote(word)


def _digest(spec: SkillToolSpec, script: Path) -> str:
    """The tool's template and its script's bytes: "Always allow" holds for this version."""
    digest = hashlib.sha256("\0".join([spec.name, *spec.words]).encode())
    with script.open("rb") as handle:
        digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


def _args_model(spec: SkillToolSpec) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for param in spec.params:
        default = ... if param.required else param.default
        fields[param.name] = (_annotation(param), Field(default, description=_described(param)))
    model: type[BaseModel] = create_model(
        f"{spec.name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def _annotation(param: ParamSpec) -> Any:
    if param.choices:
        return Literal[param.choices]
    return {"str": str, "int": int, "float": float, "bool": bool, "path": str}[param.type]


def _described(param: ParamSpec) -> str | None:
    if param.type == "path":
        return (param.description + " " if param.description else "") + "(a workspace path)"
    return param.description or None
