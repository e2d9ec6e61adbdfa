"""The OS sandbox's own promises, tried through the shell tool as a steered model would,
under both sandboxes (and, where it applies, both keepers of tools/sandbox/reaper.py): nothing a
command starts outlives it, memory is bounded, and under `full` the system's private
places stay hidden — /etc shows only what programs need. Each case asserts the world:
files that must not appear, processes that must not exist (found by their argv in
/proc), and output that holds none of the real file's content.

Paths are often named through a variable (`d=/etc; cat $d/machine-id`), which the
shell's parser cannot read, so that the sandbox, not the parser, is what is tried.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_world import SANDBOXES, processes_with

from tools.base import ToolCallContext
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox import reaper
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.shell_tool import ShellTool

REPO = Path(__file__).resolve().parent.parent
# (sandbox, keeper): bubblewrap's pid namespace keeps its processes whatever the keeper;
# Landlock and no sandbox rely on a cgroup ("auto", where one can be made) or a subreaper.
KEPT = [("bubblewrap", "auto")] if "bubblewrap" in SANDBOXES else []
KEPT += [("landlock", "auto"), ("landlock", "subreaper")] if "landlock" in SANDBOXES else []
KEPT += [("off", "auto"), ("off", "subreaper")]
# /etc files a command has no business reading (those that exist here are tried).
ETC_PRIVATE = ("machine-id", "hostname", "fstab", "login.defs", "bash.bashrc", "shells")


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    workspace = tmp_path / "home" / "workspace"
    outside = tmp_path / "outside"
    workspace.mkdir(parents=True)
    outside.mkdir()
    (workspace / "notes.txt").write_text("TODO milk\n")
    # Where a command may write in any turn: the root is list-only in a turn that is not
    # the owner's private one (USER.md, MEMORY.md are masked there, existing or not).
    (workspace / "work").mkdir()
    return {"workspace": workspace.resolve(), "out": outside}


@pytest.fixture
def keeper_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    mode = request.param
    if mode == "auto" and reaper.cgroup_base() is None:
        pytest.skip("no writable cgroup v2 here: auto is the subreaper, tried already")
    reaper.use(mode)
    yield mode
    reaper.use("auto")


async def shell(
    world: dict[str, Path],
    sandbox: str,
    command: str,
    *,
    autonomy: str = "full",
    timeout_s: float = 20,
    memory_mb: int = 1024,
) -> str:
    settings = SecuritySettings(autonomy=autonomy)  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(settings, world["workspace"])
    tool = ShellTool(
        policy,
        ShellSettings(timeout_s=timeout_s, memory_mb=memory_mb),
        choose_sandbox(sandbox),  # type: ignore[arg-type]
        sandbox_off_by_owner=sandbox == "off",
    )
    result = await tool.run({"command": command}, ToolCallContext(policy.workspace))
    return result.output


def marker() -> str:
    return f"2.{secrets.randbelow(10**6):06d}1"  # a sleep of about two seconds, and unique


@pytest.mark.parametrize(("sandbox", "keeper_mode"), KEPT, indirect=["keeper_mode"])
async def test_nothing_a_command_starts_outlives_it(
    world: dict[str, Path], sandbox: str, keeper_mode: str
) -> None:
    """setsid, nohup and a double fork: each would write a file two seconds later; the
    command returns at once, and three seconds on no file and no process is there."""
    marks = [marker(), marker(), marker()]
    late = [world["workspace"] / "work" / f"late{i}.txt" for i in range(3)]
    outside = world["out"] / "late.txt"
    command = (
        f"setsid sh -c 'sleep {marks[0]}; echo x > {late[0]}; echo x > {outside}' &"
        f" nohup sh -c 'sleep {marks[1]}; echo x > {late[1]}' > /dev/null 2>&1 &"
        f" ( (sleep {marks[2]}; echo x > {late[2]}) & ); echo started"
    )
    started = time.monotonic()
    output = await shell(world, sandbox, command)
    took = time.monotonic() - started
    await asyncio.sleep(3)
    assert [path for path in (*late, outside) if path.exists()] == []
    assert [mark for mark in marks if processes_with(mark)] == []
    assert output.startswith("exit code: 0") and "started" in output, output
    assert took < 2, "the command did not return at once"


@pytest.mark.parametrize(("sandbox", "keeper_mode"), KEPT, indirect=["keeper_mode"])
async def test_a_timeout_ends_what_the_command_started(
    world: dict[str, Path], sandbox: str, keeper_mode: str
) -> None:
    mark = marker()
    late = world["workspace"] / "work" / "late.txt"
    command = f"setsid sh -c 'sleep {mark}; echo x > {late}' > /dev/null 2>&1 & sleep 30"
    output = await shell(world, sandbox, command, timeout_s=1)
    assert output.startswith("Timed out after 1 s"), output
    await asyncio.sleep(2.5)
    assert not late.exists() and processes_with(mark) == []


RUNTIME = """
import asyncio, sys
from pathlib import Path
from tools.sandbox import reaper
from tools.sandbox.sandboxes import SandboxSpec, choose_sandbox
from tools.shell.shell_tool import start

async def main() -> None:
    reaper.use(sys.argv[2])
    mark = sys.argv[4]
    launch = choose_sandbox(sys.argv[1]).launch(
        ["sh", "-c", "setsid sleep %s > /dev/null 2>&1 & echo running; sleep %s" % (mark, mark)],
        SandboxSpec(Path(sys.argv[3])), {})
    process, _ = await start(launch)
    await process.stdout.readline()  # the command runs (bubblewrap has set itself up)
    print("started", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def private_tmps(folder: Path) -> list[str]:
    """The sandboxed commands' temporary folders in `folder`, after a sweep of those whose
    runtime is gone, as the next runtime's choice of sandbox makes it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(folder))
        choose_sandbox("off")
    return [path.name for path in folder.iterdir() if path.name.startswith("pinclaw-sandbox-")]


@pytest.mark.parametrize(("sandbox", "keeper_mode"), KEPT, indirect=["keeper_mode"])
async def test_nothing_outlives_a_daemon_that_was_killed(
    world: dict[str, Path], sandbox: str, keeper_mode: str
) -> None:
    """The runtime is SIGKILLed while a command runs: no cleanup of its own runs, and
    still nothing of the command's is left a moment later; its temporary folder (Landlock's)
    is removed by the next runtime, and only once this one is gone."""
    mark = marker()
    tmp = world["out"].parent / "tmp"
    os.mkdir(tmp)
    runtime = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RUNTIME,
        sandbox,
        keeper_mode,
        str(world["workspace"]),
        mark,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert runtime.stdout is not None
    assert await asyncio.wait_for(runtime.stdout.readline(), 30) == b"started\n"
    assert processes_with(mark)
    assert len(private_tmps(tmp)) == (1 if sandbox == "landlock" else 0)
    runtime.kill()
    await runtime.wait()
    for _ in range(40):
        if not processes_with(mark):
            break
        await asyncio.sleep(0.05)
    assert processes_with(mark) == []
    assert private_tmps(tmp) == []


@pytest.mark.parametrize(("sandbox", "keeper_mode"), KEPT, indirect=["keeper_mode"])
async def test_a_memory_hog_is_stopped_by_the_limit(
    world: dict[str, Path], sandbox: str, keeper_mode: str
) -> None:
    hog = await shell(world, sandbox, "head -c 2000000000 /dev/zero | tail", memory_mb=256)
    assert not hog.startswith("exit code: 0") and "Timed out" not in hog, hog
    if shutil.which("python3", path="/usr/bin") is None:
        return
    big = await shell(world, sandbox, "python3 -c 'b = bytearray(400 << 20)'", memory_mb=256)
    assert "MemoryError" in big, big
    small = "python3 -c 'print(len(bytearray(50 << 20)))'"
    assert "52428800" in await shell(world, sandbox, small, memory_mb=256)


def real_lines(path: Path) -> list[str]:
    """The lines of a real file worth looking for in the output (longer than 8 chars)."""
    return [line for line in path.read_text(errors="replace").splitlines() if len(line) > 8]


def private_files() -> tuple[list[Path], list[str]]:
    """Private files here with content worth looking for, and commands that read them."""
    files = [Path("/etc", name) for name in ETC_PRIVATE]
    files = [p for p in files if p.is_file() and not p.is_symlink() and real_lines(p)]
    commands = [f"d=/etc; cat $d/{path.name}" for path in files]
    commands += [f"cat {path}" for path in files]
    bashrc = Path("/root/.bashrc")
    if bashrc.is_file() and real_lines(bashrc):
        files.append(bashrc)
        commands += ["cat ~root/.bashrc", "d=/root; cat $d/.bashrc", "cat /root/.bashrc"]
    return files, commands


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_private_system_files_give_nothing_under_full(
    world: dict[str, Path], sandbox: str
) -> None:
    files, commands = private_files()
    if not files:
        pytest.skip("no private /etc file with content here")
    output = "\n".join([await shell(world, sandbox, command) for command in commands])
    leaked = [line for path in files for line in real_lines(path) if line in output]
    assert leaked == [], output


def names_in(folder: str) -> set[str] | None:
    path = Path(folder)
    return {entry.name for entry in path.iterdir()} if path.is_dir() else None


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("folder", ["/var", "/boot", "/root"])
async def test_private_folders_cannot_be_listed_under_full(
    world: dict[str, Path], sandbox: str, folder: str
) -> None:
    names = names_in(folder)
    if names is None:
        pytest.skip(f"no {folder} here")
    for command in (f"ls -a {folder}", f"d={folder}; ls -a $d"):
        output = await shell(world, sandbox, command)
        assert not output.startswith("exit code: 0"), output
        assert names.isdisjoint(output.splitlines()[1:]), output


def first_passwd_line() -> str:
    return Path("/etc/passwd").read_text().splitlines()[0]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_passwd_stays_readable_for_user_names(world: dict[str, Path], sandbox: str) -> None:
    output = await shell(world, sandbox, "d=/etc; cat $d/passwd; ls -l notes.txt")
    owner = (world["workspace"] / "notes.txt").owner()
    assert output.startswith("exit code: 0") and first_passwd_line() in output, output
    assert f" {owner} " in output.splitlines()[-1], output  # a name, not a number


@pytest.fixture
def repository(world: dict[str, Path]) -> dict[str, Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(world["workspace"])], check=True, timeout=30)
    return world


ORDINARY = {
    "git status --short": "?? notes.txt",
    "date +%Y": time.strftime("%Y"),
    "ls -l": "notes.txt",
    "grep -c milk notes.txt": "1",
    "id -un": "",
    "sort notes.txt | wc -l": "1",
    "python3 -c 'print(1)'": "1",
    "python3 -c 'import ssl, json, mimetypes; ssl.create_default_context(); print(2)'": "2",
}


@pytest.mark.parametrize(("sandbox", "keeper_mode"), KEPT, indirect=["keeper_mode"])
async def test_ordinary_commands_still_work_under_full(
    repository: dict[str, Path], sandbox: str, keeper_mode: str
) -> None:
    """They start and run without a word on stderr: no file they need is hidden."""
    for command, expected in ORDINARY.items():
        if command.startswith("python3") and shutil.which("python3", path="/usr/bin") is None:
            continue
        output = await shell(repository, sandbox, command)
        body = output.split("\n", 1)[1] if "\n" in output else ""
        assert output.startswith("exit code: 0") and expected in body, (command, output)
        assert "denied" not in output and "warning" not in output.lower(), (command, output)
