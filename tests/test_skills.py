"""Skills as the owner writes them: loaded from the workspace and the bundled folder, a
workspace skill replacing a bundled one, broken or unmet ones skipped with one log line,
the compact and full Skills sections (snapshots), and read_skill."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_prompt_kit import BUNDLED_PLACEHOLDER, WORKSPACE_PLACEHOLDER, build, make_ctx, section
from test_prompt_snapshots import check_snapshot

from agent.prompt.skills import SkillCatalog
from agent.workspace import BUNDLED_SKILLS_DIR
from tools.base import ToolCallContext
from tools.skills.skill_tools import ReadSkillTool, SkillDoc


def write_skill(root: Path, folder: str, front: str, body: str = "# Steps\n\nDo it.\n") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return path


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace skills folder and a bundled one, both empty."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "bundled").mkdir()
    return tmp_path / "ws", tmp_path / "bundled"


def catalog(roots: tuple[Path, Path], **options: object) -> SkillCatalog:
    return SkillCatalog(roots[0], roots[1], **options)  # type: ignore[arg-type]


def skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]


# -- loading and override --------------------------------------------------------------------


def test_both_places_load_and_a_workspace_skill_replaces_the_bundled_one(
    roots: tuple[Path, Path],
) -> None:
    ws, bundled = roots
    write_skill(bundled, "deploy", "name: deploy\ndescription: Bundled deploy.\n")
    write_skill(bundled, "weather", "name: weather\ndescription: Read the weather.\n")
    write_skill(ws, "deploy", "name: deploy\ndescription: How we deploy here.\n", "Use rsync.")
    offered = {s.name: s.info for s in catalog(roots).active()}
    assert sorted(offered) == ["deploy", "weather"]
    assert offered["deploy"].description == "How we deploy here."
    assert (offered["deploy"].origin, offered["deploy"].instructions) == ("workspace", "Use rsync.")
    assert offered["weather"].origin == "bundled"
    statuses = [(s.name, s.origin, s.active) for s in catalog(roots).statuses()]
    assert statuses == [
        ("deploy", "workspace", True), ("deploy", "bundled", False), ("weather", "bundled", True),
    ]  # fmt: skip


def test_the_real_bundled_skills_parse_and_stay_short() -> None:
    found = SkillCatalog(Path("/nonexistent"), hardware=True).statuses()
    assert [(s.name, s.problem) for s in found] == [("arduino", ""), ("daily-notes", "")]
    for status in found:
        assert status.skill is not None and len(status.skill.info.instructions) < 2_000
        assert status.skill.ignored == ()
    reference = BUNDLED_SKILLS_DIR / "arduino" / "references" / "uno.md"
    assert "Timer1" in reference.read_text()


def test_arduino_is_offered_only_with_the_hardware_enabled() -> None:
    without = SkillCatalog(Path("/nonexistent"), hardware=False).statuses()
    arduino = next(s for s in without if s.name == "arduino")
    assert not arduino.active and "[hardware] enabled is false" in arduino.problem


# -- what is skipped, and the one log line ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("# No front matter\n", "no front matter"),
        ("---\nname: bad\ndescription: [unclosed\n---\nx\n", "not valid YAML at line 3"),
        ("---\n- a list\n---\nx\n", "must be a mapping"),
        ("---\nname: bad\ndescription: [a, list]\n---\nx\n", "description is text"),
        ("---\nname: other\ndescription: d\n---\nx\n", "differs from its folder 'bad'"),
        ("---\nname: Bad_Name\ndescription: d\n---\nx\n", "lowercase letters"),
        ("---\nname: bad\ndescription: d\nalways: yes please\n---\n", "always is true or false"),
        ("---\nname: bad\ndescription: d\nrequires: {gpu: true}\n---\n", "unknown key 'gpu'"),
        ("---\nname: bad\ndescription: d\n", "no closing ---"),
        (
            "---\nname: bad\ndescription: d\ntools:\n  - name: go\n    description: g\n"
            "    command: ./scripts/missing.sh\n---\n",
            "tools[0] (go): ./scripts/missing.sh: no such file in the skill's folder",
        ),
    ],
)
def test_broken_front_matter_skips_the_skill_with_one_line(
    roots: tuple[Path, Path], caplog: pytest.LogCaptureFixture, text: str, reason: str
) -> None:
    ws, _ = roots
    path = ws / "bad" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(text)
    write_skill(ws, "good", "name: good\ndescription: Fine.\n")
    skills = catalog(roots)
    with caplog.at_level(logging.WARNING, logger="agent.prompt.skills"):
        assert [s.name for s in skills.active()] == ["good"]
        skills.active()  # asked again (each prompt rebuild): not logged again
    [line] = skipped(caplog)
    assert line.startswith(f"skill {path} skipped: ") and reason in line
    assert caplog.records[0].levelno == logging.WARNING


@pytest.mark.parametrize(
    "front",
    [
        "name: todo\n",  # no description key at all
        "name: todo\ndescription:\n",  # the key with nothing after it
        'name: todo\ndescription: ""  # fill in\n',  # what `agent skills new` without -d writes
        "name: todo\ndescription: '   '\n",  # only blanks
    ],
)
def test_a_skill_without_a_description_is_not_offered_until_it_has_one(
    roots: tuple[Path, Path], caplog: pytest.LogCaptureFixture, tmp_path: Path, front: str
) -> None:
    ws, _ = roots
    path = write_skill(ws, "todo", front, "# Todo\n\nSECRET-STEPS of the todo skill.\n")
    write_skill(ws, "good", "name: good\ndescription: Fine.\n")
    skills = catalog(roots)
    with caplog.at_level(logging.INFO, logger="agent.prompt.skills"):
        assert [s.name for s in skills.active()] == ["good"]
        skills.active()
    assert skipped(caplog) == [f"skill {path} skipped: no description"]
    assert caplog.records[0].levelno == logging.WARNING  # the owner's to fix
    todo = next(s for s in skills.statuses() if s.name == "todo")
    assert (todo.active, todo.problem) == (False, "no description")
    assert todo.skill is not None and "SECRET-STEPS" in todo.skill.info.instructions  # parsed
    for mode in ("compact", "full"):
        text = section(build(make_ctx(tmp_path, skills=skills.infos(), skills_mode=mode)), "Skills")
        assert "<name>good</name>" in text
        assert "todo" not in text and "SECRET-STEPS" not in text
    path.write_text("---\nname: todo\ndescription: Keep the to-do list.\n---\nSteps.\n")
    assert [s.name for s in skills.active()] == ["good", "todo"]  # offered once it has one


def test_unmet_requirements_name_what_is_missing(
    roots: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    ws, _ = roots
    write_skill(ws, "board", "name: board\ndescription: d\nrequires:\n  hardware: true\n")
    write_skill(ws, "git-log", "name: git-log\ndescription: d\nrequires: {bins: [git, hg]}\n")
    write_skill(ws, "github", "name: github\ndescription: d\nrequires: {env: GITHUB_TOKEN}\n")
    on_path = {"git"}
    skills = catalog(
        roots, environ={}, which=lambda name: f"/usr/bin/{name}" if name in on_path else None
    )
    with caplog.at_level(logging.INFO, logger="agent.prompt.skills"):
        assert skills.active() == ()
    assert {r.levelno for r in caplog.records} == {logging.INFO}  # expected, not a fault
    assert sorted(line.split(" skipped: ")[1] for line in skipped(caplog)) == [
        "requires `hg` on PATH",
        "requires the environment variable GITHUB_TOKEN",
        "requires the hardware, and [hardware] enabled is false",
    ]
    on_path.add("hg")
    met = catalog(roots, environ={"GITHUB_TOKEN": "x"}, which=lambda n: n, hardware=True)
    assert [s.name for s in met.active()] == ["board", "git-log", "github"]


def test_disabled_skills_offer_nothing(roots: tuple[Path, Path]) -> None:
    write_skill(roots[0], "one", "name: one\ndescription: d\n")
    assert catalog(roots, enabled=False).active() == ()


def test_an_edited_file_is_read_again(roots: tuple[Path, Path]) -> None:
    path = write_skill(roots[0], "one", "name: one\ndescription: First.\n")
    skills = catalog(roots)
    assert skills.infos()[0].description == "First."
    path.write_text("---\nname: one\ndescription: Second, longer.\n---\nx\n")
    assert skills.infos()[0].description == "Second, longer."


# -- the Skills section ---------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with its own skills: one always inlined, one replacing daily-notes."""
    workspace = tmp_path / "workspace"
    skills = workspace / "skills"
    write_skill(
        skills, "greenhouse",
        "name: greenhouse\ndescription: How the greenhouse is wired.\nalways: true\n",
        "# Greenhouse\n\nThe fan is on pin 9; never run it above 0.8.\n",
    )  # fmt: skip
    write_skill(
        skills, "daily-notes", "name: daily-notes\ndescription: Our own journal rules.\n",
        "# Journal\n\nWrite to journal/ instead.\n",
    )  # fmt: skip
    return workspace


def skills_section(workspace: Path, mode: str) -> str:
    skills = SkillCatalog(workspace / "skills", hardware=True).infos()
    text = section(build(make_ctx(workspace, skills=skills, skills_mode=mode)), "Skills")
    text = text.replace(str(BUNDLED_SKILLS_DIR), BUNDLED_PLACEHOLDER)
    return text.replace(str(workspace), WORKSPACE_PLACEHOLDER) + "\n"


def test_compact_section_lists_and_inlines_only_always_skills(workspace: Path) -> None:
    text = skills_section(workspace, "compact")
    check_snapshot("skills_compact.md", text)
    assert "load it with read_skill(name)" in text
    assert "<location>skills/greenhouse/SKILL.md</location>" in text
    assert "never run it above 0.8" in text  # always: inlined
    assert "Write to journal/" not in text and "hardware_board_info" not in text
    assert "Our own journal rules." in text and "Keep a dated journal" not in text


def test_full_section_inlines_every_skill(workspace: Path) -> None:
    text = skills_section(workspace, "full")
    check_snapshot("skills_full.md", text)
    assert text.count("<instructions>") == 3
    assert "Write to journal/" in text and "hardware_board_info" in text


# -- read_skill -----------------------------------------------------------------------------


@pytest.fixture
def read_skill(workspace: Path) -> ReadSkillTool:
    skills = SkillCatalog(workspace / "skills", hardware=True)

    def docs() -> list[SkillDoc]:
        return [SkillDoc(s.name, s.folder, s.info.instructions) for s in skills.active()]

    return ReadSkillTool(docs)


async def test_read_skill_serves_instructions_and_the_folder_files(
    read_skill: ReadSkillTool, workspace: Path
) -> None:
    call = ToolCallContext(workspace)
    ours = await read_skill.run({"name": "daily-notes"}, call)
    assert ours.ok and ours.output == "# Journal\n\nWrite to journal/ instead."
    arduino = await read_skill.run({"name": "arduino"}, call)
    assert arduino.ok and arduino.output.startswith("# Arduino")
    assert "[Files of this skill: references/uno.md." in arduino.output
    reference = await read_skill.run({"name": "arduino", "file": "references/uno.md"}, call)
    assert reference.ok and "Timer1" in reference.output


async def test_read_skill_unknown_name_answers_with_the_known_ones(
    read_skill: ReadSkillTool, workspace: Path
) -> None:
    result = await read_skill.run({"name": "greenhose"}, ToolCallContext(workspace))
    assert not result.ok
    assert result.output == (
        "No skill named 'greenhose'. Known skills: arduino, daily-notes, greenhouse."
    )


@pytest.mark.parametrize("file", ["../greenhouse/SKILL.md", "/etc/passwd", "../../../x"])
async def test_read_skill_files_stay_inside_the_skill(
    read_skill: ReadSkillTool, workspace: Path, file: str
) -> None:
    result = await read_skill.run({"name": "daily-notes", "file": file}, ToolCallContext(workspace))
    assert not result.ok and result.output.startswith("Refused:")
    assert "never run it" not in result.output and "root:" not in result.output
