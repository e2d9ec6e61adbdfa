"""Chatting on Telegram, end to end: python-telegram-bot against the fake Bot API, the daemon
in between, the in-process model double as the model. A streamed reply, voice transcription
and `agent run` as a process go through LiteLLM to the fake provider, end to end."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import Daemon, eventually
from fakes.endless_file import endless_file
from fakes.llm_server import FakeLLM, Reply, last_user_content
from fakes.model_double import ScriptedModel, text
from fakes.telegram_server import BOT_USERNAME, FakeTelegram, SentMessage

from channels.telegram.channel import STREAM_EDIT_EVERY_S
from channels.telegram.download import download

OWNER = 42


def texts(fake: FakeTelegram, chat_id: int = OWNER) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat_id]


async def test_reply_with_image_marker_arrives_as_photo_and_text(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon() as running:
        (home / "workspace" / "chart.png").write_bytes(b"\x89PNG fake chart")
        model.script(text("Here is the chart.\n[IMAGE:chart.png]"))
        fake_telegram.inject_message(OWNER, OWNER, "show me the chart")
        photo = (await fake_telegram.await_for(lambda m: m.method == "sendPhoto"))[0]
        reply = (await fake_telegram.await_for(lambda m: m.method == "sendMessage"))[0]
    assert running.exit_code == 0
    assert photo.data == b"\x89PNG fake chart"
    assert reply.plain == "Here is the chart."
    assert "[IMAGE" not in (reply.text or "")
    assert any(a.action == "typing" for a in fake_telegram.chat_actions)
    commands = ["new", "stop", "status", "jobs", "model", "voice", "usage", "budget", "pair"]
    commands += ["busy", "help"]
    assert [c["command"] for c in fake_telegram.commands] == commands


async def test_marker_outside_workspace_is_refused_and_text_still_arrives(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        model.script(text("Sure.\n[DOCUMENT:/etc/hostname]\n[IMAGE:missing.png]"))
        fake_telegram.inject_message(OWNER, OWNER, "send the hostname file")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    assert "Could not send /etc/hostname: it is outside the workspace" in (reply.plain or "")
    assert "Could not send missing.png: file not found" in (reply.plain or "")
    assert not [m for m in fake_telegram.sent if m.method != "sendMessage"]


async def test_long_reply_is_split_into_valid_messages(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    paragraphs = [
        f"Paragraph {i}: " + " ".join(["lorem ipsum dolor sit amet"] * 37) for i in range(10)
    ]
    long_reply = "\n\n".join(paragraphs)
    assert 9_900 < len(long_reply) < 10_500
    async with daemon():
        model.script(text(long_reply))
        fake_telegram.inject_message(OWNER, OWNER, "write a lot")
        parts = await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=3)
    # A 4th part would be sent before the daemon stops: stopping lets sending finish.
    assert len(texts(fake_telegram)) == 3
    assert all(len(p) <= 4096 for p in texts(fake_telegram))
    assert "\n\n".join(p.plain or "" for p in parts) == long_reply


async def test_stranger_gets_one_reply_and_the_model_is_never_called(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(777, 777, "hi, who are you?", username="mallory")
        [reply] = await fake_telegram.await_for(lambda m: m.chat_id == 777)
        fake_telegram.inject_message(777, 777, "hello??", username="mallory")
        fake_telegram.inject_message(-100, 777, f"@{BOT_USERNAME} hello", chat_type="group")
        await asyncio.sleep(0.5)
    assert len(texts(fake_telegram, 777)) == 1  # one polite reply, not one per message
    assert "777" in (reply.plain or "") and "allowed_users" in (reply.plain or "")
    assert not [m for m in fake_telegram.sent if m.chat_id == -100]  # silence in groups
    assert model.requests == []


async def test_allowed_by_username(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(55, 55, "hello", username="Carol")
        [reply] = await fake_telegram.await_for(lambda m: m.chat_id == 55)
    assert reply.plain and reply.plain.startswith("echo: ")


async def test_in_a_group_only_the_mention_or_reply_is_answered(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    group = -500
    async with daemon():
        fake_telegram.inject_message(group, OWNER, "just chatting", chat_type="group")
        fake_telegram.inject_message(
            group, OWNER, f"@{BOT_USERNAME} what time is it?", chat_type="group", first_name="Ann"
        )
        fake_telegram.inject_message(group, OWNER, "and you?", chat_type="group", reply_to_bot=True)
        # Taken in order, answered in order: a turn for the first would have come first.
        await fake_telegram.await_for(lambda m: m.chat_id == group, count=2)
    assert len(model.requests) == 2
    first = last_user_content(model.requests[0])
    assert "telegram group | from Ann" in first
    assert first.endswith("what time is it?") and BOT_USERNAME not in first
    assert "and you?" in last_user_content(model.requests[1])


async def test_rejected_html_is_resent_as_plain_text(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.fail_next(
            "sendMessage", status=400, description="Bad Request: can't parse entities: unsupported"
        )
        model.script(text("Some **bold** news"))
        fake_telegram.inject_message(OWNER, OWNER, "news?")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    assert reply.parse_mode is None and reply.text == "Some **bold** news"
    html_tries = [
        c
        for c in fake_telegram.calls
        if c.method == "sendMessage" and c.params.get("parse_mode") == "HTML"
    ]
    assert [c.status for c in html_tries] == [400]


async def test_429_is_waited_out_then_sent(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.fail_next("sendMessage", status=429, retry_after=1)
        fake_telegram.inject_message(OWNER, OWNER, "ping")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=8)
    assert reply.plain and reply.plain.startswith("echo: ")
    statuses = [c.status for c in fake_telegram.calls if c.method == "sendMessage"]
    assert statuses == [429, 200]


async def test_prompt_is_identical_across_turns_and_delivery_follows_user(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "first")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "second")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    one, two = model.requests
    assert one["messages"][0]["role"] == two["messages"][0]["role"] == "system"
    assert one["messages"][0]["content"] == two["messages"][0]["content"]
    assert "Telegram" in one["messages"][0]["content"]
    for request in (one, two):
        *_, user, delivery = request["messages"]
        assert user["role"] == "user"
        assert delivery["role"] == "system" and "[IMAGE:<path-or-url>]" in delivery["content"]
    assert [m["role"] for m in two["messages"]] == ["system", "user", "assistant", "user", "system"]


async def test_provider_refusing_late_system_message_still_answers(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    model.reject_non_leading_system = True
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "hello")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "again")
        replies = await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    assert all((r.plain or "").startswith("echo: ") for r in replies)
    refused, moved, remembered = model.requests
    assert refused["messages"][-1]["role"] == "system"
    for request in (moved, remembered):  # the instructions now ride in the user turn
        assert [m["role"] for m in request["messages"]].count("system") == 1
        note = request["messages"][-1]["content"]
        assert "Operator note" in note and "[IMAGE:<path-or-url>]" in note


async def test_history_survives_a_restart_and_new_clears_it(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "remember the word kiwi")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "what was the word?")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
        fake_telegram.inject_message(OWNER, OWNER, "/new")
        await fake_telegram.await_for(lambda m: m.plain == "Started a fresh conversation.")
        fake_telegram.inject_message(OWNER, OWNER, "anything?")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=4)
    after_restart = model.requests[1]["messages"]
    assert "remember the word kiwi" in after_restart[1]["content"]
    after_new = model.requests[2]["messages"]
    assert [m["role"] for m in after_new] == ["system", "user", "system"]


async def test_stop_cancels_a_slow_turn(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        model.script(text("too late", delay_s=10))
        fake_telegram.inject_message(OWNER, OWNER, "think hard")
        await eventually(lambda: model.requests, what="the slow turn asked the model")
        fake_telegram.inject_message(OWNER, OWNER, "/stop")
        replies = await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    assert {r.plain for r in replies} == {"Stopping.", "Stopped."}


async def test_new_during_a_slow_turn_starts_the_conversation_empty(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    """/new stops the running turn; the stopped turn's question is not stored, as it was,
    in the session /new had just begun (and a tainted one would have tainted it)."""
    async with daemon():
        model.script(text("too late", delay_s=10), text("fresh"))
        fake_telegram.inject_message(OWNER, OWNER, "the old question")
        await eventually(lambda: model.requests, what="the slow turn asked the model")
        fake_telegram.inject_message(OWNER, OWNER, "/new")
        await fake_telegram.await_for(lambda m: m.plain == "Started a fresh conversation.")
        await fake_telegram.await_for(lambda m: m.plain == "Stopped.")
        fake_telegram.inject_message(OWNER, OWNER, "a new one")
        await fake_telegram.await_for(lambda m: m.plain == "fresh")
    asked = [str(m["content"]) for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert len(asked) == 1 and "a new one" in asked[0], asked


async def test_twenty_chats_at_once_each_answered_in_order(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    model.latency_s = 0.2
    chats = [1000 + i for i in range(20)]
    async with daemon():
        for number in range(3):
            for chat in chats:
                fake_telegram.inject_message(chat, OWNER, f"message {number}")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=60, timeout=20)
    for chat in chats:
        answers = [t.rsplit("\n", 1)[-1] for t in texts(fake_telegram, chat)]
        assert answers == ["message 0", "message 1", "message 2"]


def _is_photo_marker(sent: SentMessage) -> bool:
    return sent.method == "sendMessage"


async def test_incoming_photo_and_voice_are_saved_and_referenced(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_photo(OWNER, OWNER, b"JPEGDATA", caption="what is this?")
        await fake_telegram.await_for(_is_photo_marker)
        fake_telegram.inject_voice(OWNER, OWNER, b"OGGDATA")
        await fake_telegram.await_for(_is_photo_marker, count=2)
    photo_turn = last_user_content(model.requests[0])
    voice_turn = last_user_content(model.requests[1])
    assert "what is this?" in photo_turn
    [photo_path] = [
        line[len("[IMAGE:") : -1] for line in photo_turn.splitlines() if line.startswith("[IMAGE:")
    ]
    assert photo_path.startswith("inbox/")
    assert (home / "workspace" / photo_path).read_bytes() == b"JPEGDATA"
    assert "[VOICE:inbox/" in voice_turn and "no transcription is configured" in voice_turn


async def test_streamed_reply_is_edited_then_finished(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__STREAM_REPLIES", "true")
    async with daemon():
        # Each piece comes after the edit interval: the preview shows the reply growing.
        slow = STREAM_EDIT_EVERY_S + 0.2
        fake_llm.script(Reply("A **streamed** answer in several pieces", piece_delay_s=slow))
        fake_telegram.inject_message(OWNER, OWNER, "stream please")
        await fake_telegram.await_for(lambda m: m.parse_mode == "HTML", timeout=8)
    [message] = [m for m in fake_telegram.sent if m.method == "sendMessage"]
    assert message.plain == "A streamed answer in several pieces"
    assert message.text == "A <b>streamed</b> answer in several pieces"
    assert message.edits and "**streamed**" in (message.edits[-1] or "")  # shown while written


async def test_polling_survives_server_errors(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    fake_telegram.fail_next("getUpdates", status=502, times=2)  # the first two polls
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "still there?")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=15)
    assert reply.plain and reply.plain.endswith("still there?")
    assert [c.status for c in fake_telegram.calls if c.method == "getUpdates"][:3] != [200] * 3


async def test_bad_token_is_reported_and_the_daemon_does_not_crash(
    telegram_model_env: dict[str, str],
    monkeypatch: Any,
    caplog: Any,
) -> None:
    from agent.config import load_settings
    from agent.daemon.serve import serve

    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN", "999:WRONG")
    code = await asyncio.wait_for(serve(load_settings(), stop=asyncio.Event()), 20)
    assert code == 2
    assert any("telegram did not start: InvalidToken" in r.getMessage() for r in caplog.records)


def test_agent_run_serves_until_sigterm_then_exits_0(
    telegram_env: dict[str, str],
    fake_telegram: FakeTelegram,
) -> None:
    import os
    import signal
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "-v", "run"],
        env={**os.environ, **telegram_env},
        cwd=Path(__file__).resolve().parent.parent,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fake_telegram.inject_message(OWNER, OWNER, "are you up?")
        [reply] = fake_telegram.wait_for(lambda m: m.method == "sendMessage", timeout=60)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert reply.plain and reply.plain.endswith("are you up?")
    assert process.returncode == 0, stderr
    assert "telegram started" in stderr and "stopping" in stderr


async def test_voice_note_is_transcribed_when_a_model_is_set(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__TRANSCRIPTION_MODEL", "openai/whisper-1")
    fake_llm.transcript = "turn the lights off please"
    async with daemon():
        fake_telegram.inject_voice(OWNER, OWNER, b"OGG voice bytes")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=10)
    assert fake_llm.transcriptions == [("whisper-1", b"OGG voice bytes")]
    turn = last_user_content(fake_llm.requests[0])
    assert "(voice note transcript: turn the lights off please)" in turn


async def test_status_reports_model_length_and_last_turn(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "hello")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "/status")
        replies = await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    status = replies[1].plain or ""
    assert "Model: openai/test-model" in status
    assert "Conversation: 2 messages" in status
    assert "completion tokens" in status and "ended: done" in status
    assert len(model.requests) == 1  # /status never reaches the model


async def test_provider_refusing_tools_gets_the_xml_protocol(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: Any,
    home: Path,
) -> None:
    model.reject_tools = True
    model.script(
        text(
            '<tool_call>{"name": "file_write", "arguments": '
            '{"path": "x.txt", "content": "via xml"}}</tool_call>'
        ),
        text("Saved it."),
    )
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "save a note")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "and again")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    assert (home / "workspace" / "x.txt").read_text() == "via xml"
    refused, *later = model.requests
    assert "tools" in refused
    assert all("tools" not in r for r in later)  # remembered: no second refusal
    assert all("<tool_call>" in r["messages"][0]["content"] for r in later)  # protocol taught
    assert texts(fake_telegram)[0] == "Saved it."


async def test_a_strangers_photo_is_not_downloaded(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_photo(777, 777, b"unwanted", caption="look")
        await fake_telegram.await_for(lambda m: m.chat_id == 777)
    inbox = home / "workspace" / "inbox"
    assert not (inbox.exists() and list(inbox.iterdir()))
    assert not [c for c in fake_telegram.calls if c.method == "getFile"]
    assert model.requests == []


async def test_a_download_stops_at_the_limit_when_no_size_is_announced() -> None:
    """getFile and the file server may both leave the size out: the body is read only up to
    the limit (channels/telegram/download.py), not whole into memory."""
    async with endless_file("/file/x.pdf") as served:

        async def get_file(file_id: str) -> Any:
            return SimpleNamespace(file_size=None, file_path=served.url)

        with pytest.raises(OSError) as refused:
            await download(SimpleNamespace(get_file=get_file), "f1", 2**20)  # type: ignore[arg-type]
    assert refused.value.errno == errno.EFBIG
    assert "files over 1 MB are not accepted" in str(refused.value)
    assert served.sent < 32 * 2**20
