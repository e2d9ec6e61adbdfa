"""The world the shell attack tests run in, shared by tests/test_attacks_links.py and
tests/test_attacks_overwrites.py: a pinclaw home with its secret config beside the
workspace, a folder outside both, the OS sandboxes this machine has, an owner who records
every approval asked, and snapshots that show any change, links as links."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from channels.base import ApprovalQuestion, ChatRef
from tools.base import ApprovalRequest, ToolCallContext, ToolResult
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import SandboxUnavailable, choose_sandbox
from tools.shell.shell_tool import ShellTool

CONFIG_SECRET = "cfg-secret-Qm3Xv81Lt"
OUTSIDE_SECRET = "outside-secret-Pz62Kw9"


def _names(text: str) -> list[str]:
    return text.split()


# Every program the tests run is allowed: what asks is then the overwrite or identity rule.
ALLOWED = _names(
    "ls cat echo cp mv rm tee sed truncate dd touch mkdir git tar unzip zip sort find chmod "
    "gzip ln patch readlink"
)


def _sandboxes() -> Iterator[str]:
    """The OS sandboxes that work here; with PINCLAW_SANDBOXES=require (as .ci/run sets),
    one that does not is a failure, not a smaller table."""
    for kind in ("bubblewrap", "landlock"):
        try:
            choose_sandbox(kind)  # type: ignore[arg-type]
        except SandboxUnavailable as exc:
            if os.environ.get("PINCLAW_SANDBOXES") == "require":
                raise RuntimeError(f"{kind} is required by PINCLAW_SANDBOXES: {exc}") from None
            continue
        yield kind


SANDBOXES = list(_sandboxes())
needs_sandbox = pytest.mark.skipif(not SANDBOXES, reason="no OS sandbox here")


def tree_snapshot(root: Path, *, skip_git_objects: bool = False) -> dict[str, str]:
    """Every entry under `root`, links as their target, files as a digest: equal snapshots
    mean nothing changed."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        if skip_git_objects:
            dirs[:] = [d for d in dirs if not (Path(folder) / d).match("*/.git/objects")]
        for name in dirs + files:
            path = Path(folder, name)
            if path.is_symlink():
                seen[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "dir"
    return seen


def processes_with(marker: str) -> list[str]:
    """The pids whose argv holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(entry.name)
    return found


@dataclass
class World:
    root: Path  # holds everything below
    home: Path  # the pinclaw home: config.toml with a secret
    workspace: Path
    outside: Path  # a folder outside the home

    def snapshot(self) -> dict[str, str]:
        """Every entry under root (the workspace's .git objects aside): see tree_snapshot."""
        return tree_snapshot(self.root, skip_git_objects=True)

    def outside_files(self) -> dict[str, str]:
        """The snapshot of everything that is not in the workspace."""
        inside = str(self.workspace) + os.sep
        return {k: v for k, v in self.snapshot().items() if not k.startswith(inside)}

    def links(self) -> list[str]:
        """Every symbolic link in the workspace, relative to it."""
        found = []
        for folder, dirs, files in os.walk(self.workspace):
            for name in dirs + files:
                if Path(folder, name).is_symlink():
                    found.append(os.path.relpath(Path(folder, name), self.workspace))
        return sorted(found)


@pytest.fixture
def world(tmp_path: Path) -> World:
    home = tmp_path / "home"
    workspace = home / "workspace"
    outside = tmp_path / "outside"
    (workspace / "tmp").mkdir(parents=True)
    outside.mkdir()
    (home / "config.toml").write_text(f'[llm]\napi_key = "{CONFIG_SECRET}"\n')
    (outside / "secret.txt").write_text(OUTSIDE_SECRET)
    (workspace / "notes.txt").write_text("buy milk\n")
    (workspace / "new.txt").write_text("new text\n")
    (workspace / "SOUL.md").write_text("calm and kind\n")
    (workspace / "AGENTS.md").write_text("be helpful\n")
    (workspace / "tmp" / "draft.txt").write_text("draft\n")
    return World(tmp_path, home, workspace, outside)


@dataclass
class Owner:
    """Answers every approval with `answer`, and keeps what was asked."""

    answer: bool = False
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answer

    @property
    def reasons(self) -> str:
        return "; ".join(request.reason for request in self.asked)


class Buttons:
    """A chat whose owner presses "Always allow" on every question."""

    name = "fake"

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def ask_approval(self, chat: ChatRef, question: ApprovalQuestion, may: object) -> str:
        self.questions.append(question.text)
        return "always"


def policy_for(world: World, autonomy: str = "supervised", **settings: object) -> SecurityPolicy:
    security = SecuritySettings(autonomy=autonomy, allowed_commands=ALLOWED, **settings)  # type: ignore[arg-type]
    return SecurityPolicy.from_settings(security, world.workspace, home=world.home)


async def shell(
    world: World,
    command: str,
    *,
    sandbox: str | None = None,
    owner: Owner | None = None,
    autonomy: str = "supervised",
    **settings: object,
) -> ToolResult:
    """`command` through the real shell tool, in the owner's own private turn."""
    policy = policy_for(world, autonomy, **settings)
    kind = sandbox or SANDBOXES[0]
    tool = ShellTool(policy, ShellSettings(timeout_s=20), choose_sandbox(kind))  # type: ignore[arg-type]
    call = ToolCallContext(world.workspace, approve=owner, owner_private=True)
    return await tool.run({"command": command}, call)


def git(cwd: Path, *args: str) -> str:
    """Git as the owner runs it, outside the sandbox, with links as links."""
    identity = ["-c", "user.name=Owner", "-c", "user.email=owner@example.org"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=30
    )
    return done.stdout


def lexists(path: Path) -> bool:
    return os.path.lexists(path)


def run(argv: list[str], cwd: Path) -> None:
    """A program run by the owner, outside pinclaw (a control: what it does unguarded)."""
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=30)


def needs(*programs: str) -> pytest.MarkDecorator:
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")
