"""Skills: where they are loaded from, which are offered, and the prompt's Skills section.

Two places hold skills, each a folder `NAME/SKILL.md` (the format: skill_format.py): the
workspace's `skills/` and the bundled `skills/` shipped with pinclaw. A workspace folder
named like a bundled skill replaces it. A skill is offered when its file parses, it has a
description (the model picks a skill by it: one just made by `agent skills new` without
`-d` waits for it) and its requirements hold; otherwise one log line names the file and
the reason, once per catalog (a warning for a broken file or no description, info for an
unmet requirement), and `agent skills list` shows it.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from agent.prompt.context import SkillInfo, SkillOrigin, SkillsMode
from agent.prompt.skill_format import SKILL_FILE, SkillError, SkillFile, parse_skill
from agent.workspace import BUNDLED_SKILLS_DIR, SKILLS
from tools.config import configured_boards
from tools.paths import PathRules

if TYPE_CHECKING:
    from agent.config import Settings

log = logging.getLogger(__name__)

NO_DESCRIPTION = "no description"


@dataclass(frozen=True)
class SkillStatus:
    """One SKILL.md found, and whether it is offered; `problem` says why not."""

    name: str  # the folder's name
    origin: SkillOrigin
    path: Path
    skill: SkillFile | None
    problem: str = ""
    overridden: bool = False  # a workspace skill of the same name replaces it

    @property
    def active(self) -> bool:
        return not self.problem


class SkillCatalog:
    """The skills of one runtime. Parsed files are kept until their size or mtime
    changes, so asking again (every prompt rebuild, every read_skill) costs a stat each."""

    def __init__(
        self,
        workspace_skills: Path,
        bundled: Path | None = BUNDLED_SKILLS_DIR,
        *,
        hardware: bool = False,
        enabled: bool = True,
        environ: Mapping[str, str] | None = None,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.roots: tuple[tuple[SkillOrigin, Path], ...] = (("workspace", workspace_skills),)
        self._workspace_files = PathRules.build(workspace_skills.parent, ())
        if bundled is not None:
            self.roots += (("bundled", bundled),)
        self.enabled = enabled
        self._hardware = hardware
        self._environ = os.environ if environ is None else environ
        self._which = which
        self._parsed: dict[Path, tuple[tuple[int, int], SkillFile | SkillError]] = {}
        self._reported: set[tuple[Path, str]] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> SkillCatalog:
        """The workspace's and the bundled skills, as `[skills]` and `[hardware]` say."""
        return cls(
            settings.workspace_dir / SKILLS,
            hardware=bool(configured_boards(settings.hardware, settings.boards)),
            enabled=settings.skills.enabled,
        )

    def statuses(self) -> list[SkillStatus]:
        """Every skill folder of both places, by name, the workspace's first."""
        found: list[SkillStatus] = []
        replaced: set[str] = set()
        for origin, root in self.roots:
            for folder in _folders(root):
                status = self._status(folder, origin)
                if status is None:
                    continue
                if status.name in replaced:
                    status = SkillStatus(
                        status.name,
                        origin,
                        status.path,
                        status.skill,
                        "replaced by the workspace skill of the same name",
                        overridden=True,
                    )
                found.append(status)
            replaced |= {s.name for s in found if s.path.is_file()}
        return sorted(found, key=lambda s: (s.name, s.origin != "workspace"))

    def active(self) -> tuple[SkillFile, ...]:
        """The skills to offer (none when skills are off); the others logged once each."""
        if not self.enabled:
            return ()
        offered: list[SkillFile] = []
        for status in self.statuses():
            if status.skill is not None and status.active:
                offered.append(status.skill)
            elif not status.overridden and (status.path, status.problem) not in self._reported:
                self._reported.add((status.path, status.problem))
                # A broken or undescribed file is the owner's to fix; an unmet
                # requirement is expected.
                expected = status.skill is not None and status.problem != NO_DESCRIPTION
                level = logging.INFO if expected else logging.WARNING
                log.log(level, "skill %s skipped: %s", status.path, status.problem)
        return tuple(offered)

    def infos(self) -> tuple[SkillInfo, ...]:
        return tuple(skill.info for skill in self.active())

    def _status(self, folder: Path, origin: SkillOrigin) -> SkillStatus | None:
        path = folder / SKILL_FILE
        if not path.is_file():
            if origin == "bundled":
                return None
            return SkillStatus(folder.name, origin, path, None, f"no {SKILL_FILE} in the folder")
        parsed = self._parse(path, origin)
        if isinstance(parsed, SkillError):
            return SkillStatus(folder.name, origin, path, None, str(parsed))
        problem = NO_DESCRIPTION if not parsed.info.description else self._unmet(parsed)
        return SkillStatus(folder.name, origin, path, parsed, problem)

    def _parse(self, path: Path, origin: SkillOrigin) -> SkillFile | SkillError:
        try:
            info = path.stat()
            key = (info.st_mtime_ns, info.st_size)
        except OSError:
            key = (0, 0)
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            files = self._workspace_files if origin == "workspace" else None
            result: SkillFile | SkillError = parse_skill(path, origin, files)
        except SkillError as exc:
            result = exc
        self._parsed[path] = (key, result)
        return result

    def _unmet(self, skill: SkillFile) -> str:
        """Why the skill's requirements do not hold here, or ""."""
        needs = skill.requires
        if needs.hardware and not self._hardware:
            return "requires the hardware, and [hardware] enabled is false"
        missing = [b for b in needs.bins if self._which(b) is None]
        if missing:
            return "requires " + ", ".join(f"`{b}`" for b in missing) + " on PATH"
        unset = [name for name in needs.env if not self._environ.get(name)]
        if unset:
            return "requires the environment variable " + ", ".join(unset)
        return ""


def _folders(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


_INTRO = {
    "full": "Skills are instructions for particular jobs. Follow the one that fits the request; "
    'read_skill(name, file="...") reads a file its instructions point to.',
    "compact": "Skills are instructions for particular jobs. When one fits the request, load it "
    "with read_skill(name) first, then follow it.",
    "names": "Skills are instructions for particular jobs. When one fits, load it with "
    "read_skill(name), then follow it.",
}
_SHORT_INTRO = "Read a skill with read_skill before its job."
_ALWAYS = "Those shown with their instructions are loaded already."
_NOTICE = {
    "compact": "(Shown compactly to fit skills.max_prompt_chars.)",
    "names": "(Names only, to keep the prompt within its limits.)",
}


def render_skills(
    skills: Sequence[SkillInfo],
    mode: SkillsMode,
    max_chars: int,
    workspace: Path | None = None,
    *,
    short: bool = False,
) -> str:
    """The Skills section in `mode`, stepping down full -> compact -> names to fit. `short`
    (the compact prompt): no locations, as read_skill finds a skill by its name alone."""
    skills = sorted(skills, key=lambda s: s.name)  # same skills, same bytes
    order: list[SkillsMode] = ["full", "compact", "names"]
    for step in order[order.index(mode) :]:
        text = _render(skills, step, workspace, notice=step != mode, short=short)
        if len(text) <= max_chars or step == "names":
            return text if len(text) <= max_chars else _names_capped(skills, max_chars)
    raise AssertionError("unreachable")


def _location(skill: SkillInfo, workspace: Path | None) -> str:
    """Relative to the workspace for the workspace's skills (file_read reaches them),
    else where the bundled file is."""
    if workspace is not None and workspace in skill.location.parents:
        return str(skill.location.relative_to(workspace))
    return str(skill.location)


def _render(
    skills: Sequence[SkillInfo],
    mode: SkillsMode,
    workspace: Path | None,
    notice: bool,
    short: bool = False,
) -> str:
    lines = ["## Skills", "", _SHORT_INTRO if short else _INTRO[mode]]
    if mode == "compact" and any(s.always for s in skills):
        lines[-1] += " " + _ALWAYS
    if notice or mode == "names":  # names only is never configured: always a cut
        lines.append(_NOTICE[mode])
    if mode == "names":
        lines += ["", "Available skills: " + ", ".join(s.name for s in skills)]
        return "\n".join(lines)
    inlined = [s for s in skills if (mode == "full" or s.always) and s.instructions]
    if short and not inlined:  # a line a skill: a third of the tags' tokens
        return "\n".join([*lines, "", *_short_lines(skills)])
    lines += ["", "<available_skills>"]
    for skill in skills:
        lines += [
            "<skill>",
            f"<name>{escape(skill.name)}</name>",
            f"<description>{escape(skill.description)}</description>",
        ]
        if not short:
            lines.append(f"<location>{escape(_location(skill, workspace))}</location>")
        if (mode == "full" or skill.always) and skill.instructions:
            lines.append(f"<instructions>\n{skill.instructions}\n</instructions>")
        lines.append("</skill>")
    lines.append("</available_skills>")
    return "\n".join(lines)


def _short_lines(skills: Sequence[SkillInfo]) -> list[str]:
    """The compact prompt's list when no instructions are inlined: `- name: description`,
    the description on one line (the tags stay where instructions must be told apart)."""
    return [f"- {skill.name}: {' '.join(skill.description.split())}" for skill in skills]


def _names_capped(skills: Sequence[SkillInfo], max_chars: int) -> str:
    head = "\n".join(["## Skills", "", _INTRO["names"], _NOTICE["names"], "", "Available skills: "])
    shown: list[str] = []
    for index, skill in enumerate(skills):
        tail = f" … and {len(skills) - index} more; read_skill names them all"
        if len(head) + len(", ".join([*shown, skill.name])) + len(tail) > max_chars:
            return head + ", ".join(shown) + tail
        shown.append(skill.name)
    return head + ", ".join(shown)
