"""The local daemon: `agent run` with no chat channel as a subprocess, the fake LLM, and
`agent run -m` handed to it over `<home>/agent.sock` — what the person at the terminal sees,
who may connect, a daemon that dies mid-answer, and the in-process fallback.

One daemon serves the module (starting one costs seconds: LiteLLM's import); a test that
kills it gets a fresh one for the next.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import plistlib
import pty
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_socket
from daemon_process import DaemonProcess, wait_until
from fakes.llm_server import FakeLLM, error, text, tool_calls

from agent.cli.local_client import PlainOneShot, plain_one_shot
from agent.cli.service import command_line, service_file
from agent.daemon.warmup import READ_AGAIN_EVERY_S
from agent.home import settings_fingerprint

REPO = Path(__file__).resolve().parent.parent
NOBODY = 65534
# `agent ARGS` in a process that reports, last on stderr, which heavy modules it loaded:
# the installed command's own entry (agent/__main__.py), with os._exit (how main() leaves a
# cold one-shot) made a plain exit, so this wrapper still prints what was loaded afterwards.
CLIENT = """\
import os, sys
os._exit = sys.exit
sys.argv[0] = "agent"
from agent.__main__ import main
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = ("litellm", "openai", "httpx", "pydantic", "pydantic_settings", "asyncio", "click",
         "typing", "json", "socket")  # the last three: a bare Python's start has none of them
heavy = [m for m in heavy if m in sys.modules]
print("loaded:", ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""
GONE = "error: the pinclaw daemon went away before answering"


class Shared:
    """The module's fake LLM, home folder and daemon (started again when a test killed it)."""

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        self.tmp, self.llm = tmp, llm
        self.home = tmp / "home"
        base = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
        self.env = {
            **base,
            "PINCLAW_HOME": str(self.home),
            "PINCLAW_LLM__MODEL": "openai/test-model",
            "PINCLAW_LLM__API_BASE": llm.base_url,
            "PINCLAW_LLM__NUM_RETRIES": "0",
            "OPENAI_API_KEY": "sk-test-key-not-real-0000",
        }
        self.daemon: DaemonProcess | None = None
        self.starts = 0

    def running(self) -> DaemonProcess:
        daemon = self.daemon
        if daemon is None or daemon.proc is None or daemon.proc.poll() is not None:
            self.starts += 1
            daemon = DaemonProcess(self.env, self.tmp / f"daemon-{self.starts}.log")
            self.daemon = daemon.start().wait_ready()
        return daemon


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    # Traversable by others, like a home made under umask 022: what keeps another user
    # out must be the socket itself.
    tmp = Path(tempfile.mkdtemp(prefix="pinclaw-local-"))
    tmp.chmod(0o755)
    with FakeLLM() as llm:
        state = Shared(tmp, llm)
        yield state
        if state.daemon is not None:
            state.daemon.ensure_stopped()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def local(shared: Shared) -> Shared:
    shared.llm.reset()
    shared.running()
    return shared


def agent(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`agent ARGS` as the user runs it (stdin not a terminal), and the heavy modules it
    loaded."""
    result = subprocess.run(
        [sys.executable, "-c", CLIENT, *args], capture_output=True, text=True, env=env,
        cwd=REPO, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    *rest, loaded = result.stderr.splitlines()
    assert loaded.startswith("loaded:"), result.stderr
    result.stderr = "".join(line + "\n" for line in rest)
    return result, [name for name in loaded.removeprefix("loaded:").strip().split(",") if name]


def one_shots_in(daemon: DaemonProcess) -> int:
    return daemon.log.count("one-shot from the local socket")


def test_a_one_shot_is_answered_by_the_daemon_with_a_thin_client(local: Shared) -> None:
    local.llm.script(
        tool_calls(("file_write", {"path": "note.txt", "content": "kept by the daemon"})),
        tool_calls(("shell", {"command": "cat note.txt"})),
        text("The note says: kept by the daemon"),
    )
    result, loaded = agent(local.env, "run", "-m", "write a note and read it")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The note says: kept by the daemon\n"
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        '  tool file_write(path="note.txt", content="kept by the daemon") ok'
    )
    assert lines[1].startswith('  tool shell(command="cat note.txt") ok')
    assert lines[2].startswith("[turn ended: done; 2 tool calls; ")
    assert len(lines) == 3
    assert loaded == []  # neither LiteLLM nor pydantic nor asyncio, not even click or typing
    assert one_shots_in(local.running()) == 1
    assert (local.home / "workspace" / "note.txt").read_text() == "kept by the daemon"


def test_a_turn_that_fails_exits_1_with_one_line(local: Shared) -> None:
    before = one_shots_in(local.running())
    local.llm.script(error(500, "the provider is down"))
    result, _ = agent(local.env, "run", "-m", "hello?")
    assert result.returncode == 1
    assert result.stdout == ""
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [
        result.stderr.strip()
    ]
    assert "Traceback" not in result.stderr
    assert one_shots_in(local.running()) == before + 1


def test_sessions_continue_only_when_named(local: Shared) -> None:
    for message in ("first", "second"):
        result, _ = agent(local.env, "run", "-m", message, "--session", "work")
        assert result.returncode == 0, result.stderr
    result, _ = agent(local.env, "run", "-m", "third")
    assert result.returncode == 0 and result.stdout.endswith("third\n")
    contents = [[m["content"] for m in r["messages"][1:]] for r in local.llm.requests]
    assert any("first" in c for c in contents[1]) and "echo: " in contents[1][1]
    assert len(contents[2]) == 1  # a one-shot without --session starts afresh
    status, _ = agent(local.env, "run", "-m", "/status", "--session", "work")
    assert status.returncode == 0 and "[turn ended" not in status.stderr  # no turn ran
    assert len(local.llm.requests) == 3


def test_a_session_name_not_utf8_is_refused_in_one_line_not_sent(local: Shared) -> None:
    """A Latin-1 terminal's `--session caf\\xe9` (a lone surrogate in argv): it cannot be
    written on the socket; click refuses it in one line before the daemon is asked."""
    before = one_shots_in(local.running())
    result, _ = agent(local.env, "run", "-m", "hello", "--session", "caf\udce9")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: --session: ") and "Traceback" not in result.stderr
    assert one_shots_in(local.running()) == before and local.llm.requests == []


def test_a_message_not_utf8_is_answered_by_the_daemon_repaired(local: Shared) -> None:
    """A Latin-1 terminal's `-m caf\\xe9` (a lone surrogate in argv): it travels as a JSON
    escape and the daemon repairs it as it repairs a chat message, not a traceback."""
    before = one_shots_in(local.running())
    result, _ = agent(local.env, "run", "-m", "caf\udce9 au lait")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.endswith("\ncaf\ufffd au lait\n")  # the echo of its envelope
    assert one_shots_in(local.running()) == before + 1


def test_no_terminal_means_an_approval_is_denied_at_once(local: Shared) -> None:
    keep = local.home / "workspace" / "keep.txt"
    keep.write_text("precious\n")
    local.llm.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("done"))
    result, _ = agent(local.env, "run", "-m", "delete keep.txt")
    assert result.returncode == 0, result.stderr
    assert "Approve shell: rm keep.txt" in result.stderr
    assert "Denied: no terminal to ask on." in result.stderr
    assert keep.read_text() == "precious\n" and result.stdout == "done\n"


def test_a_terminal_answers_the_daemons_question(local: Shared) -> None:
    keep = local.home / "workspace" / "keep.txt"
    keep.write_text("precious\n")
    local.llm.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("done"))
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "-m", "delete keep.txt"], stdin=child,
        stdout=subprocess.PIPE, stderr=child, env=local.env, cwd=REPO,
    )  # fmt: skip
    os.close(child)
    screen = b""
    try:
        while b"Allow? [y/N/a(lways)]" not in screen:
            ready, _, _ = select.select([main], [], [], 20)
            assert ready, screen
            screen += os.read(main, 4096)
        os.write(main, b"y\n")
        assert process.communicate(timeout=30)[0] == b"done\n"
    finally:
        process.kill()
        os.close(main)
    assert process.returncode == 0
    assert not keep.exists()
    assert one_shots_in(local.running()) >= 1


def as_another_user(home: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """The one-shot client run by uid 65534 (a forked child that drops root: no interpreter
    needs to be executable by that user). Its exit status and what it printed."""
    from agent.cli.local_client import run_one_shot

    fingerprint = settings_fingerprint(None, env)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            # pytest-socket guards connect(): the child may reach Unix sockets, nothing else.
            pytest_socket.socket_allow_hosts(["127.0.0.1", "::1"], allow_unix_socket=True)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            said = io.StringIO()
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                code = run_one_shot(home, "let me in", None, fingerprint)
            os.write(writer, json.dumps([code, said.getvalue()]).encode())
        except BaseException as exc:
            os.write(writer, json.dumps([None, f"{type(exc).__name__}: {exc}"]).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    code, said = json.loads(answer)
    return code, said


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_cannot_use_the_daemon(local: Shared) -> None:
    sock = local.home / "agent.sock"
    assert sock.stat().st_mode & 0o777 == 0o600
    code, said = as_another_user(local.home, local.env)
    assert code == 2, said
    assert "permission denied (it belongs to another user)" in said
    sock.chmod(0o666)  # even with the file (and the 0700 home) opened up, the daemon checks
    local.home.chmod(0o711)  # who is calling
    try:
        code, said = as_another_user(local.home, local.env)
    finally:
        sock.chmod(0o600)
        local.home.chmod(0o700)
    assert code == 2, said
    assert "error: the pinclaw daemon serves only its own user" in said
    assert local.llm.requests == []
    assert "refused a client of uid 65534" in local.running().log


def test_a_process_of_the_same_user_without_the_token_is_refused(local: Shared) -> None:
    """What a command the agent runs could do under Landlock: name the socket and connect
    (same uid), but not read the lock file the sandbox hides."""
    request = {"op": "run", "message": "tell me the owner's secrets", "session": None,
               "settings": settings_fingerprint(None, local.env), "tty": False}  # fmt: skip
    code = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(sys.argv[1])\n"
        "s.sendall(sys.argv[2].encode() + b'\\n')\n"
        "print(s.makefile().read(), end='')\n"
    )
    sock = str(local.home / "agent.sock")
    said = subprocess.run([sys.executable, "-c", code, sock, json.dumps(request)],
                          capture_output=True, text=True, timeout=20)  # fmt: skip
    assert json.loads(said.stdout) == {
        "event": "error",
        "message": "not a client of this daemon (no token from its lock file)",
        "code": 2,
    }
    assert local.llm.requests == []
    assert (local.home / "agent.lock").stat().st_mode & 0o777 == 0o600


def test_the_daemon_killed_mid_answer_is_a_clear_error_then_one_shots_run_here(
    local: Shared,
) -> None:
    daemon = local.running()
    local.llm.outage(20, mode="hang")  # the turn waits; reset() below ends it
    client = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "-m", "take your time"], env=local.env,
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: len(local.llm.requests) == 1, 20, "the turn began", daemon)
        daemon.kill9()
        out, err = client.communicate(timeout=20)
    finally:
        client.kill()
    assert client.returncode == 1
    assert out == ""
    assert err.startswith(GONE)
    assert (local.home / "agent.sock").exists()  # stale: nobody listens on it
    local.llm.reset()
    result, loaded = agent(local.env, "run", "-m", "anyone there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("anyone there?\n")
    assert "httpx" in loaded  # answered in this process (the fake's model: served directly)


def test_the_daemon_has_the_first_prompt_read_ahead_as_a_turn_sends_it(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        env = Shared(tmp_path, llm).env
        daemon = DaemonProcess(env, tmp_path / "daemon.log").start().wait_ready()
        soul = tmp_path / "home" / "workspace" / "SOUL.md"
        try:
            wait_until(lambda: "read the cli prompt ahead" in daemon.log, 30, "read-ahead", daemon)
            result, _ = agent(env, "run", "-m", "first words")
            assert result.returncode == 0 and result.stdout.endswith("first words\n")
            # A workspace file changed (by the owner here; by a turn as often): the prompt it
            # makes is read again before the next message needs it, and only once.
            soul.write_text("Answer like a ship's captain.\n")
            wait_until(lambda: len(llm.read_aheads) == 2, 30, "the new prompt read", daemon)
            result, _ = agent(env, "run", "-m", "second words")
            assert result.returncode == 0 and result.stdout.endswith("second words\n")
            # Changed while a turn runs: read once the turn is over, not between its requests.
            llm.script(text("slow words", delay_s=4 * READ_AGAIN_EVERY_S))
            slow = subprocess.Popen(
                [sys.executable, "-m", "agent", "run", "-m", "take your time"], env=env,
                cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            wait_until(lambda: len(llm.requests) == 3, 20, "the slow turn began", daemon)
            soul.write_text("Answer like a lighthouse keeper.\n")
            time.sleep(2.5 * READ_AGAIN_EVERY_S)
            assert len(llm.read_aheads) == 2 and slow.poll() is None  # the turn still runs
            assert slow.communicate(timeout=30)[0].endswith("slow words\n")
            wait_until(lambda: len(llm.read_aheads) == 3, 30, "read after the turn", daemon)
            time.sleep(3 * READ_AGAIN_EVERY_S)
        finally:
            daemon.ensure_stopped()
        ahead, again, after_turn = llm.read_aheads
        first, second, _ = llm.requests
        assert "lighthouse keeper" in after_turn["messages"][0]["content"]
        # What the server read ahead is where the first turn's request begins, to the byte.
        assert ahead["messages"] == [first["messages"][0], {"role": "user", "content": ""}]
        assert ahead["tools"] == first["tools"] and ahead["max_tokens"] == 1
        assert "ship's captain" in again["messages"][0]["content"]
        assert again["messages"] == [second["messages"][0], {"role": "user", "content": ""}]
        env["PINCLAW_LLM__READ_AHEAD"] = "false"
        daemon = DaemonProcess(env, tmp_path / "again.log").start().wait_ready()
        try:
            wait_until(lambda: "warmed up" in daemon.log, 30, "warm-up", daemon)
        finally:
            daemon.ensure_stopped()
        assert len(llm.read_aheads) == 3 and "read the" not in daemon.log


async def test_a_hosted_model_is_never_sent_a_read_ahead(fake_llm: FakeLLM) -> None:
    from agent.config import LLMSettings
    from agent.model.client import LLMClient

    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", fake_llm.base_url)  # OpenAI itself, as far as it knows
        env.setenv("OPENAI_API_KEY", "sk-test-key-not-real-0000")
        hosted = LLMClient(LLMSettings(model="openai/gpt-4o-mini"))
        assert not await hosted.read_ahead([{"role": "user", "content": ""}], None)
    assert fake_llm.read_aheads == [] and fake_llm.requests == []


def test_no_daemon_answers_in_process(local: Shared) -> None:
    daemon = local.running()
    before = one_shots_in(daemon)
    forced, loaded = agent(local.env, "run", "-m", "here please", "--no-daemon")
    assert forced.returncode == 0 and forced.stdout.endswith("here please\n")
    assert "httpx" in loaded
    assert one_shots_in(daemon) == before


def test_a_daemon_with_other_settings_leaves_the_one_shot_to_this_process(local: Shared) -> None:
    daemon = local.running()
    before = one_shots_in(daemon)
    other = {**local.env, "PINCLAW_LLM__TEMPERATURE": "0.25"}
    result, loaded = agent(other, "-v", "run", "-m", "warmer?")
    assert result.returncode == 0 and "httpx" in loaded
    declined = "the daemon declined: it runs with other settings: PINCLAW_LLM__TEMPERATURE"
    assert result.stderr.count(declined) == 1  # asked once, before click and not again
    assert local.llm.requests[-1]["temperature"] == 0.25
    assert one_shots_in(daemon) == before
    secret = {**local.env, "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": "123:not-in-the-daemon"}
    result, loaded = agent(secret, "run", "-m", "a token is no setting")
    assert result.returncode == 0 and loaded == []  # secrets do not part them
    assert one_shots_in(daemon) == before + 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "-m", "hi"], PlainOneShot("hi")),
        (["run", "--message=hi there", "--session", "s"], PlainOneShot("hi there", "s")),
        (["-vv", "--config", "c.toml", "run", "-mhi"], PlainOneShot("hi", None, "c.toml", 2)),
        (["--config=c.toml", "-q", "run", "--session=s", "-m", "-v"],
         PlainOneShot("-v", "s", "c.toml")),
        (["run", "-m", "hi", "--no-daemon"], None),  # click reads everything else
        (["run", "-m", "-"], None),  # standard input
        (["run", "-m", "  "], None),  # click says it is empty
        (["run", "-m", "a", "-m", "b"], None),
        (["run", "-m"], None),
        (["run", "--session", "s"], None),  # serve, not a one-shot
        (["run", "-m", "hi", "--session", "caf\udce9"], None),  # not UTF-8: click says so
        (["run"], None),
        (["-q", "-v", "run", "-m", "hi"], None),
        (["-vq", "run", "-m", "hi"], None),
        (["--help"], None),
        (["chat"], None),
        ([], None),
    ],
)  # fmt: skip
def test_only_a_plain_one_shot_skips_click(args: list[str], expected: PlainOneShot | None) -> None:
    assert plain_one_shot(args) == expected


def test_a_second_daemon_for_the_same_home_exits_2(local: Shared) -> None:
    first = local.running()
    second = DaemonProcess(local.env, local.tmp / "second.log").start()
    assert second.proc is not None
    assert second.proc.wait(60) == 2
    assert first.proc is not None
    assert f"another pinclaw daemon runs for this home (pid {first.proc.pid})" in second.log
    result, loaded = agent(local.env, "run", "-m", "still you?")
    assert result.returncode == 0 and loaded == []


def test_doctor_says_whether_the_daemon_runs(local: Shared, tmp_path: Path) -> None:
    daemon = local.running()
    assert daemon.proc is not None
    doctor, _ = agent(local.env, "doctor")
    sock = local.home / "agent.sock"
    assert f"note daemon: running (pid {daemon.proc.pid}) on {sock}" in doctor.stdout
    elsewhere = {**local.env, "PINCLAW_HOME": str(tmp_path / "other")}
    doctor, _ = agent(elsewhere, "doctor")
    assert "note daemon: not running (one-shots start cold)" in doctor.stdout


def test_every_secret_setting_is_left_out_of_the_fingerprint() -> None:
    from agent.config import Settings, secret_keys

    for dotted in secret_keys(Settings):
        name = "PINCLAW_" + dotted.replace(".", "__").upper()
        assert settings_fingerprint(None, {name: "a"}) == settings_fingerprint(None, {}), name
    assert settings_fingerprint(None, {"PINCLAW_LLM__MODEL": "x"}) != settings_fingerprint(None, {})


# -- agent service install -------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_the_service_file_starts_agent_run_with_the_env_file_and_restarts_on_failure(
    platform: str, tmp_path: Path
) -> None:
    home, user = tmp_path / "pinclaw home", tmp_path / "user"
    argv = command_line(sys.executable, Path("/etc/pin claw/config.toml"))
    assert argv == [
        *(sys.executable, "-P", "-m", "agent", "--config", "/etc/pin claw/config.toml", "run")
    ]
    found = service_file(platform, argv=argv, home=home, user_home=user, environ={})
    home.mkdir()
    (home / "agent.env").write_text("# a comment\nFROM_ENV_FILE=read\n")
    shown = [sys.executable, "-c", "import os, sys; print(os.environ['FROM_ENV_FILE'], sys.argv)"]
    if platform == "linux":
        assert found.path == user / ".config" / "systemd" / "user" / "pinclaw.service"
        lines = found.text.splitlines()
        (exec_start,) = [line for line in lines if line.startswith("ExecStart=")]
        assert shlex.split(exec_start.removeprefix("ExecStart=")) == argv
        assert f'Environment="PINCLAW_HOME={home}"' in lines
        assert f'EnvironmentFile=-"{home}/agent.env"' in lines
        assert {"Restart=on-failure", "Delegate=yes", "WantedBy=default.target"} <= set(lines)
        assert found.next_steps[0] == (
            "systemctl --user daemon-reload && systemctl --user enable --now pinclaw"
        )
        return
    plist = plistlib.loads(found.text.encode())
    assert found.path == user / "Library" / "LaunchAgents" / "dev.pinclaw.agent.plist"
    assert plist["Label"] == "dev.pinclaw.agent"
    assert plist["ProgramArguments"][-len(argv) :] == argv
    assert plist["EnvironmentVariables"] == {"PINCLAW_HOME": str(home)}
    assert plist["KeepAlive"] == {"SuccessfulExit": False} and plist["RunAtLoad"] is True
    # The shell in front reads agent.env, then becomes the command: run it for real.
    wrapper = plist["ProgramArguments"][: -len(argv)]
    ran = subprocess.run([*wrapper, *shown, "x y"], capture_output=True, text=True,
                         env={"PINCLAW_HOME": str(home), "PATH": os.environ["PATH"]})  # fmt: skip
    assert ran.stdout == "read ['-c', 'x y']\n", ran.stderr


def test_the_service_runs_this_installation_whatever_its_folder_holds(tmp_path: Path) -> None:
    """systemd starts a user's unit in their home folder. A script of one's own named agent.py
    there, or a package a model wrote into a workspace that is that folder, must not be what
    runs (nor a module of that name shadow one pinclaw imports)."""
    unit = service_file("linux", argv=command_line(sys.executable, None), home=tmp_path / "h",
                        user_home=tmp_path, environ={}).text  # fmt: skip
    (exec_start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    planted = tmp_path / "planted-code-ran"
    for name in ("agent.py", "click.py"):
        (tmp_path / name).write_text(f"open({str(planted)!r}, 'w').close()\n")
    ran = subprocess.run([*argv[:-1], "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.stdout.startswith("pinclaw, version") and not planted.exists(), ran.stderr


def test_service_install_writes_the_unit_and_a_private_env_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCLAW_", "XDG_"))}
    env |= {"HOME": str(tmp_path), "PINCLAW_HOME": str(tmp_path / "home")}
    shown, loaded = agent(env, "service", "install", "--print")
    assert shown.returncode == 0, shown.stderr
    assert f"ExecStart={sys.executable} -P -m agent run" in shown.stdout
    assert not (tmp_path / ".config").exists() and not (tmp_path / "home").exists()
    assert [name for name in loaded if name not in ("typing", "json", "socket")] == ["click"]
    result, _ = agent(env, "service", "install")
    assert result.returncode == 0, result.stderr
    unit = tmp_path / ".config" / "systemd" / "user" / "pinclaw.service"
    assert unit.read_text() == shown.stdout
    env_file = tmp_path / "home" / "agent.env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert "OPENAI_API_KEY=sk-..." in env_file.read_text()
    assert "systemctl --user daemon-reload && systemctl --user enable --now pinclaw" in (
        result.stdout
    )
    env_file.write_text("OPENAI_API_KEY=mine\n")
    assert agent(env, "service", "install")[0].returncode == 0
    assert env_file.read_text() == "OPENAI_API_KEY=mine\n"  # never overwritten
