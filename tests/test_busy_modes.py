"""Busy modes and bursts (issue 40), on the Telegram double with the model double: a second
message while the model works is queued, steered into the running turn, interrupts it, or is
collected with the others; a burst is one turn. Whatever the mode every message is answered
or visibly folded into an answer, and its inbox row says which turn took it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import daemon_process
import pytest
from conftest import Daemon
from fakes.discord_server import FakeDiscord
from fakes.llm_server import Outcome, last_user_content, tool_results
from fakes.model_double import FunctionModel, echo, text, tool_calls
from fakes.telegram_server import FakeTelegram, SentMessage, buttons

from agent.model.responses import LLMResponse, Message

CHAT = 42


class GatedModel(FunctionModel):
    """The model double, whose call number `hold` (from 0) waits at `gate` until the test
    lets it go."""

    def __init__(self, respond: Callable[[dict[str, Any]], Outcome | str]) -> None:
        super().__init__(respond)
        self.hold: int | None = None
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()  # that call is at the gate

    async def complete(self, messages: list[Message], **kwargs: Any) -> LLMResponse:
        if self.hold is not None and len(self.requests) == self.hold:
            self.waiting.set()
            await self.gate.wait()
        return await super().complete(messages, **kwargs)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> GatedModel:
    from agent.app import build_app
    from agent.daemon import serve

    double = GatedModel(echo)
    monkeypatch.setattr(serve, "build_app", lambda settings: build_app(settings, model=double))
    return double


def rows(home: Path) -> list[tuple[int, str, str, int | None]]:
    """The inbox as the store holds it: id, text, status, which turn took it."""
    found = daemon_process.rows(
        home / "state.db",
        "SELECT id, json_extract(message, '$.text'), status, taken_by FROM inbox ORDER BY id",
    )
    return [(int(a), str(b), str(c), d) for a, b, c, d in found]


async def stored(home: Path, count: int) -> None:
    """Until `count` messages are in the inbox (the intake stores before it acknowledges)."""
    for _ in range(500):
        if len(await asyncio.to_thread(rows, home)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} inbox rows")


def answers(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.sent if m.chat_id == CHAT]


def users(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


def busy(monkeypatch: pytest.MonkeyPatch, mode: str, debounce_ms: int | None = None) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__BUSY", mode)
    if debounce_ms is not None:
        monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__DEBOUNCE_MS", str(debounce_ms))


async def test_a_burst_of_five_messages_in_collect_is_one_turn(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy(monkeypatch, "collect")  # its debounce: 1,500 ms
    parts = ["first part", "second part", "third part", "fourth part", "fifth part"]
    async with daemon():
        for part in parts:
            fake_telegram.inject_message(CHAT, CHAT, part)
            await asyncio.sleep(0.2)
        (reply,) = await fake_telegram.await_for(lambda m: m.chat_id == CHAT, timeout=15)
    (request,) = gated.requests
    said = str(last_user_content(request))
    assert all(part in said for part in parts)
    assert said.index("first part") < said.index("fifth part")
    assert (reply.plain or "").endswith("fifth part")
    inbox = rows(home)
    assert [status for _, _, status, _ in inbox] == ["done"] * 5
    assert {taken for *_, taken in inbox} == {inbox[0][0]}


@pytest.mark.both_stores
async def test_queue_answers_a_message_sent_while_the_model_works_in_its_own_turn(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        gated.hold = 0
        fake_telegram.inject_message(CHAT, CHAT, "one")
        await gated.waiting.wait()
        fake_telegram.inject_message(CHAT, CHAT, "two")
        await stored(home, 2)
        gated.gate.set()
        first, second = await fake_telegram.await_for(lambda m: m.chat_id == CHAT, count=2)
    assert (first.plain or "").endswith("\none") and (second.plain or "").endswith("\ntwo")
    assert [taken for *_, taken in rows(home)] == [row for row, *_ in rows(home)]


@pytest.mark.both_stores
async def test_collect_answers_what_came_during_the_turn_together(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy(monkeypatch, "collect", debounce_ms=0)
    async with daemon():
        gated.hold = 0
        fake_telegram.inject_message(CHAT, CHAT, "one")
        await gated.waiting.wait()
        fake_telegram.inject_message(CHAT, CHAT, "two")
        fake_telegram.inject_message(CHAT, CHAT, "three")
        await stored(home, 3)
        gated.gate.set()
        await fake_telegram.await_for(lambda m: m.chat_id == CHAT, count=2)
    assert len(gated.requests) == 2
    assert "two\n\nthree" in str(last_user_content(gated.requests[1]))
    (one, two, three) = rows(home)
    assert (one[3], two[3], three[3]) == (one[0], two[0], two[0])


@pytest.mark.both_stores
async def test_interrupt_stops_the_turn_keeps_its_tool_effect_and_answers_both(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first turn writes a file, then waits on the model; the second message stops it.
    The new turn sees both messages; the same write again is not run twice (the journal)."""
    busy(monkeypatch, "interrupt")
    write = ("file_write", {"path": "notes.txt", "content": "kept\n"})

    def respond(request: dict[str, Any]) -> Outcome:
        if tool_results(request):
            return text("wrote it, and read your second message")
        return tool_calls(write)

    gated.responder = respond
    async with daemon():
        gated.hold = 1  # the call after the write
        fake_telegram.inject_message(CHAT, CHAT, "write the note")
        await gated.waiting.wait()
        gated.hold = None
        fake_telegram.inject_message(CHAT, CHAT, "and say when done")
        await stored(home, 2)
        gated.gate.set()
        (reply,) = await fake_telegram.await_for(lambda m: m.chat_id == CHAT, timeout=15)
    assert reply.plain == "wrote it, and read your second message"
    assert (home / "workspace" / "notes.txt").read_text() == "kept\n"
    last = gated.requests[-1]
    assert "write the note\n\nand say when done" in users(last)[-1]
    assert tool_results(last)[0].startswith("[Not run again")
    (one, two) = rows(home)
    assert (one[2], two[2], one[3], two[3]) == ("done", "done", one[0], one[0])


@pytest.mark.both_stores
async def test_steer_joins_the_running_turn_after_its_tool(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy(monkeypatch, "steer")

    def respond(request: dict[str, Any]) -> Outcome:
        if tool_results(request):
            return text("listed, and steered: " + users(request)[-1].rsplit("\n", 1)[-1])
        return tool_calls(("file_list", {"path": "."}))

    gated.responder = respond
    async with daemon():
        gated.hold = 0
        fake_telegram.inject_message(CHAT, CHAT, "list the files")
        await gated.waiting.wait()
        fake_telegram.inject_message(CHAT, CHAT, "only the markdown ones")
        await stored(home, 2)
        gated.gate.set()
        (reply,) = await fake_telegram.await_for(lambda m: m.chat_id == CHAT, timeout=15)
    assert reply.plain == "listed, and steered: only the markdown ones"
    _, second = gated.requests
    assert [m["role"] for m in second["messages"][-3:]] == ["assistant", "tool", "user"]
    (one, two) = rows(home)
    assert (one[2], two[2], one[3], two[3]) == ("done", "done", one[0], one[0])


@pytest.mark.both_stores
async def test_busy_sets_the_chats_mode_and_keeps_it(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        fake_telegram.inject_message(CHAT, CHAT, "/busy")
        fake_telegram.inject_message(CHAT, CHAT, "/busy steer")
        fake_telegram.inject_message(CHAT, CHAT, "/busy shout")
        said = await fake_telegram.await_for(lambda m: m.chat_id == CHAT, count=3)
    assert said[0].plain == (
        "While I work, a new message here: queue (/busy queue | steer | interrupt | collect)."
    )
    assert said[1].plain == "While I work, a new message here will join the answer being worked on."
    assert said[2].plain == "/busy takes one of: queue, steer, interrupt, collect, reset."
    async with daemon():  # kept across a restart
        fake_telegram.inject_message(CHAT, CHAT, "/busy")
        await fake_telegram.await_for(lambda m: m.chat_id == CHAT, count=4)
    assert answers(fake_telegram)[-1].plain.startswith("While I work, a new message here: steer")


@pytest.mark.both_stores
async def test_interrupt_while_an_approval_waits_runs_nothing_and_answers_both(
    home: Path,
    telegram_model_env: dict[str, str],
    gated: GatedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The question of the stopped turn is closed (its buttons gone) and its command never
    runs; the new turn, with both messages, is told that call's outcome is unknown (the
    journal: it was cut off) rather than running it blindly."""
    busy(monkeypatch, "interrupt")
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "30")
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("precious\n")

    def respond(request: dict[str, Any]) -> Outcome:
        if tool_results(request):
            return text("left it alone")
        return tool_calls(("shell", {"command": "rm keep.txt"}))

    gated.responder = respond
    async with daemon():
        fake_telegram.inject_message(CHAT, CHAT, "delete keep.txt")
        (first,) = await fake_telegram.await_for(lambda m: bool(buttons(m)), timeout=15)
        fake_telegram.inject_message(CHAT, CHAT, "no wait, keep it")
        await fake_telegram.await_for(lambda m: m.plain == "left it alone", timeout=15)
    assert keep.read_text() == "precious\n"
    (told,) = tool_results(gated.requests[-1])
    assert "its outcome is unknown" in told
    (closed,) = [m for m in fake_telegram.sent if m.message_id == first.message_id]
    assert not buttons(closed)
    assert "delete keep.txt\n\nno wait, keep it" in users(gated.requests[-1])[-1]
    (one, two) = rows(home)
    assert (one[2], two[2], one[3], two[3]) == ("done", "done", one[0], one[0])


async def test_discord_burst_in_collect_is_one_turn_and_each_message_is_marked_answered(
    discord_model_env: dict[str, str],
    gated: GatedModel,
    fake_discord: FakeDiscord,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy(monkeypatch, "collect")
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__DEBOUNCE_MS", "400")  # its own, over 0
    async with daemon():
        asked = [fake_discord.inject_dm("111", f"part {n}") for n in (1, 2, 3)]
        dm = fake_discord.dm_channel_id("111")
        (reply,) = await fake_discord.await_for(
            lambda: [m for m in fake_discord.messages if m.channel_id == dm] or None, 15
        )

        def answered() -> set[str]:
            added = [(m, e) for m, sign, e in fake_discord.reactions if sign == "+"]
            return {m for m, e in added if e == "✅"}

        await fake_discord.await_for(lambda: answered() == set(asked) or None, 10)
    (request,) = gated.requests
    assert "part 1\n\npart 2\n\npart 3" in str(last_user_content(request))
    assert reply.content.endswith("part 3")
