"""The OS sandbox: real commands, run the way the shell tool runs them, against a fake
pinclaw home (config.toml and state.db beside the workspace) and a fake owner home."""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from attack_world import processes_with

import tools.sandbox.limits as limits_module
from tools.sandbox import reaper, system_programs
from tools.sandbox.sandboxes import (
    Landlock,
    Limits,
    NoSandbox,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    choose_sandbox,
)
from tools.shell.shell_tool import start

REPO = Path(__file__).resolve().parent.parent
SECRET = f"sk-live-{secrets.token_hex(12)}"
SANDBOXED = ("bubblewrap", "landlock")


def available(kind: str) -> Sandbox:
    try:
        return choose_sandbox(kind)  # type: ignore[arg-type]
    except SandboxUnavailable as exc:
        pytest.skip(f"{kind} unavailable here: {exc}")


@pytest.fixture(params=SANDBOXED)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    return available(request.param)


@pytest.fixture(params=[*SANDBOXED, "off"])
def any_sandbox(request: pytest.FixtureRequest) -> Sandbox:
    return available(request.param)


@dataclass
class World:
    home: Path  # the pinclaw home: config.toml, state.db, workspace/
    workspace: Path
    config: Path
    state: Path
    owner_key: Path  # a file in the owner's home


@pytest.fixture
def world(tmp_path: Path) -> World:
    home = tmp_path / "pinclaw"
    workspace = home / "workspace"
    workspace.mkdir(parents=True)
    config = home / "config.toml"
    config.write_text(f'[llm]\napi_key = "{SECRET}"\n')
    state = home / "state.db"
    state.write_bytes(b"SQLite format 3\x00" + SECRET.encode())
    ssh = tmp_path / "owner" / ".ssh"
    ssh.mkdir(parents=True)
    key = ssh / "id_ed25519"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    return World(home, workspace.resolve(), config, state, key)


async def run(
    sandbox: Sandbox,
    spec: SandboxSpec,
    script: str | Sequence[str],
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Exit code and output (stdout and stderr) of one sandboxed command."""
    argv = ["sh", "-c", script] if isinstance(script, str) else list(script)
    launch = sandbox.launch(argv, spec, {"LANG": "C.UTF-8"} if env is None else env)
    try:
        process, _ = await start(launch)
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if launch.cleanup is not None:
            launch.cleanup()
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


async def test_pinclaw_home_and_owner_home_are_unreadable(sandbox: Sandbox, world: World) -> None:
    spec = SandboxSpec(world.workspace)
    code, output = await run(sandbox, spec, f"cat {world.config} {world.state} {world.owner_key}")
    assert code != 0 and SECRET not in output
    _, listing = await run(sandbox, spec, f"ls -a {world.home} {world.owner_key.parent}")
    assert "config.toml" not in listing and "state.db" not in listing and "id_" not in listing


async def test_without_a_sandbox_the_same_commands_expose_the_secrets(world: World) -> None:
    """The control: the world above is sound, the commands would find the secret."""
    code, output = await run(
        NoSandbox("test"), SandboxSpec(world.workspace), f"cat {world.config} {world.owner_key}"
    )
    assert code == 0 and output.count(SECRET) == 2


async def test_nothing_outside_the_workspace_can_be_changed(sandbox: Sandbox, world: World) -> None:
    evil, owner_evil = world.home / "evil", world.owner_key.parent / "evil"
    await run(
        sandbox,
        SandboxSpec(world.workspace),
        f"echo x > {evil}; echo x > {owner_evil}; echo x >> {world.config}; rm -f {world.state}"
        f"; ln -s {world.config} ../link",
    )
    assert not evil.exists() and not owner_evil.exists() and not (world.home / "link").exists()
    assert world.config.read_text() == f'[llm]\napi_key = "{SECRET}"\n'
    assert world.state.exists()


async def test_a_symlink_in_the_workspace_does_not_reach_out(
    sandbox: Sandbox, world: World
) -> None:
    (world.workspace / "link").symlink_to(world.config)
    code, output = await run(sandbox, SandboxSpec(world.workspace), "cat link")
    assert code != 0 and SECRET not in output


async def test_the_workspace_is_writable(any_sandbox: Sandbox, world: World) -> None:
    code, output = await run(
        any_sandbox,
        SandboxSpec(world.workspace),
        "echo hi > note.txt && mkdir sub && echo there > sub/n && mv sub/n moved && cat note.txt",
    )
    assert (code, output) == (0, "hi\n")
    assert (world.workspace / "moved").read_text() == "there\n"


async def test_a_read_only_workspace_can_be_read_not_changed(
    sandbox: Sandbox, world: World
) -> None:
    keep = world.workspace / "keep.txt"
    keep.write_text("original\n")
    code, output = await run(
        sandbox,
        SandboxSpec(world.workspace, writable=False),
        "cat keep.txt; echo x > new.txt; echo y >> keep.txt; mkdir d; rm keep.txt",
    )
    assert code != 0 and output.startswith("original\n")
    assert keep.read_text() == "original\n"
    assert sorted(p.name for p in world.workspace.iterdir()) == ["keep.txt"]


RUNTIME = """
import asyncio, os, sys
from pathlib import Path
from tools.sandbox.sandboxes import SandboxSpec, choose_sandbox

async def main() -> None:
    launch = choose_sandbox(sys.argv[1]).launch(
        ["sh", "-c", "cat /proc/$PPID/environ; cat /proc/%d/environ;"
         " grep -a -h PINCLAW_TEST_KEY /proc/*/environ" % os.getpid()],
        SandboxSpec(Path(sys.argv[2])), {"LANG": "C.UTF-8"})
    process = await asyncio.create_subprocess_exec(
        *launch.argv, env=launch.env, cwd=launch.cwd, preexec_fn=launch.preexec_fn,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await process.communicate()
    if launch.cleanup:
        launch.cleanup()
    sys.stdout.buffer.write(output)

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", [*SANDBOXED, "off"])
async def test_the_runtime_environment_is_unreachable(kind: str, world: World) -> None:
    """A runtime process started with an API key in its environment (as from systemd or a
    shell: /proc/<pid>/environ shows the environment a process started with, so setting
    it in this process would prove nothing) runs `cat /proc/$PPID/environ` and friends."""
    available(kind)
    env = {**os.environ, "PINCLAW_TEST_KEY": SECRET, "PYTHONPATH": str(REPO)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RUNTIME,
        kind,
        str(world.workspace),
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    assert (SECRET.encode() in output) == (kind == "off"), output[-500:]


async def test_the_command_gets_only_the_environment_it_is_given(
    any_sandbox: Sandbox, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_TEST_KEY", SECRET)
    code, output = await run(any_sandbox, SandboxSpec(world.workspace), "env", {"LANG": "C"})
    names = {line.split("=", 1)[0] for line in output.splitlines()}
    assert code == 0 and SECRET not in output
    assert names <= {"LANG", "HOME", "TMPDIR", "PATH", "PWD", "SHLVL", "_"}


async def test_home_is_the_workspace_and_tmp_is_writable(
    any_sandbox: Sandbox, world: World
) -> None:
    code, output = await run(
        any_sandbox,
        SandboxSpec(world.workspace),
        'printf "%s\\n" "$HOME" "$(pwd)" && echo scratch > "$TMPDIR/t" && cat "$TMPDIR/t"',
    )
    assert (code, output) == (0, f"{world.workspace}\n{world.workspace}\nscratch\n")


async def test_landlock_private_tmp_is_removed_by_cleanup(world: World) -> None:
    code, output = await run(
        available("landlock"), SandboxSpec(world.workspace), 'touch "$TMPDIR/x" && echo $TMPDIR'
    )
    tmpdir = Path(output.strip())
    assert code == 0 and tmpdir.is_absolute() and tmpdir.name.startswith("pinclaw-sandbox-")
    assert not await asyncio.to_thread(tmpdir.exists)


async def test_masked_paths_in_the_workspace_are_hidden(sandbox: Sandbox, world: World) -> None:
    (world.workspace / "private").mkdir()
    (world.workspace / "private" / "key.txt").write_text(SECRET)
    token = world.workspace / "token.txt"
    token.write_text(SECRET)
    (world.workspace / "notes").mkdir()
    (world.workspace / "notes" / "todo.txt").write_text("todo\n")
    spec = SandboxSpec(
        world.workspace, masked=(world.workspace / "private", token, world.home / "absent")
    )
    _, output = await run(
        sandbox,
        spec,
        "cat private/key.txt; cat token.txt; echo overwritten > token.txt; rm -f token.txt"
        "; echo more > notes/new.txt; cat notes/todo.txt notes/new.txt",
    )
    assert SECRET not in output and output.endswith("todo\nmore\n")
    assert token.read_text() == SECRET
    assert (world.workspace / "private" / "key.txt").read_text() == SECRET


async def test_a_masked_path_that_does_not_exist_is_not_made(
    sandbox: Sandbox, world: World
) -> None:
    """USER.md before anyone wrote it, another chat's inbox folder before its first file:
    nothing appears in the real workspace, and the command cannot make them; the folder
    that would hold one becomes list-only, its entries keep their rights."""
    notes = world.workspace / "notes.txt"
    notes.write_text("one\n")
    (world.workspace / "sub").mkdir()
    (world.workspace / "link").symlink_to(world.config)
    absent = (world.workspace / "USER.md", world.workspace / "inbox" / "telegram-9")
    _, output = await run(
        sandbox,
        SandboxSpec(world.workspace, masked=absent),
        "echo x > USER.md; mkdir -p inbox/telegram-9; echo y > new.txt; echo two >> notes.txt"
        "; echo z > sub/new.txt && cat notes.txt sub/new.txt; cat link; ls /proc/self/fd",
    )
    assert "one\ntwo\nz\n" in output and SECRET not in output, output
    assert sorted(p.name for p in world.workspace.iterdir()) == ["link", "notes.txt", "sub"]
    assert (world.workspace / "sub" / "new.txt").read_text() == "z\n"
    if isinstance(sandbox, Landlock):
        return
    fds = output.split("z\n", 1)[1].split()[-4:]
    assert fds == ["0", "1", "2", "3"], output  # bwrap closed the descriptors it was given


async def test_a_masked_file_made_while_the_command_runs_stays_hidden(
    sandbox: Sandbox, world: World
) -> None:
    """The owner's turn writes USER.md while another chat's command runs: the name was
    masked when that command started, so it does not see the file."""
    user = world.workspace / "USER.md"
    launch = sandbox.launch(
        ["sh", "-c", "echo started; sleep 1; cat USER.md; ls"],
        SandboxSpec(world.workspace, masked=(user,)),
        {},
    )
    process, _ = await start(launch)
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"started\n"
    user.write_text(SECRET)
    output, _ = await asyncio.wait_for(process.communicate(), 30)
    if launch.cleanup is not None:
        launch.cleanup()
    assert SECRET.encode() not in output, output


@pytest.fixture
def os_release() -> tuple[Path, str]:
    """/etc/os-release and its first line; on most systems a symlink into /usr/lib."""
    release = Path("/etc/os-release")
    if not release.is_file() or not release.read_text().strip():
        pytest.skip("no /etc/os-release here")
    return release, release.read_text().splitlines()[0]


async def test_a_masked_system_file_is_hidden(
    sandbox: Sandbox, world: World, os_release: tuple[Path, str]
) -> None:
    release, first_line = os_release
    _, output = await run(
        sandbox,
        SandboxSpec(world.workspace, masked=(release,)),
        "cat /etc/os-release; ls /usr/bin > /dev/null && echo system-ok",
    )
    assert first_line not in output and output.endswith("system-ok\n")


@pytest.fixture
def hashes() -> list[str]:
    """The lines of /etc/shadow and /etc/gshadow, which root can read (as the runtime)."""
    if os.geteuid() != 0:
        pytest.skip("not root: a command could not read /etc/shadow anyway")
    found = [Path(name) for name in ("/etc/shadow", "/etc/gshadow") if Path(name).is_file()]
    lines = [line for path in found for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        pytest.skip("no /etc/shadow here")
    return lines


SHADOW = "cat /etc/shadow /etc/gshadow; head -n 1 /etc/passwd"


def first_passwd_line() -> str:
    return Path("/etc/passwd").read_text().splitlines()[0]


async def test_a_root_runtime_does_not_show_the_password_hashes(
    sandbox: Sandbox, world: World, hashes: list[str]
) -> None:
    _, output = await run(sandbox, SandboxSpec(world.workspace), SHADOW)
    assert not [line for line in hashes if line in output]
    assert output.endswith(f"{first_passwd_line()}\n"), output  # the rest of /etc still reads


async def test_without_a_sandbox_root_reads_the_password_hashes(
    world: World, hashes: list[str]
) -> None:
    """The control: the command above does find the hashes when nothing masks them."""
    _, output = await run(NoSandbox("test"), SandboxSpec(world.workspace), SHADOW)
    assert all(line in output for line in hashes)


def host_accounts() -> list[str]:
    return Path("/etc/passwd").read_text().splitlines()


async def test_bubblewrap_shows_a_passwd_and_group_of_root_and_the_user(world: World) -> None:
    """As Flatpak does: the host's other accounts are not a command's business. (Landlock
    cannot change a file's content: there the host's passwd reads; docs/security.md says so.)"""
    uid, gid = os.getuid(), os.getgid()
    others = [line for line in host_accounts() if line.split(":")[2] not in ("0", str(uid))]
    assert others, "the control: the host's passwd names more accounts than these"
    bwrap, spec = available("bubblewrap"), SandboxSpec(world.workspace)
    code, output = await run(bwrap, spec, "cat /etc/passwd; echo; cat /etc/group; echo; id -un")
    passwd, group, name = output.split("\n\n")
    assert code == 0 and passwd.splitlines()[0] == first_passwd_line(), output
    assert [line.split(":")[2] for line in passwd.splitlines()] == ["0", *[str(uid)][: uid != 0]]
    assert [line.split(":")[2] for line in group.splitlines()] == ["0", *[str(gid)][: gid != 0]]
    assert not [line for line in others if line in output]
    assert name.strip() == pwd.getpwuid(uid).pw_name  # `id` still names the user


@pytest.mark.parametrize("network", [True, False])
async def test_network_off_blocks_tcp_to_localhost(
    sandbox: Sandbox, world: World, network: bool
) -> None:
    if shutil.which("python3", path="/usr/bin") is None:
        pytest.skip("needs /usr/bin/python3 inside the sandbox")
    connections = []

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=10)"
        "; print('got', s.recv(5).decode())"
    )
    async with server:
        code, output = await run(
            sandbox, SandboxSpec(world.workspace, network=network), ["python3", "-c", connect]
        )
    assert ("got hello" in output) == network and (len(connections) == 1) == network, output
    assert (code == 0) == network


async def test_the_file_size_limit_stops_a_big_write(any_sandbox: Sandbox, world: World) -> None:
    spec = SandboxSpec(world.workspace, limits=Limits(file_mb=1))
    code, _ = await run(any_sandbox, spec, "head -c 50M /dev/zero > big")
    assert code != 0
    assert (world.workspace / "big").stat().st_size <= 1024 * 1024


async def test_limits_hold_without_prlimit_too(
    any_sandbox: Sandbox, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without prlimit(1) the limits are set by the preexec_fn instead."""
    monkeypatch.setattr(limits_module, "prlimit", lambda: None)
    spec = SandboxSpec(world.workspace, limits=Limits(file_mb=1))
    code, _ = await run(any_sandbox, spec, "head -c 50M /dev/zero > big")
    assert code != 0
    assert (world.workspace / "big").stat().st_size <= 1024 * 1024


async def test_the_cpu_limit_stops_a_busy_loop(any_sandbox: Sandbox, world: World) -> None:
    spec = SandboxSpec(world.workspace, limits=Limits(cpu_s=1))
    code, _ = await run(any_sandbox, spec, "while :; do :; done")
    assert code != 0


async def test_the_runtime_cannot_be_signalled(sandbox: Sandbox, world: World) -> None:
    if isinstance(sandbox, Landlock) and sandbox.abi < 6:
        pytest.skip("Landlock scopes signals from ABI 6")
    code, output = await run(
        sandbox, SandboxSpec(world.workspace), f"kill -0 {os.getpid()} && echo reached"
    )
    assert code != 0 and "reached" not in output


async def test_the_command_holds_no_capabilities(sandbox: Sandbox, world: World) -> None:
    code, output = await run(sandbox, SandboxSpec(world.workspace), "grep CapEff /proc/self/status")
    assert (code, output) == (0, "CapEff:\t0000000000000000\n")


@pytest.fixture(params=["auto", "subreaper"])
def keeper(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which keeper holds a command's processes: a cgroup where one can be made ("auto"),
    or the supervising subreaper (forced)."""
    if request.param == "auto" and reaper.cgroup_base() is None:
        pytest.skip("no writable cgroup v2 here: auto is the subreaper")
    reaper.use(request.param)
    yield request.param
    reaper.use("auto")


async def test_killing_leaves_nothing_running(
    any_sandbox: Sandbox, world: World, keeper: str
) -> None:
    """What the shell tool does on a timeout: Launch.kill, also for what left the group."""
    marker = f"{secrets.randbelow(10**6) + 10**6}.5"
    launch = any_sandbox.launch(
        ["sh", "-c", f"sleep {marker} & setsid sleep {marker} & echo started; wait"],
        SandboxSpec(world.workspace),
        {},
    )
    process, _ = await start(launch)
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"started\n"
    launch.kill(process.pid)
    await asyncio.wait_for(process.wait(), 30)  # asyncio waits for stdout to close too
    if launch.cleanup is not None:
        launch.cleanup()
    for _ in range(100):  # the kernel tears a pid namespace down asynchronously
        if not processes_with(marker):
            break
        await asyncio.sleep(0.05)
    assert processes_with(marker) == []


async def test_under_bubblewrap_a_command_is_held_in_a_cgroup_too(world: World) -> None:
    """bwrap arms --die-with-parent in its child without checking that bwrap still lives: a
    daemon killed in that moment would leave the command running but for the cgroup, whose
    watcher ends it with the daemon (tools/sandbox/reaper.py)."""
    bubblewrap = available("bubblewrap")
    if reaper.cgroup_base() is None:
        pytest.skip("no writable cgroup v2 here: the pid namespace alone holds the command")
    code, output = await run(bubblewrap, SandboxSpec(world.workspace), "cat /proc/self/cgroup")
    assert code == 0, output
    [line] = [line for line in output.splitlines() if line.startswith("0::")]
    assert Path(line[3:]).name.startswith(f"pinclaw-{os.getpid()}-"), output


async def test_under_bubblewrap_without_a_cgroup_the_command_checks_its_daemon_lives(
    world: World,
) -> None:
    """No cgroup (the subreaper mode makes none): the command runs behind the check that the
    daemon still holds its lock (tools/sandbox/parent_death.py), which passes while it does."""
    bubblewrap = available("bubblewrap")
    reaper.use("subreaper")
    try:
        launch = bubblewrap.launch(["sh", "-c", "echo ok"], SandboxSpec(world.workspace), {})
        if launch.cleanup is not None:
            launch.cleanup()
        code, output = await run(bubblewrap, SandboxSpec(world.workspace), "echo ok")
    finally:
        reaper.use("auto")
    assert "flock" in " ".join(launch.argv)
    assert (code, output) == (0, "ok\n")


def test_off_means_no_sandbox() -> None:
    sandbox = choose_sandbox("off")
    assert (sandbox.kind, sandbox.reason) == ("none", "off in config")


def test_bubblewrap_without_bwrap_in_the_system_folders_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(system_programs, "SYSTEM_PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap.*no bwrap in the system folders"):
        choose_sandbox("bubblewrap")


def test_a_bwrap_that_cannot_run_is_refused_and_auto_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on Ubuntu 24.04, where AppArmor stops unprivileged user namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(system_programs, "SYSTEM_PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"failed a probe run.*uid map: Permission denied"):
        choose_sandbox("bubblewrap")
    chosen = choose_sandbox("auto")
    assert chosen.kind != "bubblewrap" and "failed a probe run" in chosen.reason


def test_a_bwrap_too_old_for_the_masks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 0.5 bwrap has no --bind-fd, which a masked path that does not exist needs."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Unknown option --bind-fd' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(system_programs, "SYSTEM_PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"too old .*0\.5 or later"):
        choose_sandbox("bubblewrap")


def test_auto_takes_the_strongest_kind_that_works() -> None:
    expected = "none"
    for kind in ("landlock", "bubblewrap"):
        try:
            choose_sandbox(kind)  # type: ignore[arg-type]
            expected = kind
        except SandboxUnavailable:
            pass
    chosen = choose_sandbox("auto")
    assert chosen.kind == expected and chosen.reason.startswith("auto: ")


async def test_landlock_without_network_rights_refuses_network_off(world: World) -> None:
    with pytest.raises(SandboxUnavailable, match="ABI 3 cannot restrict"):
        Landlock(3, "test").launch(["true"], SandboxSpec(world.workspace, network=False), {})
