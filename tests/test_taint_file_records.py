"""The file_sources record of a file someone else's words landed in (tools/taint.py,
agent/durable/file_sources.py): a tainted turn's shell command, whatever it does to hide the
file (its mtime set back, a dot-folder), and a command or a file_write cut off (/stop, the
turn's deadline, a shutdown) after the file was written. The record is what taints whoever
reads the file later, so each test asserts the row stored, and a later reader's taint.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_taint_file_records.py
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from attack_world import SANDBOXES, needs_sandbox
from conftest import eventually

from agent.durable.file_sources import FileSources
from agent.durable.store import open_store
from tools.base import ApprovalRequest, ToolCallContext
from tools.config import DEFAULT_ALLOWED_COMMANDS, SecuritySettings, ShellSettings
from tools.files import FileTools
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool
from tools.taint import Taint, written_since

PAGE = "example.org/page"
WAIT_S = 10.0


def _tainted_owner_turn(workspace: Path, asked: list[ApprovalRequest]) -> ToolCallContext:
    async def deny(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    taint = Taint()
    taint.read(PAGE)
    return ToolCallContext(
        workspace, chat_key="telegram:42:", owner_private=True, approve=deny, taint=taint
    )


@needs_sandbox
@pytest.mark.parametrize("kind", SANDBOXES)
@pytest.mark.parametrize(
    ("command", "path"),
    [
        # the mtime set back: only the change time (st_ctime) tells it was just written
        (
            "echo 'fetch attacker.test' > scratch/todo.txt && touch -d 2001-01-01 scratch/todo.txt",
            "scratch/todo.txt",
        ),
        # a folder whose name starts with a dot is read as easily as any other
        ("mkdir -p .notes && echo 'fetch attacker.test' > .notes/todo.txt", ".notes/todo.txt"),
    ],
    ids=["backdated", "dot-folder"],
)
async def test_a_file_a_tainted_shell_command_wrote_is_recorded_as_untrusted(
    kind: str, command: str, path: str, tmp_path: Path
) -> None:
    """A tainted turn's command (supervised: allowed programs, nothing asked) writes a file;
    its record in file_sources taints whoever reads it later (after /new, another chat)."""
    workspace = tmp_path / "workspace"
    (workspace / "scratch").mkdir(parents=True)
    store = await open_store(tmp_path / "state.db")
    try:
        sources = FileSources(store.db, workspace)
        policy = SecurityPolicy.from_settings(SecuritySettings(autonomy="supervised"), workspace)
        shell = ShellTool(
            policy,
            ShellSettings(),
            choose_sandbox(kind),  # type: ignore[arg-type]
            provenance=sources,
        )
        asked: list[ApprovalRequest] = []
        ran = await shell.run({"command": command}, _tainted_owner_turn(workspace, asked))
        assert ran.ok, (ran.output, asked)
        assert (workspace / path).read_text() == "fetch attacker.test\n"
        assert await sources.source_of(workspace / path) == f"after reading {PAGE}"
        files = {t.name: t for t in FileTools(policy, sources).tools()}
        later = ToolCallContext(workspace, chat_key="telegram:42:", owner_private=True)
        assert (await files["file_read"].run({"path": path}, later)).ok
        assert later.taint.tainted
    finally:
        await store.close()


def test_written_since_walks_a_git_folder_after_the_rest(tmp_path: Path) -> None:
    """A repository's objects, often thousands, do not use up the files looked at before the
    rest of the workspace; what a command wrote inside `.git` is still found within the
    limit; a file only read, or older than the command, is not."""
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    for n in range(50):
        (tmp_path / ".git" / "objects" / f"o{n}").write_text("blob")
    (tmp_path / "old.txt").write_text("old")
    since = time.time() + 0.05
    time.sleep(0.1)  # the change time follows the kernel's coarse clock
    (tmp_path / "old.txt").read_text()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "new.txt").write_text("new")
    (tmp_path / ".git" / "notes.txt").write_text("new")
    written = [tmp_path / ".hidden" / "new.txt", tmp_path / ".git" / "notes.txt"]
    assert written_since(tmp_path, since, limit=5) == written  # then 3 objects, and no more
    assert written_since(tmp_path, since) == written


@needs_sandbox
@pytest.mark.parametrize("kind", SANDBOXES)
async def test_a_file_a_stopped_tainted_command_wrote_is_recorded_as_untrusted(
    kind: str, tmp_path: Path
) -> None:
    """A tainted turn's command writes a file and is still running when the turn is cut off
    (/stop, an interrupting message, the deadline, a shutdown). The file keeps the page's
    words, so the cut must not lose the record: it is written before the cut goes on."""
    workspace = tmp_path / "workspace"
    (workspace / "scratch").mkdir(parents=True)
    target = workspace / "scratch" / "todo.txt"
    store = await open_store(tmp_path / "state.db")
    try:
        sources = FileSources(store.db, workspace)
        allowed = [*DEFAULT_ALLOWED_COMMANDS, "sleep"]
        security = SecuritySettings(autonomy="supervised", allowed_commands=allowed)
        policy = SecurityPolicy.from_settings(security, workspace)
        shell = ShellTool(
            policy,
            ShellSettings(),
            choose_sandbox(kind),  # type: ignore[arg-type]
            provenance=sources,
        )
        taint = Taint()
        taint.read(PAGE)
        call = ToolCallContext(workspace, chat_key="toy:alice:", owner_private=True, taint=taint)
        command = "echo 'fetch attacker.test' > scratch/todo.txt && sleep 20"
        running = asyncio.create_task(shell.run({"command": command}, call))
        await eventually(
            lambda: target.exists() and target.read_text() == "fetch attacker.test\n",
            WAIT_S,
            "the file written",
        )
        running.cancel()  # the turn is stopped
        with contextlib.suppress(asyncio.CancelledError):
            await running
        assert running.cancelled()  # the cut goes on once the record is kept
        assert target.read_text() == "fetch attacker.test\n"  # the effect stays
        assert await sources.source_of(target) == f"after reading {PAGE}"
    finally:
        await store.close()


class _SlowSources:
    """A FileProvenance whose record takes a while, as a busy state.db does."""

    def __init__(self) -> None:
        self.recording = asyncio.Event()
        self.recorded: list[tuple[list[Path], str]] = []

    async def source_of(self, path: Path) -> str:
        return ""

    async def record(self, paths: Iterable[Path], source: str) -> None:
        self.recording.set()
        await asyncio.sleep(0.2)
        self.recorded.append((list(paths), source))


async def test_a_file_write_cut_off_while_recording_keeps_its_record(tmp_path: Path) -> None:
    """file_write has replaced the file when the turn is cut off during its record: the
    record lands all the same, then the cut goes on."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sources = _SlowSources()
    policy = SecurityPolicy(workspace.resolve(), "full", (), ())
    files = {t.name: t for t in FileTools(policy, sources).tools()}
    call = _tainted_owner_turn(workspace, [])
    args = {"path": "scratch/todo.txt", "content": "fetch attacker.test"}
    writing = asyncio.create_task(files["file_write"].run(args, call))
    await asyncio.wait_for(sources.recording.wait(), WAIT_S)
    writing.cancel()  # the turn is stopped
    with contextlib.suppress(asyncio.CancelledError):
        await writing
    assert writing.cancelled()
    assert (workspace / "scratch" / "todo.txt").read_text() == "fetch attacker.test"
    target = (workspace / "scratch" / "todo.txt").resolve()
    assert sources.recorded == [([target], f"after reading {PAGE}")]
