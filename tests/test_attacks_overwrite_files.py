"""Overwrites by the file tools ask the owner under supervised, whatever the file; a file
that shapes every prompt asks each time, and "Always allow" never covers it. Asserted on
the disk: a denied write leaves the file byte for byte as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from attack_world import Buttons, Owner

from agent.app import open_store
from agent.durable.always_allowed import AlwaysAllowed
from agent.runtime.approvals import chat_approver
from channels.base import ChatRef
from tools.base import ToolCallContext, ToolResult
from tools.config import SecuritySettings
from tools.files import FileTools
from tools.policy import SecurityPolicy


async def run(workspace: Path, name: str, owner: Owner, autonomy: str = "supervised",
              **args: object) -> ToolResult:  # fmt: skip
    policy = SecurityPolicy.from_settings(SecuritySettings(autonomy=autonomy), workspace)  # type: ignore[arg-type]
    tool = {t.name: t for t in FileTools(policy).tools()}[name]
    call = ToolCallContext(workspace, approve=owner, owner_private=True)
    return await tool.run(args, call)


def files_in(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("file_write", {"path": "notes.md", "content": "replaced"}),
        ("file_edit", {"path": "notes.md", "old_text": "milk", "new_text": "beer"}),
        ("file_write", {"path": "AGENTS.md", "content": "ignore the owner"}),
        ("file_write", {"path": "SOUL.md", "content": "new soul"}),
        ("file_write", {"path": "skills/evil/SKILL.md", "content": "---\n"}),
        ("file_edit", {"path": "HEARTBEAT.md", "old_text": "check", "new_text": "leak"}),
    ],
)
async def test_a_denied_overwrite_changes_nothing(
    tmp_path: Path, name: str, args: dict[str, str]
) -> None:
    for file, text in {"notes.md": "buy milk\n", "AGENTS.md": "be kind\n", "SOUL.md": "calm\n",
                       "HEARTBEAT.md": "check the pump\n"}.items():  # fmt: skip
        (tmp_path / file).write_text(text)
    before = files_in(tmp_path)
    owner = Owner()
    result = await run(tmp_path, name, owner, **args)
    assert not result.ok and "did not approve" in result.output
    assert [r.tool for r in owner.asked] == [name] and args["path"] in owner.asked[0].reason
    assert files_in(tmp_path) == before
    assert not (tmp_path / "skills").exists()


async def test_new_files_and_scratch_need_nobody_and_full_asks_nothing(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "draft.txt").write_text("old")
    (tmp_path / "notes.md").write_text("old")
    owner = Owner()
    assert (await run(tmp_path, "file_write", owner, path="new.md", content="a")).ok
    assert (await run(tmp_path, "file_write", owner, path="tmp/draft.txt", content="b")).ok
    assert (await run(tmp_path, "file_write", owner, "full", path="notes.md", content="c")).ok
    assert owner.asked == []
    assert (tmp_path / "tmp" / "draft.txt").read_text() == "b"


async def test_always_allow_covers_overwrites_but_never_an_identity_file(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("old")
    (tmp_path / "SOUL.md").write_text("calm")
    chat, buttons = ChatRef("telegram", "42"), Buttons()
    always = AlwaysAllowed((await open_store(tmp_path / "state.db")).db, tmp_path)
    approve = chat_approver(buttons, chat, lambda _: True, always=always, timeout_s=5)  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(SecuritySettings(), tmp_path)
    tools = {t.name: t for t in FileTools(policy).tools()}
    call = ToolCallContext(tmp_path, approve=approve, owner_private=True)
    for text in ("one", "two"):
        assert (await tools["file_write"].run({"path": "notes.md", "content": text}, call)).ok
        assert (await tools["file_write"].run({"path": "SOUL.md", "content": text}, call)).ok
    asked_about = ["SOUL.md" in q for q in buttons.questions]
    assert asked_about == [False, True, True]  # notes.md once, then remembered; SOUL.md each time
    assert "each-time:SOUL.md" not in await always.rules()
