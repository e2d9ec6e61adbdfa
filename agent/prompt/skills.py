"""Skills: folders `skills/NAME/SKILL.md` in the workspace, and their prompt section.

Bundled skills are copied into the workspace by `agent init`, so every skill the prompt
names can be read with file_read, which only reaches inside the workspace.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from agent.prompt.context import SkillInfo, SkillsMode
from agent.workspace import strip_front_matter

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"


def load_skills(skills_dir: Path) -> tuple[SkillInfo, ...]:
    """Every readable skill under `skills_dir`, sorted by name."""
    if not skills_dir.is_dir():
        return ()
    found = []
    for folder in sorted(p for p in skills_dir.iterdir() if p.is_dir()):
        path = folder / SKILL_FILE
        if not path.is_file():
            continue
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            log.warning("skill %s not loaded: %s", path, exc.strerror)
            continue
        meta = _front_matter(raw)
        body = strip_front_matter(raw).strip()
        found.append(
            SkillInfo(
                name=meta.get("name") or folder.name,
                description=meta.get("description") or _first_line(body),
                location=path,
                instructions=body,
            )
        )
    return tuple(sorted(found, key=lambda s: s.name))


def _front_matter(text: str) -> dict[str, str]:
    """`key: value` lines of a leading `---` block; enough for name and description."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    meta: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            break
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip().strip("\"'")
    return meta


def _first_line(body: str) -> str:
    """A description for a skill without front matter: its first line of prose."""
    for line in body.splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            return text[:200]
    return ""


_INTRO = {
    "full": "Skills are instructions for particular jobs. Follow the one that fits the request.",
    "compact": "Skills are instructions for particular jobs. When one fits the request, read "
    "its SKILL.md with file_read first (location below), then follow it.",
    "names": "Skills are instructions for particular jobs. When one fits, read "
    "skills/<name>/SKILL.md with file_read, then follow it.",
}
_NOTICE = {
    "compact": "(Shown compactly to fit skills.max_prompt_chars.)",
    "names": "(Names only, to keep the prompt within its limits.)",
}


def render_skills(
    skills: Sequence[SkillInfo], mode: SkillsMode, max_chars: int, workspace: Path | None = None
) -> str:
    """The Skills section in `mode`, stepping down full -> compact -> names to fit."""
    skills = sorted(skills, key=lambda s: s.name)  # same skills, same bytes
    order: list[SkillsMode] = ["full", "compact", "names"]
    for step in order[order.index(mode) :]:
        text = _render(skills, step, workspace, notice=step != mode)
        if len(text) <= max_chars or step == "names":
            return text if len(text) <= max_chars else _names_capped(skills, max_chars)
    raise AssertionError("unreachable")


def _location(skill: SkillInfo, workspace: Path | None) -> str:
    if workspace is not None and workspace in skill.location.parents:
        return str(skill.location.relative_to(workspace))
    return str(skill.location)


def _short(skill: SkillInfo) -> str:
    """The name, and the folder when it differs (the path to read is the folder's)."""
    folder = skill.location.parent.name
    return skill.name if folder == skill.name else f"{skill.name} (skills/{folder})"


def _render(
    skills: Sequence[SkillInfo], mode: SkillsMode, workspace: Path | None, notice: bool
) -> str:
    lines = ["## Skills", "", _INTRO[mode]]
    if notice or mode == "names":  # names only is never configured: always a cut
        lines.append(_NOTICE[mode])
    if mode == "names":
        lines += ["", "Available skills: " + ", ".join(_short(s) for s in skills)]
        return "\n".join(lines)
    lines += ["", "<available_skills>"]
    for skill in skills:
        lines += [
            "<skill>",
            f"<name>{escape(skill.name)}</name>",
            f"<description>{escape(skill.description)}</description>",
        ]
        if mode == "full":
            lines.append(f"<instructions>\n{skill.instructions}\n</instructions>")
        else:
            lines.append(f"<location>{escape(_location(skill, workspace))}</location>")
        lines.append("</skill>")
    lines.append("</available_skills>")
    return "\n".join(lines)


def _names_capped(skills: Sequence[SkillInfo], max_chars: int) -> str:
    head = "\n".join(["## Skills", "", _INTRO["names"], _NOTICE["names"], "", "Available skills: "])
    shown: list[str] = []
    for index, skill in enumerate(skills):
        tail = f" … and {len(skills) - index} more in skills/"
        if len(head) + len(", ".join([*shown, _short(skill)])) + len(tail) > max_chars:
            return head + ", ".join(shown) + tail
        shown.append(_short(skill))
    return head + ", ".join(shown)
