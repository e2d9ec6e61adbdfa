"""`agent init` as a person and a script use it: on a pseudo-terminal of its own, answering
its questions against the fake LLM and the fake Telegram; with flags only and no terminal
(the fake Discord too); and with neither, exactly as before. Each test asserts what the
person saw and what the files hold."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import REPO, agent
from fakes.discord_server import FakeDiscord
from fakes.llm_server import FakeLLM, error, text
from fakes.telegram_server import FakeTelegram

SECRET = "sk-guided-test-key-0123456789abcdef"
TEMPLATE = REPO / "agent" / "config.example.toml"
CHOICE = "Choice [1]: "
TELEGRAM_TOKEN_Q = "Telegram bot token (hidden; Enter: no Telegram): "
DISCORD_TOKEN_Q = "Discord bot token (hidden; Enter: no Discord): "
OWNER_Q = "Your id (Enter: nobody yet): "
BOARD_Q = 'Arduino port: a number above, a path or "auto" (Enter: no board): '
LOCAL_KEY_Q = (
    "Key for openai/test-model, stored as PINCLAW_LLM__API_KEY (hidden; Enter: the dummy): "
)


class Terminal:
    """`agent ARGS` on a pseudo-terminal: its output read as a person sees it, each answer
    typed once the question it answers is on the screen (nothing waits a fixed time)."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.fd, replica = os.openpty()
        # A session of its own: the tests' own terminal (if any) is never the one it reads.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", *args],
            stdin=replica,
            stdout=replica,
            stderr=replica,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        os.close(replica)
        self.screen = ""  # everything shown so far, "\r\n" as "\n"
        self._seen = 0  # where the next expect() looks from

    def _read(self, until: float) -> bool:
        """One chunk of output; False at the end (the program closed the terminal)."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: every end of the terminal's replica is closed
            return False
        self.screen += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return bool(data)

    def expect(self, shown: str, timeout: float = 60.0) -> None:
        until = time.monotonic() + timeout
        while shown not in self.screen[self._seen :]:
            if time.monotonic() > until or not self._read(until):
                raise AssertionError(f"never shown: {shown!r}; the screen:\n{self.screen}")
        self._seen = self.screen.index(shown, self._seen) + len(shown)

    def answer(self, question: str, reply: str) -> None:
        self.expect(question)
        os.write(self.fd, reply.encode() + b"\n")

    def finish(self, timeout: float = 60.0) -> int:
        until = time.monotonic() + timeout
        while self._read(until):
            assert time.monotonic() < until, f"still running; the screen:\n{self.screen}"
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.fd)


@pytest.fixture
def clean_env(home: Path, fake_telegram: FakeTelegram) -> dict[str, str]:
    """This environment without any key or pinclaw setting, the home in tmp, Telegram's API
    at the fake (as channels.telegram.api_base would be)."""
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_") and k not in keys}
    env["PINCLAW_HOME"] = str(home)
    env["PINCLAW_CHANNELS__TELEGRAM__API_BASE"] = fake_telegram.api_base
    return env


@pytest.fixture
def terminal(clean_env: dict[str, str]) -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for each in opened:
        with contextlib.suppress(OSError):
            each.close()


def start(opened: list[Terminal], *args: str, env: dict[str, str]) -> Terminal:
    opened.append(Terminal(*args, env=env))
    return opened[-1]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def choose_the_local_server(t: Terminal, fake_llm: FakeLLM) -> None:
    t.answer(CHOICE, "6")
    t.answer("Server address [http://localhost:8080/v1]: ", fake_llm.base_url)
    t.expect("The server offers: test-model")  # its /v1/models, offered as the default
    t.answer("Model, as the server names it [test-model]: ", "")


def test_a_first_setup_on_a_terminal_asks_checks_and_writes_config_and_agent_env(
    terminal: list[Terminal],
    clean_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    home: Path,
) -> None:
    fake_llm.script(text("ready"))
    t = start(terminal, "init", env=clean_env)
    t.expect("Which model should answer?")
    t.expect("5) Ollama, on this machine or your network (no key)\n       e.g. ollama_chat/")
    t.expect("6) A local OpenAI-compatible server (llama.cpp's llama-server, LM Studio, vLLM)")
    choose_the_local_server(t, fake_llm)
    t.expect("(--api-key): Enter stores the dummy 'sk-no-key-required'")
    t.answer(LOCAL_KEY_Q, SECRET)
    t.expect("ok  model: openai/test-model answered 'ready' in ")
    t.expect("Telegram: a bot token from @BotFather")
    t.answer(TELEGRAM_TOKEN_Q, fake_telegram.token)
    t.expect("ok  telegram: the token is @pinclaw_test_bot's; talk to it at https://t.me/")
    t.answer(OWNER_Q, "42")
    t.answer(DISCORD_TOKEN_Q, "")
    t.answer(BOARD_Q, "")
    assert t.finish() == 0, t.screen
    # What the person saw: the answers, the checks, where things went, what to run next;
    # never the key or the token (typed without echo, not printed back).
    assert SECRET not in t.screen and fake_telegram.token not in t.screen
    t.expect(f"created  {home / 'config.toml'}")
    t.expect(
        f"stored   PINCLAW_LLM__API_KEY, PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN in "
        f"{home / 'agent.env'} (only you can read it)"
    )
    t.expect("Next:")
    for command in ("agent doctor", "agent chat", 'agent run -m "', "agent run  "):
        assert f"\n  {command}" in t.screen, command
    # The check: one request to the model, with the key typed.
    (check,) = fake_llm.requests
    assert check["model"] == "test-model"
    assert check["messages"] == [{"role": "user", "content": "Reply with the word: ready"}]
    assert fake_llm.request_headers[0]["authorization"] == f"Bearer {SECRET}"
    assert [(c.method, c.status) for c in fake_telegram.calls] == [("getMe", 200)]
    # The files: a commented config with the answers and no secret; the secrets in a 0600
    # agent.env.
    written = (home / "config.toml").read_text()
    assert written.startswith("# pinclaw configuration")
    assert "# `agent init` filled in [llm], [channels.telegram], [people.owner];" in written
    assert SECRET not in written and fake_telegram.token not in written
    config = tomllib.loads(written)
    assert config["llm"]["model"] == "openai/test-model"
    assert config["llm"]["api_base"] == fake_llm.base_url
    telegram = config["channels"]["telegram"]
    assert telegram["enabled"] is True and telegram["allowed_users"] == ["42"]
    assert config["channels"]["discord"]["enabled"] is False
    assert config["hardware"]["enabled"] is False
    assert config["people"] == {"owner": {"telegram": "42", "owner": True}}
    assert mode(home / "config.toml") == 0o600
    env_file = home / "agent.env"
    assert mode(env_file) == 0o600
    lines = env_file.read_text().splitlines()
    assert f"PINCLAW_LLM__API_KEY={SECRET}" in lines
    assert f"PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN={fake_telegram.token}" in lines
    assert (home / "workspace" / "SOUL.md").is_file()
    # And the key works from there: `agent run -m` with nothing exported.
    fake_llm.script(text("Hello from the setup."))
    ran = agent("run", "-m", "hi", env=clean_env, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Hello from the setup.\n"
    assert fake_llm.request_headers[-1]["authorization"] == f"Bearer {SECRET}"


def test_a_refused_key_is_said_in_one_line_and_asked_again(
    terminal: list[Terminal], clean_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    wrong = "sk-wrong-test-key-9876543210fedcba"
    fake_llm.script(error(401, f"Incorrect API key provided: {wrong}"), text("ready"))
    t = start(terminal, "init", env=clean_env)
    choose_the_local_server(t, fake_llm)
    t.answer(LOCAL_KEY_Q, wrong)
    t.expect("FAIL model: the key was refused (HTTP 401)\n")
    t.answer("Type the key again? [Y/n]: ", "")
    t.answer(LOCAL_KEY_Q, SECRET)
    t.expect("ok  model: openai/test-model answered 'ready'")
    t.answer(TELEGRAM_TOKEN_Q, "")
    t.answer(DISCORD_TOKEN_Q, "")
    t.answer(BOARD_Q, "")
    assert t.finish() == 0, t.screen
    refused = [line for line in t.screen.splitlines() if "was refused" in line]
    assert refused == ["FAIL model: the key was refused (HTTP 401)"]
    assert wrong not in t.screen and "Incorrect API key" not in t.screen
    assert [h["authorization"] for h in fake_llm.request_headers] == [
        f"Bearer {wrong}",
        f"Bearer {SECRET}",
    ]
    assert f"PINCLAW_LLM__API_KEY={SECRET}" in (home / "agent.env").read_text().splitlines()
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["channels"]["telegram"]["enabled"] is False


def test_flags_alone_set_everything_up_without_a_terminal(
    clean_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    fake_discord: FakeDiscord,
    home: Path,
) -> None:
    fake_llm.script(text("ready"))
    discord_api = {"PINCLAW_CHANNELS__DISCORD__API_BASE": fake_discord.api_base}
    env = {**clean_env, "SETUP_KEY": SECRET, **discord_api}
    result = agent(
        "init",
        "--model", "openai/test-model",
        "--api-base", fake_llm.base_url,
        "--key-env", "SETUP_KEY",
        "--telegram-token", fake_telegram.token,
        "--discord-token", fake_discord.token,
        "--owner-id", "telegram:42",
        "--owner-id", "discord:111",
        "--board-port", "/dev/ttyACM0",
        env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Which model" not in result.stdout and "Enter:" not in result.stdout  # no question
    lines = result.stdout.splitlines()
    assert "ok  model: openai/test-model answered 'ready' in " in result.stdout
    assert any(line.startswith("ok  telegram: the token is @pinclaw_test_bot's") for line in lines)
    assert any(
        line.startswith("ok  discord: the token is pinclaw-bot's (id 1000); invite it: "
                        "https://discord.com/oauth2/authorize?client_id=1000&scope=bot")
        for line in lines
    )  # fmt: skip
    assert SECRET not in result.stdout + result.stderr
    assert fake_llm.request_headers[0]["authorization"] == f"Bearer {SECRET}"
    assert [c.method for c in fake_telegram.calls] == ["getMe"]
    assert [(c.method, c.path) for c in fake_discord.calls] == [("GET", "/users/@me")]
    config = tomllib.loads((home / "config.toml").read_text())
    assert (config["llm"]["model"], config["llm"]["api_base"]) == (
        "openai/test-model",
        fake_llm.base_url,
    )
    assert config["channels"]["telegram"]["allowed_users"] == ["42"]
    assert config["channels"]["discord"]["enabled"] is True
    assert config["channels"]["discord"]["allowed_users"] == ["111"]
    assert config["hardware"]["enabled"] is True and config["hardware"]["port"] == "/dev/ttyACM0"
    assert config["people"]["owner"] == {"telegram": "42", "discord": "111", "owner": True}
    stored = (home / "agent.env").read_text()
    assert mode(home / "agent.env") == 0o600
    assert f"PINCLAW_LLM__API_KEY={SECRET}" in stored.splitlines()
    assert f"PINCLAW_CHANNELS__DISCORD__BOT_TOKEN={fake_discord.token}" in stored.splitlines()
    assert SECRET not in (home / "config.toml").read_text()


def test_a_provider_key_goes_to_its_own_variable_and_doctor_finds_it(
    clean_env: dict[str, str], home: Path
) -> None:
    key = "sk-ant-guided-0123456789abcdef"
    home.mkdir()
    (home / "agent.env").write_text("# mine\nOTHER_SETTING=kept\nANTHROPIC_API_KEY=old\n")
    result = agent(
        "init", "--model", "anthropic/claude-x", "--key", key, "--skip-check",
        env=clean_env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = (home / "agent.env").read_text().splitlines()
    assert lines == ["# mine", "OTHER_SETTING=kept", f"ANTHROPIC_API_KEY={key}"]  # replaced
    assert mode(home / "agent.env") == 0o600
    doctor = agent("doctor", env=clean_env, stdin=subprocess.DEVNULL)
    assert "ok  api key: present" in doctor.stdout, doctor.stdout
    # A second run keeps an existing config unless told, and says what it would set.
    again = agent(
        "init", "--model", "anthropic/claude-y", "--skip-check", env=clean_env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"kept     {home / 'config.toml'} (already there)" in again.stdout
    assert '  model = "anthropic/claude-y"' in again.stdout
    assert tomllib.loads((home / "config.toml").read_text())["llm"]["model"] == "anthropic/claude-x"
    replaced = agent(
        "init", "--model", "anthropic/claude-y", "--skip-check", "--replace-config",
        env=clean_env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert replaced.returncode == 0, replaced.stderr
    assert tomllib.loads((home / "config.toml").read_text())["llm"]["model"] == "anthropic/claude-y"
    backup = tomllib.loads((home / "config.toml.bak").read_text())
    assert backup["llm"]["model"] == "anthropic/claude-x"
    assert f"ANTHROPIC_API_KEY={key}" in (home / "agent.env").read_text().splitlines()


def test_a_refused_key_without_a_terminal_is_one_line_and_exit_1(
    clean_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    fake_llm.script(error(401, f"Incorrect API key provided: {SECRET}"))
    result = agent(
        "init", "--model", "openai/test-model", "--api-base", fake_llm.base_url,
        "--key", SECRET, env=clean_env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 1
    said = (result.stdout + result.stderr).splitlines()
    assert [line for line in said if "was refused" in line] == [
        "FAIL model: the key was refused (HTTP 401)"
    ]
    assert SECRET not in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert len(fake_llm.requests) == 1  # no retry
    assert (home / "config.toml").is_file()  # written: the fix is one line of agent.env


@pytest.mark.parametrize("how", ["no terminal", "--defaults on a terminal"])
def test_without_a_terminal_or_with_defaults_init_copies_and_says_what_next(
    how: str, terminal: list[Terminal], clean_env: dict[str, str], home: Path
) -> None:
    if how == "no terminal":
        result = agent("init", env=clean_env, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        shown = result.stdout
    else:
        t = start(terminal, "init", "--defaults", env=clean_env)
        assert t.finish() == 0, t.screen
        shown = t.screen
    assert shown.splitlines() == [
        f"created  {home / 'config.toml'}",
        *(f"created  {home / 'workspace' / name}" for name in (
            "AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md",
            "BOOTSTRAP.md", "MEMORY.md",
        )),
        "Next:",
        "  agent doctor                               check the whole setup "
        "(--check-model: and time one request)",
        "  agent chat                                 talk to it here, in the terminal",
        '  agent run -m "What is in your workspace?"  one message, one reply',
        "  agent run                                  the local daemon and the enabled bots, "
        "until Ctrl-C",
        "  agent service install                      start `agent run` at every login",
    ]  # fmt: skip
    assert (home / "config.toml").read_text() == TEMPLATE.read_text()
    assert not (home / "agent.env").exists()


def test_flags_answer_their_questions_and_an_existing_config_is_replaced_only_when_asked(
    terminal: list[Terminal], clean_env: dict[str, str], fake_llm: FakeLLM, home: Path
) -> None:
    assert agent("init", env=clean_env, stdin=subprocess.DEVNULL).returncode == 0
    t = start(
        terminal, "init", "--model", "openai/test-model", "--api-base", fake_llm.base_url,
        "--skip-check", env=clean_env,
    )  # fmt: skip
    t.answer(LOCAL_KEY_Q, "")  # Enter: the dummy key
    t.answer(TELEGRAM_TOKEN_Q, "")
    t.answer(DISCORD_TOKEN_Q, "")
    t.answer(BOARD_Q, "")
    t.answer(f"{home / 'config.toml'} already exists. Replace it with these answers", "y")
    assert t.finish() == 0, t.screen
    assert "Which model should answer?" not in t.screen  # --model answered it
    assert fake_llm.requests == []  # --skip-check
    t.expect(f"replaced {home / 'config.toml'} (the old one is now {home / 'config.toml.bak'})")
    assert (home / "config.toml.bak").read_text() == TEMPLATE.read_text()
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["llm"]["model"] == "openai/test-model"
    stored = (home / "agent.env").read_text().splitlines()
    assert "PINCLAW_LLM__API_KEY=sk-no-key-required" in stored
