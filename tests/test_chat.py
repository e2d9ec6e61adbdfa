"""`agent chat` as a person uses it: a subprocess on a pseudo-terminal that is its
controlling terminal (so Ctrl-C is a signal, as in a real one), or with stdin piped, the fake
LLM behind it. The tests assert what the terminal shows and what the world holds.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import eventually
from daemon_process import DaemonProcess, env_of, wait_until
from fakes.llm_server import (
    FakeLLM,
    Reply,
    delay,
    last_user_content,
    text,
    tool_calls,
    tool_results,
)

REPO = Path(__file__).resolve().parent.parent
# The child makes the pty its controlling terminal, then becomes `agent`.
BOOT = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'agent', *sys.argv[1:]])"
)
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]")
UP, CTRL_C, CTRL_D = "\x1b[A", "\x03", "\x04"
# Streamed in three pieces (tests/fakes/llm_server.py cuts a reply in thirds): the first is
# the whole bold phrase, so no half-written Markdown ever reaches the screen.
MARKDOWN = "**Bold** news:\n\n- first item\n- second item"


class Terminal:
    """`agent chat ARGS` on a 100x30 pseudo-terminal; `expect` reads on until a text shows
    after what was expected before."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self._main, child = os.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {
            **os.environ,
            **env,
            "TERM": "xterm-256color",
            "COLUMNS": "100",  # pytest-xdist's workers have 80
            "LINES": "30",
            "PROMPT_TOOLKIT_NO_CPR": "1",  # no terminal here answers where the cursor is
        }
        env.pop("NO_COLOR", None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "chat", *args],
            stdin=child, stdout=child, stderr=child, env=env, cwd=REPO, start_new_session=True,
        )  # fmt: skip
        os.close(child)
        self.raw = b""
        self._mark = 0

    @property
    def screen(self) -> str:
        """What was written, escape sequences taken out."""
        return ESCAPES.sub("", self.raw.decode(errors="replace")).replace("\r", "")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._main], [], [], timeout)
        if ready:
            try:
                chunk = os.read(self._main, 65536)
            except OSError:  # EIO: the chat has ended
                return False
            self.raw += chunk
            return bool(chunk)
        return True

    def expect(self, wanted: str, within: float = 30) -> float:
        """Wait until `wanted` shows after the last text expected; the seconds it took."""
        started = time.monotonic()
        while (found := self.screen.find(wanted, self._mark)) < 0:
            assert time.monotonic() - started < within, f"no {wanted!r} on:\n{self.screen}"
            assert self._read(0.05), f"the chat ended before {wanted!r}:\n{self.screen}"
        self._mark = found + len(wanted)
        return time.monotonic() - started

    def type(self, keys: str) -> None:
        """`keys`, once the chat reads its terminal raw, as prompt_toolkit does while it waits
        for a line: typed a moment sooner, into the line discipline's cooked mode, a Ctrl-D
        is taken as end-of-file and never reaches the prompt (a loaded machine showed it)."""
        deadline = time.monotonic() + 10
        while termios.tcgetattr(self._main)[3] & termios.ICANON and time.monotonic() < deadline:
            self._read(0.01)
        os.write(self._main, keys.encode())

    def leave(self) -> int:
        """Ctrl-D at the (empty) prompt; the exit status once everything was read."""
        self.expect("›")
        self.type(CTRL_D)
        code = self.process.wait(timeout=30)
        while self._read(0.1) and select.select([self._main], [], [], 0)[0]:
            pass
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._main)


@pytest.fixture
def chat(llm_env: dict[str, str]) -> Iterator[type[Terminal]]:
    """Terminals opened by the test, closed after it."""
    opened: list[Terminal] = []

    class Opened(Terminal):
        def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
            super().__init__({**llm_env, **(env or {})}, *args)
            opened.append(self)

    yield Opened
    for terminal in opened:
        terminal.close()


def send(terminal: Terminal, line: str) -> None:
    terminal.expect("›")
    terminal.type(line + "\r")


def asked(fake_llm: FakeLLM, count: int) -> None:
    """Until the model was asked `count` times."""
    wait_until(lambda: len(fake_llm.requests) >= count, 30, f"{count} requests to the model")


def test_a_streamed_markdown_answer_is_drawn_as_it_comes(
    chat: type[Terminal], fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply(content=MARKDOWN, piece_delay_s=0.5))
    terminal = chat()
    terminal.expect("answered in this process")
    send(terminal, "the news?")
    terminal.expect("Bold news:")
    assert "second item" not in terminal.screen  # shown before the reply was whole
    terminal.expect("• first item")
    terminal.expect("• second item")
    assert terminal.leave() == 0
    assert "**" not in terminal.screen
    assert re.search(r"\x1b\[1m(\x1b\[[0-9;]*m)*Bold", terminal.raw.decode()), "not bold"
    assert fake_llm.requests[0]["stream"] is True


def test_a_tool_call_is_shown_with_its_time(
    chat: type[Terminal], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(tool_calls(("file_list", {})), text("Your workspace holds *AGENTS.md*."))
    terminal = chat()
    send(terminal, "what is in the workspace?")
    terminal.expect("tool file_list() ok ")
    assert re.search(r"tool file_list\(\) ok \d+\.\d\d s\n", terminal.screen)
    terminal.expect("Your workspace holds AGENTS.md.")
    assert terminal.leave() == 0
    assert "AGENTS.md" in tool_results(fake_llm.requests[1])[0]


def test_an_approval_is_asked_inline_and_the_answer_decides(
    chat: type[Terminal], fake_llm: FakeLLM, home: Path
) -> None:
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("precious\n")
    fake_llm.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("Deleted it."))
    terminal = chat()
    send(terminal, "delete keep.txt")
    terminal.expect("Approve shell: rm keep.txt")
    terminal.expect("Allow? [y/N/a(lways)]")
    assert keep.exists()  # nothing runs before the answer
    terminal.type("y\r")
    terminal.expect('tool shell(command="rm keep.txt") ok')
    terminal.expect("Deleted it.")
    assert terminal.leave() == 0
    assert not keep.exists()
    assert tool_results(fake_llm.requests[1])[0].startswith("exit code: 0")


def test_ctrl_c_stops_a_slow_answer_and_the_prompt_comes_back(
    chat: type[Terminal], fake_llm: FakeLLM
) -> None:
    fake_llm.script(delay(30, text("far too late")), text("Still here."))
    terminal = chat()
    send(terminal, "take your time")
    asked(fake_llm, 1)  # the model is at work: the answer is under way
    terminal.type(CTRL_C)
    assert terminal.expect("Stopped.") < 10
    send(terminal, "are you there?")
    terminal.expect("Still here.")
    assert terminal.leave() == 0
    assert "far too late" not in terminal.screen


def test_alt_enter_and_a_trailing_backslash_make_one_message_of_lines(
    chat: type[Terminal], fake_llm: FakeLLM
) -> None:
    terminal = chat()
    terminal.expect("›")
    terminal.type("first line\\\rsecond line\x1b\rthird line")
    terminal.expect("… third line")  # the prompt goes on, nothing sent yet
    assert fake_llm.requests == []
    terminal.type("\r")
    terminal.expect("echo:")
    assert terminal.leave() == 0
    assert last_user_content(fake_llm.requests[0]).endswith("first line\nsecond line\nthird line")


def test_history_is_kept_across_runs(chat: type[Terminal], home: Path) -> None:
    first = chat()
    send(first, "remember the blue door")
    first.expect("remember the blue door")  # the echo's reply
    assert first.leave() == 0
    history = home / "chat_history"
    assert history.stat().st_mode & 0o777 == 0o600
    assert "+remember the blue door" in history.read_text()

    second = chat()
    second.expect("›")
    second.type(UP)
    second.expect("remember the blue door")  # the line, back at the prompt
    second.type("\r")
    second.expect("] remember the blue door")  # and answered again
    assert second.leave() == 0


def test_ctrl_c_at_an_empty_prompt_leaves_and_says_how_to_resume(chat: type[Terminal]) -> None:
    terminal = chat()
    terminal.expect("pinclaw chat · session chat-")
    session = terminal.screen.split("session ", 1)[1].split()[0]
    terminal.expect("›")
    terminal.type(CTRL_C)
    assert terminal.process.wait(timeout=30) == 0
    terminal.expect(f"resume with: agent chat --session {session}")


def test_piped_lines_are_turns_of_one_session_in_plain_text(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        text("**First** answer."),
        tool_calls(("file_list", {})),
        text("Second answer."),
    )
    piped = chat_piped(llm_env, "hello\n\nlist the files\n/status\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("**First** answer.\nSecond answer.\nModel: openai/test-model")
    assert "\x1b" not in piped.stdout + piped.stderr  # no colour, no spinner
    assert re.search(r"^  tool file_list\(\) ok \d+\.\d\d s$", piped.stderr, re.MULTILINE)
    session = re.search(r"session (chat-\S+) \(new\) · answered in this process", piped.stderr)
    assert session is not None, piped.stderr
    assert len(fake_llm.requests) == 3  # the empty line is no turn, /status no model call
    assert "hello" in str(fake_llm.requests[1]["messages"])  # one session: the first turn too

    resumed = chat_piped(llm_env, "and now?\n", "--session", session[1])
    assert resumed.returncode == 0, resumed.stderr
    assert "list the files" in str(fake_llm.requests[-1]["messages"])


async def test_a_chat_in_this_process_has_its_prompt_read_ahead_while_the_line_is_typed(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    from agent.cli.chat.in_process import InProcess
    from agent.cli.chat.view import PlainView
    from agent.config import load_settings

    chat = await InProcess.open(load_settings(), "typed-slowly", lambda: None)
    try:
        await eventually(lambda: fake_llm.read_aheads, what="the prompt read ahead")
        assert await chat.turn("hello", PlainView())
    finally:
        await chat.close()
    [ahead] = fake_llm.read_aheads
    [first] = fake_llm.requests
    assert ahead["messages"] == [first["messages"][0], {"role": "user", "content": ""}]
    assert ahead["tools"] == first["tools"]


def chat_piped(env: dict[str, str], lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "chat", *args], input=lines, capture_output=True,
        text=True, env={**os.environ, **env}, cwd=REPO, timeout=60,
    )  # fmt: skip


def test_the_running_daemon_serves_the_chat(
    chat: type[Terminal], llm_env: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    daemon = DaemonProcess(env_of(**llm_env), tmp_path / "daemon.log").start()
    try:
        daemon.wait_ready()
        fake_llm.script(Reply(content=MARKDOWN, piece_delay_s=0.5), delay(30, text("far too late")))
        terminal = chat()
        terminal.expect("answered by the daemon")
        send(terminal, "the news?")
        terminal.expect("Bold news:")
        assert "second item" not in terminal.screen  # streamed over the socket too
        terminal.expect("• second item")
        send(terminal, "take your time")
        asked(fake_llm, 2)
        terminal.type(CTRL_C)
        assert terminal.expect("Stopped.") < 10
        send(terminal, "/status")
        terminal.expect("ended: cancelled")  # the daemon's runtime stopped the turn
        assert terminal.leave() == 0
        assert "**" not in terminal.screen
        assert daemon.log.count("one-shot from the local socket, session chat-") >= 4
    finally:
        daemon.ensure_stopped()
