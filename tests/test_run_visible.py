"""What `agent run` shows a person without -v: a line per thing the daemon starts and one when
it stops, warnings as they happen, nothing with -q but errors; a one-shot's spinner and
coloured tool lines on a terminal, and none of it when stderr is piped; `-m -` and an empty
message. Every command runs as a subprocess, as the user runs it."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import REPO, DaemonProcess, agent, env_of, wait_until
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

SKIPPED = re.compile(
    r"pinclaw: warning: telegram: update \d+ could not be read and is skipped: TypeError: .+"
)
# dim, its outcome green: as agent/cli/one_shot_screen.py's `paint` writes it
TOOL_OK = re.compile(
    re.escape('\x1b[2m  tool shell(command="echo hi") \x1b[0m\x1b[32mok\x1b[0m\x1b[2m ')
    + r"\d+\.\d\d s"
    + re.escape("\x1b[0m")
)
SUMMARY = re.compile(r"\x1b\[2m\[turn ended: done; 1 tool calls; \d+\+\d+ tokens\]\x1b\[0m\r\n")
PIPED = (
    r'  tool shell\(command="echo hi"\) ok \d+\.\d\d s\n'
    r"\[turn ended: done; 1 tool calls; \d+\+\d+ tokens\]\n"
)


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.ensure_stopped()


def start(daemons: list[DaemonProcess], tmp_path: Path, *flags: str) -> DaemonProcess:
    daemon = DaemonProcess(env_of(), tmp_path / f"run-{len(daemons)}.log", flags).start()
    daemons.append(daemon)
    return daemon


def test_agent_run_says_what_it_starts_warns_and_stops(
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    daemons: list[DaemonProcess],
    tmp_path: Path,
) -> None:
    daemon = start(daemons, tmp_path)
    wait_until(lambda: "schedules" in daemon.log, 60, "the schedules' line", daemon)
    home = Path(telegram_env["PINCLAW_HOME"])
    assert daemon.log.splitlines() == [
        f"pinclaw: serving one-shots on {home / 'agent.sock'}",
        "pinclaw: telegram connected as @pinclaw_test_bot",
        "pinclaw: no schedules yet",
    ]
    fake_telegram.inject_unparseable_message(42, 42)
    wait_until(lambda: "warning" in daemon.log, 30, "the warning", daemon)
    again = agent("-q", "run")  # -q keeps the errors: another daemon runs for this home
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "error: " in again.stderr and "stop it first" in again.stderr
    assert daemon.terminate() == 0
    *started, warned, stopped = daemon.log.splitlines()
    assert len(started) == 3 and SKIPPED.fullmatch(warned), daemon.log
    assert stopped == "pinclaw: stopped"


def test_quiet_says_nothing_of_starts_stops_or_warnings(
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    daemons: list[DaemonProcess],
    tmp_path: Path,
) -> None:
    daemon = start(daemons, tmp_path, "-q")
    wait_until(lambda: fake_telegram.polls_begun > 0, 60, "polling", daemon)
    update = fake_telegram.inject_unparseable_message(42, 42)

    def skipped() -> bool:  # a later poll's offset acknowledges it
        return any((offset or 0) > update for offset in fake_telegram.poll_offsets)

    wait_until(skipped, 30, "the unreadable update skipped", daemon)
    assert daemon.terminate() == 0
    assert daemon.log == ""


def test_agent_run_with_no_channel_names_the_board_it_connected(
    llm_env: dict[str, str],
    emulator: FirmataBoard,
    daemons: list[DaemonProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in [
        ("ENABLED", "true"),
        ("PORT", str(emulator.path)),
        ("CONNECT_ON_START", "true"),
    ]:
        monkeypatch.setenv(f"PINCLAW_HARDWARE__{name}", value)
    daemon = start(daemons, tmp_path)
    wait_until(lambda: "schedules" in daemon.log, 60, "the schedules' line", daemon)
    assert daemon.terminate() == 0
    assert daemon.log.splitlines() == [
        f"pinclaw: serving one-shots on {Path(llm_env['PINCLAW_HOME']) / 'agent.sock'}",
        f"pinclaw: board on {emulator.path}: Arduino Uno/Nano (ATmega328P), StandardFirmata 2.5",
        "pinclaw: no chat channel is enabled",
        "pinclaw: no schedules yet",
        "pinclaw: stopped",
    ]


def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`agent ARGS` with stderr on a pseudo-terminal (stdout piped, no stdin): the exit
    status, stdout, and every byte the terminal got."""
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    master, slave = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", *args],
        cwd=REPO,
        env={**base, "TERM": "xterm-256color"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every end of the terminal's other side is closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    assert process.stdout is not None
    out = process.stdout.read().decode()
    return process.wait(10), out, screen.decode()


def spinner_said(screen: str, label: str) -> bool:
    return re.search(rf"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\x1b\[0m \x1b\[2m{label}", screen) is not None


def test_a_cold_one_shot_on_a_terminal_spins_and_colours_its_tool_lines(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_calls(("shell", {"command": "echo hi"})), text("hi!", delay_s=0.5))
    code, out, screen = on_a_terminal("run", "-m", "say hi")
    assert code == 0 and out == "hi!\n", screen
    assert spinner_said(screen, "starting") and spinner_said(screen, "thinking"), screen
    assert TOOL_OK.search(screen), screen
    assert SUMMARY.search(screen), screen
    assert screen.index("starting") < TOOL_OK.search(screen).start() < screen.rindex("thinking")
    assert "hi!" not in screen  # the reply is on stdout alone
    assert screen.rindex("\x1b[?25h") > screen.rindex("thinking")  # the spinner put away


def test_the_same_one_shot_piped_has_no_escape_sequences(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_calls(("shell", {"command": "echo hi"})), text("done"))
    result = agent("run", "-m", "say hi", env={"TERM": "xterm-256color"})
    assert result.returncode == 0 and result.stdout == "done\n"
    assert re.fullmatch(PIPED, result.stderr), result.stderr


def test_a_one_shot_through_the_daemon_colours_its_tool_lines_the_same(
    llm_env: dict[str, str], fake_llm: FakeLLM, daemons: list[DaemonProcess], tmp_path: Path
) -> None:
    start(daemons, tmp_path, "-v").wait_ready()
    fake_llm.script(tool_calls(("shell", {"command": "echo hi"})), text("hi!", delay_s=0.5))
    code, out, screen = on_a_terminal("run", "-m", "say hi")
    assert code == 0 and out == "hi!\n", screen
    assert spinner_said(screen, "thinking") and "starting" not in screen, screen
    assert TOOL_OK.search(screen), screen
    assert SUMMARY.search(screen), screen
    assert "one-shot from the local socket" in daemons[0].log  # the daemon answered it


def test_message_dash_reads_all_of_stdin(llm_env: dict[str, str], fake_llm: FakeLLM) -> None:
    result = agent("run", "-m", "-", input="first line\nsecond line\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("echo: ") and "first line\nsecond line" in result.stdout
    [request] = fake_llm.requests
    assert "first line\nsecond line" in str(request["messages"][-1]["content"])


@pytest.mark.parametrize(
    ("args", "stdin"), [(("-m", ""), ""), (("-m", "-"), ""), (("-m", "-"), " \n")]
)
def test_an_empty_message_is_refused_without_calling_the_model(
    llm_env: dict[str, str], fake_llm: FakeLLM, args: tuple[str, ...], stdin: str
) -> None:
    result = agent("run", *args, input=stdin)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: the message is empty\n"
    assert fake_llm.requests == []


def test_the_lines_for_the_board_and_the_schedules_read_as_counted() -> None:
    from agent.daemon.status import Proactive, board_line, lazy_board_line

    uno = board_line("/dev/ttyACM0", "Arduino Uno/Nano (ATmega328P)", "StandardFirmata.ino", "2.5")
    assert uno == "board on /dev/ttyACM0: Arduino Uno/Nano (ATmega328P), StandardFirmata 2.5"
    assert lazy_board_line("auto").startswith("board on the first Arduino port found, ")
    assert Proactive(3, 1, 30.0).line() == "3 schedules, 1 pin watch, heartbeat every 30 min"
    assert Proactive(1, 2, None).line() == "1 schedule, 2 pin watches"
    assert Proactive(0, 0, 15.0).line() == "no schedules yet, heartbeat every 15 min"
