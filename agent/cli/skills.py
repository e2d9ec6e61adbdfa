"""`agent skills list | show NAME | new NAME`: which skills there are, which are offered and
why not, and a scaffold for a new one (without `-d`, its description is left empty, and it is
not offered until one is written).

Only click is imported at the top: `agent --help` loads this module.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.prompt.skills import SkillCatalog, SkillStatus
    from tools.skills.spec import SkillToolSpec


def _catalog(ctx: click.Context) -> tuple[Settings, SkillCatalog]:
    from agent.prompt.skills import SkillCatalog

    settings: Settings = ctx.obj["load"](ctx)
    return settings, SkillCatalog.from_settings(settings)


@click.group()
def skills() -> None:
    """List, inspect and create skills (folders with a SKILL.md)."""


@skills.command("list")
@click.pass_context
def list_skills(ctx: click.Context) -> None:
    """Every skill, where it comes from, and whether it is offered (and why not)."""
    settings, catalog = _catalog(ctx)
    found = catalog.statuses()
    if not found:
        click.echo(f"no skills (add one with `agent skills new NAME` in {catalog.roots[0][1]})")
        return
    width = max(len("NAME"), *(len(s.name) for s in found))
    click.echo(f"{'NAME':<{width}}  {'ORIGIN':<9}  STATUS")
    for status in found:
        click.echo(f"{status.name:<{width}}  {status.origin:<9}  {_state(status)}")
    if not settings.skills.enabled:
        click.echo("skills.enabled is false: none is offered to the model")


def _state(status: SkillStatus) -> str:
    if not status.active:
        return f"not offered: {status.problem}"
    tools = status.skill.tools if status.skill is not None else ()
    always = ", always inlined" if status.skill is not None and status.skill.info.always else ""
    named = f", tools: {', '.join(t.name for t in tools)}" if tools else ""
    return f"active{always}{named}"


@skills.command("show")
@click.argument("name")
@click.pass_context
def show_skill(ctx: click.Context, name: str) -> None:
    """The skill NAME as pinclaw reads it: status, requirements, tools and instructions."""
    _, catalog = _catalog(ctx)
    found = [s for s in catalog.statuses() if s.name == name]
    if not found:
        known = ", ".join(sorted({s.name for s in catalog.statuses()})) or "none"
        click.echo(f"no skill named {name!r}; known: {known}", err=True)
        sys.exit(1)
    status = found[0]
    replaces = " (replaces the bundled one)" if len(found) > 1 else ""
    lines = [
        f"name:         {status.name}",
        f"origin:       {status.origin}{replaces}",
        f"file:         {status.path}",
        f"status:       {_state(status)}",
    ]
    skill = status.skill
    if skill is not None:
        needs = skill.requires
        wanted = (["hardware"] if needs.hardware else []) + [*needs.bins, *needs.env]
        described = skill.info.description or "(none: not offered until it has one)"
        lines += [
            f"description:  {described}",
            f"requires:     {', '.join(wanted) or 'nothing'}",
            f"always:       {'yes' if skill.info.always else 'no'}",
        ]
        lines += [f"tool:         {_signature(t)}" for t in skill.tools]
        if skill.ignored:
            lines.append(f"ignored keys: {', '.join(skill.ignored)} (pinclaw does not read them)")
        lines += ["", skill.info.instructions]
    click.echo("\n".join(lines))


def _signature(spec: SkillToolSpec) -> str:
    params = ", ".join(
        f"{p.name}: {p.type}" + ("" if p.required else f" = {p.default!r}") for p in spec.params
    )
    writes = " (writes)" if spec.writes else ""
    return f"{spec.name}({params}) runs `{spec.command}`{writes}"


_TEMPLATE = """---
name: {name}
description: {description}{description_note}
# Optional, see docs/memory-and-skills.md (Skills):
# requires: {{hardware: false, bins: [git], env: [SOME_TOKEN]}}
# always: false
# tools:
#   - name: {tool}_check
#     description: What the tool does and when to use it.
#     command: ./scripts/check.sh {{target}}
#     parameters:
#       target: {{type: str, description: What to check}}
---
# {title}

Write the steps the agent should follow, in order, in plain words.
"""
_NO_DESCRIPTION_NOTE = "  # what it does and when to use it; not offered to the model without one"


@skills.command("new")
@click.argument("name")
@click.option(
    "-d",
    "--description",
    default="",
    help="What it does and when to use it (without it: not offered until written in).",
)
@click.pass_context
def new_skill(ctx: click.Context, name: str, description: str) -> None:
    """Create skills/NAME/SKILL.md in the workspace, to fill in."""
    from agent.prompt.skill_format import MAX_NAME, NAME, SKILL_FILE
    from agent.workspace import BUNDLED_SKILLS_DIR, SKILLS

    settings: Settings = ctx.obj["load"](ctx)
    if len(name) > MAX_NAME or not NAME.match(name):
        click.echo(
            f"{name!r} cannot name a skill: lowercase letters, digits and single hyphens "
            "(greenhouse-wiring)",
            err=True,
        )
        sys.exit(2)
    folder = settings.workspace_dir / SKILLS / name
    if folder.exists():
        click.echo(f"{folder} already exists; edit its {SKILL_FILE}", err=True)
        sys.exit(1)
    folder.mkdir(parents=True)
    description = description.strip()
    text = _TEMPLATE.format(
        name=name,
        description=json.dumps(description, ensure_ascii=False),
        description_note="" if description else _NO_DESCRIPTION_NOTE,
        tool=name.replace("-", "_"),
        title=name.replace("-", " ").capitalize(),
    )
    (folder / SKILL_FILE).write_text(text, encoding="utf-8")
    click.echo(f"created  {folder / SKILL_FILE}")
    if (BUNDLED_SKILLS_DIR / name / SKILL_FILE).is_file():
        click.echo(f"it replaces the bundled skill {name}")
    if not description:
        click.echo("it has no description yet: not offered to the model until it has one")
    click.echo(f"check it with: agent skills show {name}")
