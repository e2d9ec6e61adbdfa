"""`agent skills list | show | new` as the owner runs them: a subprocess on a temporary home."""

from __future__ import annotations

from pathlib import Path

from daemon_process import agent


def test_list_shows_origin_status_and_why_not(home: Path) -> None:
    assert agent("init").returncode == 0
    skills = home / "workspace" / "skills"
    (skills / "daily-notes").mkdir()
    (skills / "daily-notes" / "SKILL.md").write_text(
        "---\nname: daily-notes\ndescription: Our journal.\n---\nWrite to journal/.\n"
    )
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n")
    (skills / "needs-tool").mkdir()
    (skills / "needs-tool" / "SKILL.md").write_text(
        "---\nname: needs-tool\ndescription: d\nrequires: {bins: [no-such-program-x1]}\n---\n"
    )
    result = agent("skills", "list")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "NAME         ORIGIN     STATUS",
        "arduino      bundled    not offered: requires the hardware, and [hardware] enabled is "
        "false",
        "broken       workspace  not offered: no description",
        "daily-notes  workspace  active",
        "daily-notes  bundled    not offered: replaced by the workspace skill of the same name",
        "needs-tool   workspace  not offered: requires `no-such-program-x1` on PATH",
    ]


def test_new_scaffolds_a_skill_that_list_and_show_then_read(home: Path) -> None:
    assert agent("init").returncode == 0
    made = agent("skills", "new", "greenhouse", "-d", "How the greenhouse is wired: pins.")
    assert made.returncode == 0, made.stderr
    path = home / "workspace" / "skills" / "greenhouse" / "SKILL.md"
    assert made.stdout.splitlines()[0] == f"created  {path}"
    assert path.read_text().startswith(
        '---\nname: greenhouse\ndescription: "How the greenhouse is wired: pins."\n'
    )
    listed = agent("skills", "list").stdout
    assert "greenhouse   workspace  active" in listed
    shown = agent("skills", "show", "greenhouse")
    assert shown.returncode == 0
    assert "description:  How the greenhouse is wired: pins." in shown.stdout
    assert "# Greenhouse\n\nWrite the steps" in shown.stdout
    again = agent("skills", "new", "greenhouse")
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = agent("skills", "new", "Green House")
    assert bad.returncode == 2 and "cannot name a skill" in bad.stderr


def test_new_without_a_description_is_not_offered_until_it_has_one(home: Path) -> None:
    assert agent("init").returncode == 0
    made = agent("skills", "new", "greenhouse")
    assert made.returncode == 0, made.stderr
    assert "not offered to the model until it has one" in made.stdout
    path = home / "workspace" / "skills" / "greenhouse" / "SKILL.md"
    assert path.read_text().startswith('---\nname: greenhouse\ndescription: ""  # what it does')
    assert "greenhouse   workspace  not offered: no description" in agent("skills", "list").stdout
    shown = agent("skills", "show", "greenhouse").stdout
    assert "status:       not offered: no description" in shown
    assert "description:  (none: not offered until it has one)" in shown
    prompt = agent("prompt", "show", "--channel", "cli").stdout
    assert "daily-notes" in prompt and "greenhouse" not in prompt
    text = path.read_text().replace('description: ""', "description: How the greenhouse is wired.")
    path.write_text(text)
    assert "greenhouse   workspace  active" in agent("skills", "list").stdout
    assert "<name>greenhouse</name>" in agent("prompt", "show", "--channel", "cli").stdout


def test_new_over_a_bundled_name_says_it_replaces_it(home: Path) -> None:
    made = agent("skills", "new", "daily-notes")
    assert made.returncode == 0 and "it replaces the bundled skill daily-notes" in made.stdout
    shown = agent("skills", "show", "daily-notes").stdout
    assert "origin:       workspace (replaces the bundled one)" in shown


def test_show_lists_tools_and_unknown_names_fail(home: Path) -> None:
    folder = home / "workspace" / "skills" / "release"
    (folder / "scripts").mkdir(parents=True)
    (folder / "scripts" / "check.sh").write_text("#!/bin/sh\n")
    (folder / "SKILL.md").write_text(
        "---\nname: release\ndescription: Ship a release.\nversion: 2\ntools:\n"
        "  - name: check_release\n    description: Check a tag.\n"
        "    command: ./scripts/check.sh {target}\n    parameters: {target: str}\n---\nSteps.\n"
    )
    shown = agent("skills", "show", "release")
    assert shown.returncode == 0, shown.stderr
    assert "tool:         check_release(target: str) runs `./scripts/check.sh {target}`" in (
        shown.stdout
    )
    assert "ignored keys: version (pinclaw does not read them)" in shown.stdout
    assert "active, tools: check_release" in shown.stdout
    unknown = agent("skills", "show", "relase")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "no skill named 'relase'; known: arduino, daily-notes, release"
