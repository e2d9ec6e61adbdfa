"""Approvals end to end: the daemon with the real channel adapters, the fake chat services
and the in-process model double (or `agent run -m` as a process, with the fake LLM through
LiteLLM). The model asks for a command outside the allow-list;
the owner answers where the chat is; the tests assert the workspace and what the model and
the people in the chat were shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import daemon_process
import pytest
from conftest import Daemon
from fakes.discord_server import FakeDiscord
from fakes.discord_server import SentMessage as DiscordMessage
from fakes.llm_server import FakeLLM, tool_results
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.telegram_server import BOT_USERNAME, FakeTelegram, SentMessage, buttons

REPO = Path(__file__).resolve().parent.parent
OWNER, STRANGER = 42, 777
# The owner asks from their DM: an owner-private turn, on either OS sandbox.
pytestmark = pytest.mark.usefixtures("owner_is_42")
COMMAND = "rm keep.txt"  # rm is not in the default allowed commands: supervised asks
QUESTION = (
    "Approve shell: rm keep.txt\n(Why I ask: rm is not in the allowed commands)\n(Always allow "
    "covers, in this workspace: running rm, also deleting existing files outside tmp/ and "
    "scratch/; never a change to an identity file (AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, "
    "HEARTBEAT.md, BOOTSTRAP.md, skills/): those are asked each time)"
)
NOT_RUN = "Error: Not run: the owner did not approve it (rm is not in the allowed commands)."


@pytest.fixture
def keep(home: Path) -> Path:
    """The file the command would delete, in the workspace the daemon will use."""
    workspace = home / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    return plant(workspace / "keep.txt")


def plant(path: Path) -> Path:
    path.write_text("precious\n")
    return path


def plant_in_folder(keep: Path) -> Path:
    """The file moved into notes/ of the same workspace."""
    (keep.parent / "notes").mkdir(exist_ok=True)
    return keep.rename(keep.parent / "notes" / keep.name)


def content(path: Path) -> str | None:
    """The file's text, None once it is gone (a quick local read, fine inside a test)."""
    return path.read_text() if path.exists() else None


async def agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the user runs it, off the event loop."""
    return await asyncio.to_thread(daemon_process.agent, *args, env=env)


def answer_timeout(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", str(seconds))


def script_delete(model: FakeLLM | ScriptedModel, command: str = COMMAND) -> None:
    model.script(tool_calls(("shell", {"command": command})), text("done"))


# -- Telegram ----------------------------------------------------------------------------------


def questions(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.sent if (m.plain or "").startswith("Approve shell:")]


async def telegram_question(fake: FakeTelegram, command: str = COMMAND) -> SentMessage:
    (message,) = await fake.await_for(lambda m: bool(buttons(m)), timeout=10)
    assert message.plain == QUESTION.replace(COMMAND, command)
    assert list(buttons(message)) == ["Approve", "Deny", "Always allow"]
    return message


async def telegram_reply(fake: FakeTelegram, body: str = "done", count: int = 1) -> None:
    await fake.await_for(lambda m: m.plain == body and not buttons(m), count=count, timeout=10)


async def toast(fake: FakeTelegram, query_id: str) -> str | None:
    """What the presser of `query_id` was shown, once the bot answered the press."""
    deadline = time.monotonic() + 5
    while not (found := [a for a in fake.callback_answers if a.callback_query_id == query_id]):
        assert time.monotonic() < deadline, "the press was never answered"
        await asyncio.sleep(0.01)
    return found[0].text


async def test_telegram_approve_runs_the_command_and_the_model_gets_its_result(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer_timeout(monkeypatch, 30)
    script_delete(model)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        assert content(keep) == "precious\n"  # nothing runs before the answer
        pressed = fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Approve"])
        await telegram_reply(fake_telegram)
    assert content(keep) is None
    assert await toast(fake_telegram, pressed) == "✅ Approved"
    (after,) = questions(fake_telegram)
    assert after.plain == f"{QUESTION}\n\n✅ Approved" and not buttons(after)
    assert tool_results(model.requests[1]) == ["exit code: 0 (no output)"]


async def test_telegram_deny_leaves_the_file_and_the_model_is_told(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer_timeout(monkeypatch, 30)
    script_delete(model)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Deny"])
        await telegram_reply(fake_telegram)
    assert content(keep) == "precious\n"
    [result] = tool_results(model.requests[1])
    assert result.startswith(NOT_RUN)
    assert questions(fake_telegram)[0].plain == f"{QUESTION}\n\n❌ Denied"


async def test_telegram_no_answer_in_time_is_a_denial(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer_timeout(monkeypatch, 1)
    script_delete(model)
    async with daemon():
        started = time.monotonic()
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        await telegram_reply(fake_telegram)
        waited = time.monotonic() - started
    assert content(keep) == "precious\n"
    assert 0.9 < waited < 8
    assert tool_results(model.requests[1])[0].startswith(NOT_RUN)
    (after,) = [m for m in fake_telegram.sent if m.message_id == question.message_id]
    assert after.plain == f"{QUESTION}\n\n⌛ No answer in time: denied" and not buttons(after)


async def test_telegram_a_stranger_cannot_answer_and_the_owner_still_decides(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's turn holds other members' words (tools/taint.py), so its question is the
    owner's alone: asked in the owner's private chat, naming the group, never remembered by
    "Always allow"; a press by anyone else is refused to them alone, and the command waits
    for the owner. (The file is in a folder: a group's turn may not change the workspace
    root under Landlock, which masks the owner's private files there by making the root
    list-only.)"""
    answer_timeout(monkeypatch, 30)
    group = -500
    keep = plant_in_folder(keep)
    script_delete(model, "rm notes/keep.txt")
    async with daemon():
        fake_telegram.inject_message(
            group, OWNER, f"@{BOT_USERNAME} delete keep.txt", chat_type="group"
        )
        (question,) = await fake_telegram.await_for(lambda m: bool(buttons(m)), timeout=10)
        assert question.chat_id == OWNER  # the owner's private chat, not the group
        assert question.plain.startswith(
            f"Approve shell: rm notes/keep.txt (in telegram:{group}:)\n(Why I ask: rm is not "
            "in the allowed commands; asked each time after reading this group's messages)"
        )
        pressed = fake_telegram.inject_callback_query(
            STRANGER, question, buttons(question)["Approve"], username="mallory"
        )
        assert await toast(fake_telegram, pressed) == "Only the owner can answer this."
        await asyncio.sleep(0.5)
        assert content(keep) == "precious\n"
        assert len(model.requests) == 1  # the turn still waits on the question
        (still,) = questions(fake_telegram)
        assert still.plain == question.plain and list(buttons(still)) == list(buttons(question))
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Approve"])
        await telegram_reply(fake_telegram)
    assert content(keep) is None
    assert tool_results(model.requests[1]) == ["exit code: 0 (no output)"]


@pytest.mark.both_stores
async def test_telegram_always_allow_is_remembered_listed_and_not_asked_again(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer_timeout(monkeypatch, 30)
    other = plant(keep.with_name("other.txt"))
    script_delete(model)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Always allow"])
        await telegram_reply(fake_telegram)
    assert content(keep) is None
    workspace = str((home / "workspace").resolve())
    kept = "SELECT rule FROM approvals WHERE workspace = ?"
    assert daemon_process.rows(home / "state.db", kept, (workspace,)) == [("shell:rm",)]

    model.script(tool_calls(("shell", {"command": "rm other.txt"})), text("gone too"))
    async with daemon():  # a restart: the rule lives in state.db, not in memory
        fake_telegram.inject_message(OWNER, OWNER, "delete other.txt as well")
        await telegram_reply(fake_telegram, "gone too")
    assert content(other) is None
    assert len(questions(fake_telegram)) == 1
    assert tool_results(model.requests[-1])[-1] == "exit code: 0 (no output)"

    doctor = await agent("doctor", env=telegram_model_env)
    assert "note approvals: always allowed: shell:rm\n" in doctor.stdout, doctor.stdout


async def test_telegram_the_owner_has_the_whole_approval_timeout_to_answer(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """approval_timeout_s is the owner's time to answer, even when it is longer than the
    time a tool may run (agent.tool_timeout_s; by default 120 s against 60 s)."""
    answer_timeout(monkeypatch, 10)
    monkeypatch.setenv("PINCLAW_AGENT__TOOL_TIMEOUT_S", "1")
    script_delete(model)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        await asyncio.sleep(1.5)  # the owner reads the question first
        with contextlib.suppress(ValueError):  # no button left to press: the test fails below
            fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Approve"])
        await telegram_reply(fake_telegram)
    assert tool_results(model.requests[1]) == ["exit code: 0 (no output)"]
    assert content(keep) is None


def make_linked_home(real: Path, linked: Path) -> None:
    (real / "workspace").mkdir(parents=True)
    plant(real / "workspace" / "keep.txt")
    linked.symlink_to(real)


async def test_telegram_always_allow_is_listed_by_doctor_through_a_symlinked_home(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A home reached through a symlink (~/.pinclaw on another disk) keeps one set of rules."""
    answer_timeout(monkeypatch, 30)
    real = tmp_path / "disk" / "pinclaw"
    linked = tmp_path / "linked-home"
    make_linked_home(real, linked)
    monkeypatch.setenv("PINCLAW_HOME", str(linked))
    script_delete(model)
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        question = await telegram_question(fake_telegram)
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Always allow"])
        await telegram_reply(fake_telegram)
    assert content(real / "workspace" / "keep.txt") is None
    doctor = await agent("doctor", env={**telegram_model_env, "PINCLAW_HOME": str(linked)})
    assert "note approvals: always allowed: shell:rm\n" in doctor.stdout, doctor.stdout


# -- Discord -----------------------------------------------------------------------------------

DISCORD_OWNER = "111"  # conftest.py's Discord owner


@pytest.fixture
def discord_model_env(
    discord_model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """conftest.py's (owner 111 on bot 1000's guild 5000), with 30 s to answer a question."""
    answer_timeout(monkeypatch, 30)
    return {**discord_model_env, "PINCLAW_SECURITY__APPROVAL_TIMEOUT_S": "30"}


async def discord_question(fake: FakeDiscord) -> DiscordMessage:
    (message,) = await fake.await_for(lambda: [m for m in fake.messages if m.buttons], 10)
    assert message.content == QUESTION
    assert list(message.buttons) == ["Approve", "Deny", "Always allow"]
    return message


@pytest.mark.parametrize(
    ("label", "outcome", "deleted", "result"),
    [
        ("Approve", "✅ Approved", True, "exit code: 0 (no output)"),
        ("Deny", "❌ Denied", False, NOT_RUN),
    ],
)
async def test_discord_the_owner_answers_with_a_button(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    keep: Path,
    label: str,
    outcome: str,
    deleted: bool,
    result: str,
) -> None:
    dm = fake_discord.dm_channel_id(DISCORD_OWNER)
    script_delete(model)
    async with Daemon():  # from when the Discord channel has started
        fake_discord.inject_dm(DISCORD_OWNER, "delete keep.txt")
        question = await discord_question(fake_discord)
        assert question.channel_id == dm and content(keep) == "precious\n"
        fake_discord.inject_button_press(
            DISCORD_OWNER, question.message_id, question.buttons[label]
        )
        await fake_discord.await_for(
            lambda: [m for m in fake_discord.messages if m.content == "done"], 10
        )
    assert (content(keep) is None) is deleted
    assert tool_results(model.requests[1])[0].startswith(result)
    (after,) = [m for m in fake_discord.messages if m.message_id == question.message_id]
    assert after.content == f"{QUESTION}\n\n{outcome}" and after.buttons == {}


# -- the terminal ------------------------------------------------------------------------------


def one_shot_on_a_terminal(env: dict[str, str], answer: bytes) -> tuple[int, str, str]:
    """`agent run -m` with a pseudo-terminal as stdin and stderr (where the question is
    asked), typing `answer` once the question is shown. Exit code, stdout, the terminal."""
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "-m", "delete keep.txt"],
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=child,
        env={**os.environ, **env},
        cwd=REPO,
    )
    os.close(child)
    screen, answered = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # EIO: every process holding the terminal is gone
                    break
                if not chunk:
                    break
                screen += chunk
            if not answered and b"Allow? [y/N/a(lways)]" in screen:
                os.write(main, answer)
                answered = True
            if process.poll() is not None and not ready:
                break
        assert process.stdout is not None
        out = process.stdout.read().decode()
        code = process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    return code, out, screen.decode(errors="replace")


@pytest.mark.parametrize(("typed", "deleted"), [(b"y\n", True), (b"n\n", False)])
def test_terminal_asks_on_the_tty_and_the_answer_decides(
    llm_env: dict[str, str], fake_llm: FakeLLM, keep: Path, typed: bytes, deleted: bool
) -> None:
    script_delete(fake_llm)
    code, out, screen = one_shot_on_a_terminal(llm_env, typed)
    assert code == 0, screen
    assert f"{QUESTION}\nAllow? [y/N/a(lways)]" in screen.replace("\r\n", "\n")
    assert out == "done\n"
    assert (content(keep) is None) is deleted
    [result] = tool_results(fake_llm.requests[1])
    assert result.startswith("exit code: 0" if deleted else NOT_RUN)


def test_terminal_without_a_tty_denies_without_waiting(
    llm_env: dict[str, str], fake_llm: FakeLLM, keep: Path
) -> None:
    script_delete(fake_llm)
    env = {**os.environ, **llm_env, "PINCLAW_SECURITY__APPROVAL_TIMEOUT_S": "600"}
    result = subprocess.run(  # waiting for an answer would outlast the timeout and fail
        [sys.executable, "-m", "agent", "run", "-m", "delete keep.txt"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"{QUESTION}\nDenied: no terminal to ask on." in result.stderr
    assert result.stdout == "done\n"
    assert content(keep) == "precious\n"
    assert tool_results(fake_llm.requests[1])[0].startswith(NOT_RUN)
