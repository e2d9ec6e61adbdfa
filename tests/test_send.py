"""`agent send`: the owner's script hands a text to the running daemon, which sends it as the
bot (the real Telegram adapter against the fake Bot API). The tests assert what reaches the
chat and what the script is told — and that the bot never speaks where nobody let it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.llm_server import FakeLLM, text
from fakes.telegram_models import BOT_USERNAME
from fakes.telegram_server import FakeTelegram, SentMessage

REPO = Path(__file__).resolve().parent.parent
OWNER, GROUP, OTHER_GROUP, STRANGER = 42, -1001, -1002, 7


async def agent_send(*args: str, stdin: bytes = b"") -> tuple[int, str]:
    """`agent send ...` as a script would run it; its exit status and stderr. A subprocess
    of its own, so the daemon in this event loop keeps serving meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "send", *args, cwd=REPO, env=dict(os.environ),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def sent_to(fake: FakeTelegram, chat: int) -> list[SentMessage]:
    return [m for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat]


async def test_the_owner_sends_to_allowed_chats_and_nowhere_else(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.script(text("Hello group."))
    async with daemon():
        # An allowed person writes in a group (the bot answers there), a stranger in another.
        hello = f"@{BOT_USERNAME} hi"
        fake_telegram.inject_message(GROUP, OWNER, hello, chat_type="supergroup")
        fake_telegram.inject_message(OTHER_GROUP, STRANGER, hello, chat_type="supergroup")
        await fake_telegram.await_for(lambda m: m.chat_id == GROUP, timeout=10)

        code, err = await agent_send("--channel", "telegram", "--to", str(OWNER), "Soil is dry.")
        assert (code, err.strip()) == (0, f"sent to telegram chat {OWNER}")
        assert [m.plain for m in sent_to(fake_telegram, OWNER)] == ["Soil is dry."]

        code, err = await agent_send("--channel", "telegram", "--to", str(GROUP), "-",
                                     stdin=b"Greenhouse at 31 C.\n")  # fmt: skip
        assert code == 0
        assert sent_to(fake_telegram, GROUP)[-1].plain == "Greenhouse at 31 C."

        for chat in (OTHER_GROUP, 12345):  # a stranger's group; a chat nobody knows
            code, err = await agent_send("--channel", "telegram", "--to", str(chat), "spam")
            assert code == 2
            assert f"chat '{chat}' is not one the agent talks in" in err
            assert sent_to(fake_telegram, chat) == []

        code, err = await agent_send("--channel", "discord", "--to", "1", "hi")
        assert code == 2 and "discord is not running in this daemon (running: telegram)" in err


async def test_a_secret_in_the_text_never_reaches_the_chat(
    telegram_env: dict[str, str], fake_telegram: FakeTelegram, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    key = telegram_env["OPENAI_API_KEY"]
    async with daemon():
        code, _ = await agent_send("--channel", "telegram", "--to", str(OWNER), f"key is {key}")
    assert code == 0
    [message] = sent_to(fake_telegram, OWNER)
    assert key not in (message.text or "") and message.plain is not None
    assert message.plain.startswith("key is ")


async def test_stored_first_then_delivered_through_an_outage(
    telegram_env: dict[str, str], fake_telegram: FakeTelegram, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    async with daemon():
        fake_telegram.fail_for("sendMessage", 2.0, status=502)
        code, err = await agent_send("--channel", "telegram", "--to", str(OWNER), "--wait",
                                     "0.3", "Pump is off.")  # fmt: skip
        assert code == 0 and "stored, not delivered yet" in err
        [message] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=15)
    assert message.plain == "Pump is off."


def test_without_a_daemon_it_says_what_to_start(home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "send", "--channel", "telegram", "--to", "42", "hi"],
        capture_output=True, text=True, cwd=REPO, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "agent send needs the running daemon" in result.stderr


async def test_to_takes_numeric_ids_and_people_never_at_names(
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "@carol" is on the allow-list, but Telegram reads @name as a public channel.
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS", '["42", "12345", "@carol"]')
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__TELEGRAM", str(OWNER))
    async with daemon():
        for to in ("@carol", "carol smith", "", "12a"):
            code, err = await agent_send("--channel", "telegram", "--to", to, "psst")
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert "--to takes a numeric chat id" in err and "never @name" in err
        code, err = await agent_send("--channel", "telegram", "--to", "bob", "hi")
        assert code == 2 and "no telegram id for 'bob'" in err
        assert fake_telegram.sent == []

        code, err = await agent_send("--channel", "telegram", "--to", "12345", "To a number.")
        assert (code, err.strip()) == (0, "sent to telegram chat 12345")
        code, err = await agent_send("--channel", "telegram", "--to", "alice", "To Alice.")
        assert (code, err.strip()) == (0, f"sent to telegram chat {OWNER} (alice)")
    assert [m.plain for m in sent_to(fake_telegram, 12345)] == ["To a number."]
    assert [m.plain for m in sent_to(fake_telegram, OWNER)] == ["To Alice."]
