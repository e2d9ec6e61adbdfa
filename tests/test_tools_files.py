"""File tools: what lands on disk, and every way out of the workspace refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon, eventually
from fakes.llm_requests import tool_results
from fakes.model_double import ScriptedModel, text, tool_calls
from test_toy_channel import toy  # noqa: F401 (the fixture)
from toy_channel.channel import ToyChannel

from tools.base import ToolCallContext, ToolResult
from tools.config import SecuritySettings
from tools.files import FileTools
from tools.policy import SecurityPolicy

OWNER = "alice"
WAIT_S = 10.0
HALF_AN_EMOJI = json.loads('"\\ud83d"')  # a lone surrogate: JSON allows it, UTF-8 does not


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def _tools(workspace: Path, autonomy: str = "supervised") -> dict[str, object]:
    settings = SecuritySettings(autonomy=autonomy)  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(settings, workspace)
    return {tool.name: tool for tool in FileTools(policy).tools()}


async def call(
    workspace: Path, name: str, autonomy: str = "supervised", **args: object
) -> ToolResult:
    tool = _tools(workspace, autonomy)[name]
    return await tool.run(args, ToolCallContext(workspace))  # type: ignore[attr-defined,no-any-return]


async def test_write_read_edit_list(workspace: Path) -> None:
    assert (await call(workspace, "file_write", path="notes/a.md", content="one\ntwo\nthree\n")).ok
    assert (workspace / "notes/a.md").read_text() == "one\ntwo\nthree\n"
    assert (
        await call(workspace, "file_read", path="notes/a.md", start_line=2, end_line=3)
    ).output == "two\nthree\n"
    assert (
        await call(workspace, "file_edit", "full", path="notes/a.md", old_text="two", new_text="2")
    ).ok  # under supervised an edit asks first
    assert (workspace / "notes/a.md").read_text() == "one\n2\nthree\n"
    listing = await call(workspace, "file_list")
    assert listing.output == "notes/"


async def test_listing_a_file_says_it_is_one(workspace: Path) -> None:
    """A small model listed lines.txt to count its lines, read "No such folder" and told the
    user the file did not exist: the error says it is a file and how to read it."""
    (workspace / "lines.txt").write_text("a\nb\n")
    listed = await call(workspace, "file_list", path="lines.txt")
    assert (
        not listed.ok
        and listed.output == "lines.txt is a file, not a folder: read it with file_read"
    )
    missing = await call(workspace, "file_list", path="nothing")
    assert not missing.ok and missing.output == "No such folder: nothing"


async def test_edit_not_found_or_not_unique_changes_nothing(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x x")
    missing = await call(workspace, "file_edit", path="a.txt", old_text="y", new_text="z")
    twice = await call(workspace, "file_edit", path="a.txt", old_text="x", new_text="z")
    assert not missing.ok and "not found" in missing.output
    assert not twice.ok and "2 times" in twice.output
    assert (workspace / "a.txt").read_text() == "x x"


async def test_edit_with_empty_old_text_adds_a_line_at_the_end(workspace: Path) -> None:
    """What a small model writes for "add butter to the list" (bench/real_model.py's
    append_file): the line lands at the end, on a line of its own, and a recheck after a
    crash can tell it was added."""
    (workspace / "shopping.txt").write_text("milk\n")
    tools = _tools(workspace, "full")  # supervised asks before changing an existing file
    add = {"path": "shopping.txt", "old_text": ""}
    added = await call(workspace, "file_edit", "full", **add, new_text="butter")
    assert added.ok, added.output
    again = await call(workspace, "file_edit", "full", **add, new_text="eggs")
    assert again.ok
    assert (workspace / "shopping.txt").read_text() == "milk\nbutter\neggs"
    args = {"path": "shopping.txt", "old_text": "", "new_text": "eggs"}
    found = await tools["file_edit"].recheck(args, ToolCallContext(workspace))  # type: ignore[attr-defined]
    assert found is not None and found.ok
    args["new_text"] = "bread"
    found = await tools["file_edit"].recheck(args, ToolCallContext(workspace))  # type: ignore[attr-defined]
    assert found is not None and not found.ok
    nothing = await call(workspace, "file_edit", "full", **add, new_text="")
    assert not nothing.ok and "nothing to change" in nothing.output
    assert (workspace / "shopping.txt").read_text() == "milk\nbutter\neggs"


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt"])
async def test_dotdot_escape_refused(workspace: Path, path: str) -> None:
    result = await call(workspace, "file_write", path=path, content="no")
    assert not result.ok and "outside the workspace" in result.output
    assert not (workspace.parent / "outside.txt").exists()


async def test_absolute_path_outside_refused(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden")
    result = await call(workspace, "file_read", path=str(secret))
    assert not result.ok and "hidden" not in result.output


async def test_symlink_that_escapes_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hidden")
    (workspace / "link").symlink_to(outside)
    read = await call(workspace, "file_read", path="link/secret.txt")
    write = await call(workspace, "file_write", path="link/new.txt", content="x")
    assert not read.ok and "outside the workspace" in read.output
    assert not write.ok and not (outside / "new.txt").exists()


async def test_read_only_autonomy_refuses_writes(workspace: Path) -> None:
    result = await call(workspace, "file_write", autonomy="read_only", path="a.txt", content="x")
    assert not result.ok and "read_only" in result.output
    assert not (workspace / "a.txt").exists()


async def test_bad_arguments_are_an_error_the_model_can_read(workspace: Path) -> None:
    result = await call(workspace, "file_read", paht="a.txt")
    assert not result.ok
    assert "path: Field required" in result.output and "paht: unexpected argument" in result.output


async def test_a_write_that_would_keep_only_a_piece_of_the_file_is_refused(
    workspace: Path,
) -> None:
    """Asked what fact.txt says, a small model wrote its answer over the file: the write
    that cuts a file down to a piece of itself is refused, and the file holds what it held.
    A write that adds or changes text, emptying a file, and a cut made with file_edit go on."""
    fact = workspace / "fact.txt"
    fact.write_text("The boiler code is 4417.\n")
    cut = await call(workspace, "file_write", "full", path="fact.txt", content="4417")
    assert not cut.ok and cut.output.startswith("Refused: this would keep only 4 of the 25")
    assert "file_edit" in cut.output
    assert fact.read_text() == "The boiler code is 4417.\n"

    changed = await call(workspace, "file_write", "full", path="fact.txt", content="code 4418")
    assert changed.ok and fact.read_text() == "code 4418"
    same = await call(workspace, "file_write", "full", path="fact.txt", content="code 4418\n")
    assert same.ok and fact.read_text() == "code 4418\n"
    emptied = await call(workspace, "file_write", "full", path="fact.txt", content="")
    assert emptied.ok and fact.read_text() == ""

    fact.write_text("keep\ndrop\n")
    edited = await call(
        workspace, "file_edit", "full", path="fact.txt", old_text="drop\n", new_text=""
    )
    assert edited.ok and fact.read_text() == "keep\n"
    (workspace / "folder").mkdir()
    assert not (await call(workspace, "file_write", "full", path="folder", content="x")).ok


async def test_text_that_is_not_unicode_is_refused_and_the_file_kept(workspace: Path) -> None:
    """Every writer (file_write, file_edit, file_edit's append) encodes before the file is
    opened for writing: a lone surrogate is refused and the file holds what it held."""
    notes = workspace / "notes.md"
    notes.write_text("milk\n")
    for name, args in [
        ("file_write", {"content": "cake " + HALF_AN_EMOJI}),
        ("file_edit", {"old_text": "milk", "new_text": "cake " + HALF_AN_EMOJI}),
        ("file_edit", {"old_text": "", "new_text": "cake " + HALF_AN_EMOJI}),
    ]:
        result = await call(workspace, name, "full", path="notes.md", **args)
        assert not result.ok and result.output.startswith(
            "Refused: the text is not valid Unicode (a lone surrogate, '\\ud83d', at character"
        ), result.output
        assert "nothing was written" in result.output
        assert notes.read_text() == "milk\n"
    new = await call(workspace, "file_write", "full", path="new.md", content=HALF_AN_EMOJI)
    assert not new.ok and not (workspace / "new.md").exists()


@pytest.mark.usefixtures("toy")
async def test_an_edit_whose_new_text_cannot_be_written_keeps_the_file(
    home: Path, model: ScriptedModel, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model's reply cut in the middle of an emoji's escape (or a model that escapes an
    emoji by halves) sends file_edit a new_text with a lone surrogate. The file was opened
    with O_TRUNC before the text was encoded: the edit failed and the whole file was gone."""
    model.script(
        tool_calls(
            (
                "file_edit",
                {"path": "shopping.md", "old_text": "milk", "new_text": "cake " + HALF_AN_EMOJI},
            )
        ),
        text("Done."),
    )
    monkeypatch.setenv("PINCLAW_SECURITY__AUTONOMY", "full")  # the edit asks nobody
    async with daemon():
        notes = home / "workspace" / "shopping.md"
        notes.write_text("milk\neggs\nbutter\n")
        (toy,) = ToyChannel.built
        assert await toy.say(OWNER, OWNER, "swap milk for cake")
        await eventually(lambda: toy.said_in(OWNER), WAIT_S, "the reply")
    [result] = tool_results(model.requests[1])
    assert notes.read_text() == "milk\neggs\nbutter\n", result
    assert result.startswith("Error: ") and "Traceback" not in result
