"""A newcomer's first hour, end to end: a `git clone` of this repository's HEAD, README's first
command run exactly as README shows it with the oldest Python and pip supported (Debian 12's,
as on a Raspberry Pi: a fresh venv from requirements.lock, a non-editable install, a
one-shot), then `agent init`, `agent chat` and `agent run` with Telegram, each on a
pseudo-terminal of its own, all from the clone's `.venv/bin/agent` in one home. The fake LLM
and the fake Telegram stand in for the provider and the Bot API; pip's package index is the
only place reached beyond 127.0.0.1. One test, so that pytest-xdist never installs twice; it
asserts what the newcomer sees and what the files and the fakes hold."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import stat
import struct
import subprocess
import sys
import termios
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM, last_user_content, text, tool_calls, tool_results
from fakes.telegram_server import FakeTelegram
from readme_commands import first_sh_block, newcomer_env
from supported_pythons import OLDEST, as_python3, check_pip, find, interpreter

REPO = Path(__file__).resolve().parent.parent
# The child makes the pty its controlling terminal (Ctrl-C is then a SIGINT, as in a real
# one), then becomes the program in argv[1].
BOOT = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]")
CTRL_C, CTRL_D = "\x03", "\x04"
README_REPLY = "Your workspace holds AGENTS.md, SOUL.md and a few more."
SECRET = "sk-newcomer-test-key-0123456789abcdef"
OWNER = 42
INSTALL_S = 900  # a fresh venv from requirements.lock, on a slow machine with a cold cache


class Terminal:
    """A program on a 100x30 pseudo-terminal that is its controlling terminal; `expect`
    reads on until a text shows after what was expected before."""

    def __init__(self, program: str, *args: str, env: dict[str, str], cwd: Path) -> None:
        self._main, child = os.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {
            **env,
            "TERM": "xterm-256color",
            "COLUMNS": "100",
            "LINES": "30",
            "PROMPT_TOOLKIT_NO_CPR": "1",  # no terminal here answers where the cursor is
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", BOOT, program, *args],
            stdin=child, stdout=child, stderr=child, env=env, cwd=cwd, start_new_session=True,
        )  # fmt: skip
        os.close(child)
        self.raw = b""
        self._mark = 0

    @property
    def screen(self) -> str:
        """What was written, escape sequences taken out."""
        return ESCAPES.sub("", self.raw.decode(errors="replace")).replace("\r", "")

    def _read(self, timeout: float) -> bool:
        """One chunk of output; False at the end (every end of the replica closed)."""
        ready, _, _ = select.select([self._main], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self._main, 65536)
        except OSError:  # EIO
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, wanted: str, within: float = 60) -> None:
        deadline = time.monotonic() + within
        while (found := self.screen.find(wanted, self._mark)) < 0:
            assert time.monotonic() < deadline, f"no {wanted!r} within {within} s:\n{self.screen}"
            assert self._read(0.05), f"it ended before {wanted!r}:\n{self.screen}"
        self._mark = found + len(wanted)

    def type(self, keys: str) -> None:
        os.write(self._main, keys.encode())

    def answer(self, question: str, reply: str) -> None:
        self.expect(question)
        self.type(reply + "\r")

    def finish(self, within: float = 60) -> int:
        """Its exit status, once everything it wrote was read."""
        deadline = time.monotonic() + within
        while self._read(0.1):
            if self.process.poll() is not None and not select.select([self._main], [], [], 0)[0]:
                break
            assert time.monotonic() < deadline, f"still running:\n{self.screen}"
        return self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        os.close(self._main)


@dataclass
class Newcomer:
    """The clone, the home and the shell's environment; the terminals opened, the seconds
    each step took."""

    clone: Path
    home: Path
    env: dict[str, str]
    oldest_python: bool  # `python3` is a 3.11 (Debian 12's where there is one)
    terminals: list[Terminal] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def start(self, *args: str, env: dict[str, str] | None = None) -> Terminal:
        """`.venv/bin/agent ARGS` of the clone, in the clone, on a terminal of its own."""
        agent = str(self.clone / ".venv" / "bin" / "agent")
        terminal = Terminal(agent, *args, env={**self.env, **(env or {})}, cwd=self.clone)
        self.terminals.append(terminal)
        return terminal


@pytest.fixture
def newcomer(tmp_path: Path) -> Iterator[Newcomer]:
    """Step 1: the clone of HEAD, as a newcomer makes it (uncommitted changes are not in it)."""
    clone = tmp_path / "pinclaw"
    cloned = subprocess.run(
        ["git", "clone", "-q", REPO.as_uri(), str(clone)], capture_output=True, text=True
    )
    assert cloned.returncode == 0, f"git clone failed: {cloned.stderr}"
    env = newcomer_env(tmp_path / "home")
    # `python3` is the oldest supported, Debian 12's with the pip 23.0.1 its venv brings; on a
    # machine without a 3.11 (and not required to have one), the python3 on PATH.
    required = os.environ.get("PINCLAW_PYTHONS") == "require"
    oldest = find(OLDEST) or (interpreter(OLDEST) if required else None)
    if oldest is not None:
        env["PATH"] = f"{as_python3(oldest, tmp_path / 'bin')}{os.pathsep}{env['PATH']}"
    person = Newcomer(clone, tmp_path / "home", env, oldest is not None)
    yield person
    for terminal in person.terminals:
        terminal.close()
    shutil.rmtree(clone, ignore_errors=True)  # its venv is over 400 MB
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in person.seconds.items()))


def readme_first_command(person: Newcomer, fake_llm: FakeLLM) -> None:
    """Step 2: README's first command, by bash in the clone, the model at the fake LLM."""
    command = first_sh_block((person.clone / "README.md").read_text(), "Install and ask it")
    assert command.startswith("python3 -m venv .venv && ")
    assert " OPENAI_API_KEY=sk-... .venv/bin/agent run -m " in command
    fake_llm.script(tool_calls(("file_list", {})), text(README_REPLY))
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=person.clone,
        env={**person.env, "PINCLAW_LLM__API_BASE": fake_llm.base_url},
        capture_output=True,
        text=True,
        timeout=INSTALL_S,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if person.oldest_python:
        print(f"README's first command with {check_pip(person.clone / '.venv' / 'bin', OLDEST)}")
    # The reply is the last line of stdout (pip's own lines come before it).
    assert result.stdout.endswith(f"\n{README_REPLY}\n"), result.stdout[-2000:]
    assert re.search(r"^  tool file_list\(\) ok \d+\.\d\d s$", result.stderr, re.MULTILINE)
    # The model as README names it, with README's key; the first run made the workspace, and
    # the tool listed it.
    first, second = fake_llm.requests
    assert first["model"] == "gpt-4o-mini"
    assert last_user_content(first).endswith("\nWhat files are in your workspace?")
    assert fake_llm.request_headers[0]["authorization"] == "Bearer sk-..."
    assert "AGENTS.md" in tool_results(second)[0]
    # A non-editable install: the package is the venv's copy, not the clone's folders.
    python = str(person.clone / ".venv" / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import agent; print(agent.__file__)"],
        cwd=person.home,
        env=person.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert "site-packages" in where and where.startswith(str(person.clone / ".venv")), where


def guided_init(person: Newcomer, fake_llm: FakeLLM, fake_telegram: FakeTelegram) -> None:
    """Step 3: `agent init`, the local OpenAI-compatible server at the fake LLM, a key, the
    Telegram bot's token checked with the fake, user 42 the owner."""
    home = person.home
    fake_llm.script(text("ready"))
    init = person.start("init")
    init.expect("Which model should answer?")
    init.answer("Choice [1]: ", "6")
    init.answer("Server address [http://localhost:8080/v1]: ", fake_llm.base_url)
    init.expect("The server offers: test-model")
    init.answer("Model, as the server names it [test-model]: ", "")
    init.answer("(hidden; Enter: the dummy): ", SECRET)
    init.expect("ok  model: openai/test-model answered 'ready' in ")
    init.answer("Telegram bot token (hidden; Enter: no Telegram): ", fake_telegram.token)
    init.expect("ok  telegram: the token is @pinclaw_test_bot's")
    init.answer("Your id (Enter: nobody yet): ", str(OWNER))
    init.answer("Discord bot token (hidden; Enter: no Discord): ", "")
    init.answer('Arduino port: a number above, a path or "auto" (Enter: no board): ', "")
    init.expect(f"created  {home / 'config.toml'}")
    init.expect(f"{home / 'agent.env'} (only you can read it)")
    init.expect("Next:")
    assert init.finish() == 0, init.screen
    # The venv is not activated: the lines name the program as it was typed, to be copied.
    for command in ("doctor", "chat", 'run -m "', "run  "):
        assert f"\n  .venv/bin/agent {command}" in init.screen, command
    assert SECRET not in init.screen and fake_telegram.token not in init.screen
    assert fake_llm.request_headers[-1]["authorization"] == f"Bearer {SECRET}"
    config_text = (home / "config.toml").read_text()
    assert SECRET not in config_text and fake_telegram.token not in config_text
    config = tomllib.loads(config_text)
    assert (config["llm"]["model"], config["llm"]["api_base"]) == (
        "openai/test-model",
        fake_llm.base_url,
    )
    assert config["channels"]["telegram"]["enabled"] is True
    assert config["channels"]["telegram"]["allowed_users"] == [str(OWNER)]
    assert stat.S_IMODE((home / "agent.env").stat().st_mode) == 0o600
    stored = (home / "agent.env").read_text().splitlines()
    assert f"PINCLAW_LLM__API_KEY={SECRET}" in stored
    assert f"PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN={fake_telegram.token}" in stored


def first_chat(person: Newcomer, fake_llm: FakeLLM) -> str:
    """Step 4: `agent chat`, one message, Ctrl-D; the command its last line says resumes it."""
    fake_llm.script(text("Hello, newcomer."))
    chat = person.start("chat")
    chat.expect("pinclaw chat · session chat-")
    chat.expect("answered in this process")
    chat.expect("›")
    chat.type("my name is Ada\r")
    chat.expect("Hello, newcomer.")
    chat.expect("›")
    chat.type(CTRL_D)
    chat.expect("resume with: .venv/bin/agent chat --session chat-")
    assert chat.finish() == 0, chat.screen
    assert fake_llm.request_headers[-1]["authorization"] == f"Bearer {SECRET}"  # agent.env's
    resume = re.search(r"resume with: (\.venv/bin/agent chat --session chat-\S+)\n", chat.screen)
    assert resume is not None, chat.screen
    return resume[1]


def daemon_with_telegram(
    person: Newcomer, fake_llm: FakeLLM, fake_telegram: FakeTelegram, resume: str
) -> None:
    """Step 5: `agent run`, the daemon: the lines of what it starts; the chat resumed as its
    last line said, now served by the daemon; a message from the owner on Telegram answered;
    Ctrl-C and the line it stops with."""
    run = person.start("run")
    run.expect(f"pinclaw: serving one-shots on {person.home / 'agent.sock'}\n")
    run.expect("pinclaw: telegram connected as @pinclaw_test_bot\n")
    run.expect("pinclaw: no schedules yet\n")

    fake_llm.script(text("You are Ada."))
    again = person.start(*resume.split()[1:])
    again.expect(f"session {resume.split()[-1]} · answered by the daemon")
    again.expect("›")
    again.type("what is my name?\r")
    again.expect("You are Ada.")
    again.expect("›")
    again.type(CTRL_D)
    assert again.finish() == 0, again.screen
    assert "my name is Ada" in str(fake_llm.requests[-1]["messages"])  # the first chat's turn

    fake_llm.script(text("Hello over Telegram."))
    fake_telegram.inject_message(OWNER, OWNER, "hello from Telegram")
    [reply] = fake_telegram.wait_for(
        lambda m: m.chat_id == OWNER and m.plain == "Hello over Telegram.", timeout=60
    )
    assert reply.method == "sendMessage"
    asked = fake_llm.requests[-1]
    assert last_user_content(asked).endswith("hello from Telegram")
    assert "## Channel Capabilities" in str(asked["messages"][0]["content"])

    run.type(CTRL_C)
    run.expect("pinclaw: stopped\n")
    assert run.finish() == 0, run.screen
    assert "Traceback" not in run.screen and "warning" not in run.screen, run.screen


# The install alone may take INSTALL_S; the suite's 120 s cut it on a loaded two-core machine.
@pytest.mark.timeout(INSTALL_S + 120)
def test_a_newcomer_installs_sets_up_chats_and_runs_the_telegram_bot(
    newcomer: Newcomer, fake_llm: FakeLLM, fake_telegram: FakeTelegram
) -> None:
    started = time.monotonic()
    readme_first_command(newcomer, fake_llm)
    newcomer.seconds["README's first command"] = time.monotonic() - started
    # From here on Telegram's API is the fake's, as channels.telegram.api_base would set it.
    newcomer.env["PINCLAW_CHANNELS__TELEGRAM__API_BASE"] = fake_telegram.api_base
    newcomer.env["PINCLAW_CHANNELS__TELEGRAM__FILE_API_BASE"] = fake_telegram.file_api_base
    started = time.monotonic()
    guided_init(newcomer, fake_llm, fake_telegram)
    newcomer.seconds["init"] = time.monotonic() - started
    started = time.monotonic()
    resume = first_chat(newcomer, fake_llm)
    newcomer.seconds["chat"] = time.monotonic() - started
    started = time.monotonic()
    daemon_with_telegram(newcomer, fake_llm, fake_telegram, resume)
    newcomer.seconds["run"] = time.monotonic() - started
