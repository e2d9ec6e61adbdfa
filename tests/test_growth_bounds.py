"""What must not grow without bound while the daemon runs for months, or while one busy or
hostile chat (or a crowd of strangers) pushes it. Each test drives the real component (or
the daemon in this event loop on the loopback doubles) N times and asserts that what it
keeps — rows in state.db, entries in a long-lived dict or set — stays bounded.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.discord_server import FakeDiscord
from fakes.model_double import ScriptedModel

from agent.durable.file.state_db import Transaction
from agent.durable.owner import pairings
from agent.durable.owner.pairings import KEPT_S, Pairings
from agent.durable.store import open_store
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.queues.courier import Courier
from agent.runtime.queues.reactions import Reactions
from agent.runtime.queues.voice_replies import VOICE_NAME
from agent.runtime.turn_setup import Access
from agent.security import Scrubber
from channels.base import ChatRef, IncomingMessage, OutgoingMedia, OutgoingPart, Reply
from channels.config import REACTIONS
from channels.terminal import TerminalChannel

# -- HTTP in: OpenAI's API, stateless calls -----------------------------------------------------

API_KEY = "pk-alice-" + "0123456789abcdef" * 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def api_client(model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    port = _free_port()
    for name, value in {
        "PINCLAW_HTTP__ENABLED": "true",
        "PINCLAW_HTTP__PORT": str(port),
        "PINCLAW_PEOPLE__ALICE__OWNER": "true",
        "HTTP_KEY_T1": API_KEY,
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "2",
    }.items():
        monkeypatch.setenv(name, value)
    yield openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)


async def test_stateless_api_calls_do_not_keep_every_requests_copy_of_the_history(
    model: ScriptedModel, daemon: Callable[[], Daemon], api_client: Any, home: Path
) -> None:
    """A stateless API call's chat (`api:<person>:once-<uuid>`) must be removed when its turn ends
    (`SessionStore.forget`): nobody can name it again. Front ends like Open WebUI send the whole
    history with each request; when these chats were kept, a conversation of N requests left
    N*(N+1) rows in state.db and in every backup. Bounded: one conversation's worth of rows."""
    requests = 30
    conversation: list[dict[str, str]] = []
    async with daemon():
        for n in range(requests):
            conversation.append({"role": "user", "content": f"question {n}: " + "words " * 40})
            answer = await api_client.chat.completions.create(
                model="any",
                messages=conversation,
            )
            conversation.append({"role": "assistant", "content": answer.choices[0].message.content})
    [(kept, chats, size)] = rows(
        home / "state.db",
        "SELECT COUNT(*), COUNT(DISTINCT chat_key), COALESCE(SUM(LENGTH(message)), 0)"
        " FROM messages WHERE chat_key LIKE 'api:%:once-%'",
    )
    assert kept <= 2 * requests, (
        f"{requests} stateless requests of one conversation left {kept} rows ({size} bytes) "
        f"in {chats} chats nobody can reach again"
    )


# -- the outbox: delivered voice notes -----------------------------------------------------------


async def test_delivered_voice_notes_do_not_stay_in_the_outbox(tmp_path: Path) -> None:
    """A voice note rides in the outbox as base64 (`OutgoingMedia.spoken`) only so that a restart
    before the send still sends it. Once delivered, its bytes must go: `_let_go_of_payloads`
    empties `spoken` and `inline`. When they were kept, `reply = "always"` added tens of KB per
    answer to state.db and each daily backup, on a Pi's SD card. Bounded: a couple of notes."""
    store = await open_store(tmp_path / "state.db", url=None)
    chat = ChatRef("telegram", "42")
    note_bytes, notes = 48_000, 100  # a 12 s note at 32 kbit/s
    delivered: list[int] = []

    class Platform(TerminalChannel):
        async def send_part(self, to: ChatRef, part: OutgoingPart) -> None:
            delivered.append(len(part.media.data or b"") if part.media else 0)

    courier = Courier(Platform(), store.outbox, backoff_s=0.05)
    try:
        for _ in range(notes):
            spoken = base64.b64encode(os.urandom(note_bytes)).decode()
            parts = [OutgoingPart("caption", OutgoingMedia("VOICE", VOICE_NAME, spoken=spoken))]

            def queue(conn: Transaction, parts: list[OutgoingPart] = parts) -> int:
                return store.outbox.insert(conn, chat, parts, inbox_id=None, deliver_within_s=3600)

            await store.db.write(queue)
            courier.wake(chat.key)
            await eventually(lambda: not courier.busy, within=10)
        assert delivered == [note_bytes] * notes and await store.outbox.waiting() == 0
        [(kept,)] = await store.db.fetchall(
            "SELECT COALESCE(SUM(LENGTH(parts)), 0) FROM outbox WHERE status = 'sent'"
        )
    finally:
        await store.close()
    note_in_b64 = note_bytes * 4 // 3
    assert kept <= 3 * note_in_b64, (
        f"{notes} voice notes, all delivered, still hold {kept:,} bytes of the outbox "
        f"({kept // note_in_b64} notes' worth)"
    )


# -- Discord: slash commands nobody answers ------------------------------------------------------

STRANGER = "777"


async def test_discord_keeps_no_interaction_per_unanswered_slash_command(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slash command's interaction waits for its reply in `PendingInteractions`
    (channels/discord/interactions.py), dropped after KEPT_S or past MAX_KEPT. A stranger's
    commands get one answer, then silence; when every interaction was kept, each /status a
    hostile stranger ran grew the daemon's memory for good. Bounded: not one per command."""
    from channels.discord import channel as discord_channel

    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__REGISTER_SLASH_COMMANDS", "true")
    made: list[Any] = []
    init = discord_channel.DiscordChannel.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(discord_channel.DiscordChannel, "__init__", keep)
    commands = 300
    async with daemon():
        [channel] = made
        for _ in range(commands):
            fake_discord.inject_slash_command(STRANGER, "status")
        await eventually(
            lambda: len(fake_discord.interaction_responses) >= commands,
            within=30,
            what="every command acknowledged",
        )
        await eventually(lambda: fake_discord.messages, within=10, what="the stranger's one answer")
        await asyncio.sleep(0.5)  # anything still to be sent goes out
        kept = len(channel._interactions)
    assert model.requests == []
    assert kept < commands // 2, (
        f"{kept} of {commands} slash commands' interactions are still held by the channel"
    )


# -- strangers: the polite reply's memory --------------------------------------------------------


async def test_the_doorkeeper_does_not_remember_every_stranger_for_ever(tmp_path: Path) -> None:
    """The doorkeeper remembers whom it gave the polite reply (`Doorkeeper._told`, through
    `_first_told`) for CODE_LIFE_S and at most TOLD_KEPT strangers. A public bot hit by a spam
    wave meets a new sender with each message; the set once kept every one for the life of the
    daemon. Bounded: not one entry per stranger."""
    store = await open_store(tmp_path / "state.db", url=None)

    class Telegram(TerminalChannel):
        name = "telegram"

    telegram = SimpleNamespace(pairing=False)  # pairing on: the same once MAX_PENDING are open
    settings = SimpleNamespace(channels=SimpleNamespace(telegram=telegram), people={})
    setup: Any = SimpleNamespace(access=Access(), settings=settings)
    replies = 0

    async def queue(chat: ChatRef, reply: Reply) -> int:
        nonlocal replies
        replies += 1
        return replies

    door = Doorkeeper(Telegram(), setup, store.db, queue, lambda _key: None, Scrubber())
    strangers = 50_000
    try:
        for n in range(strangers):
            sender = str(1_000_000 + n)
            msg = IncomingMessage(ChatRef("telegram", sender), sender, "someone", "hello")
            assert not door.allows_message(msg)
            assert not await door.admit(msg)
    finally:
        await door.close()
        await store.close()
    assert replies == strangers  # each got the one polite line
    assert len(door._told) < strangers // 2, (
        f"the doorkeeper remembers {len(door._told)} of {strangers} strangers"
    )


# -- reactions: the emoji shown on each message --------------------------------------------------


class _Reacts:
    """A channel that reacts; the final emoji (✅) refused when `refuse_done`."""

    name = "discord"

    def __init__(self, refuse_done: bool = False) -> None:
        self.refuse_done = refuse_done

    async def react(self, chat: ChatRef, message_id: str, emoji: str, previous: str = "") -> None:
        if self.refuse_done and emoji == REACTIONS[2]:
            raise RuntimeError("404 Not Found: Unknown Message")  # deleted meanwhile


def _setup() -> Any:
    return SimpleNamespace(settings=SimpleNamespace(channels=SimpleNamespace(reactions=REACTIONS)))


async def test_reactions_keep_no_record_of_messages_already_answered() -> None:
    """`Reactions._shown` (the emoji standing on each message) keeps at most the latest SHOWN_KEPT
    messages. An instance often never sees a message's end: its ✅ fails (the message deleted, a
    429), or another process sharing the store runs the turn. Such entries once stayed for the
    life of the daemon, one per message. Bounded: not one entry per message answered."""
    messages = 5_000
    chat = ChatRef("discord", "5001")

    refused = Reactions(_Reacts(refuse_done=True), _setup())  # type: ignore[arg-type]
    intake, turns = (Reactions(_Reacts(), _setup()) for _ in range(2))  # type: ignore[arg-type]
    for n in range(messages):
        msg = IncomingMessage(chat, "111", "alice", "hi", message_id=str(10**17 + n))
        for stage in ("taken", "working", "done"):
            refused.mark([msg], stage)
        intake.mark([msg], "taken")  # the process that holds the intake
        turns.mark([msg], "working")  # the process that ran the turn
        turns.mark([msg], "done")
        if n % 500 == 0:
            await asyncio.sleep(0)
    await eventually(lambda: not (refused._last or intake._last or turns._last), within=20)
    assert len(turns._shown) == 0  # where the whole story was told, nothing is kept
    assert len(refused._shown) < messages // 2, (
        f"{len(refused._shown)} of {messages} answered messages whose ✅ failed are remembered"
    )
    assert len(intake._shown) < messages // 2, (
        f"the intake's process remembers {len(intake._shown)} of {messages} messages "
        "another process answered"
    )


# -- pairing: strangers' wrong codes ---------------------------------------------------------


async def test_pairing_locks_of_strangers_are_forgotten_like_their_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stranger's `pairing_locks` row (their wrong codes) must be forgotten like an ended code:
    pairings' `_forget_old` removes both once over for KEPT_S (30 days). Anyone who sends what
    reads as a code gets such a row; they were once kept for ever, one per stranger. Bounded:
    after KEPT_S, strangers with no live window or lock leave no row."""
    now = [1_700_000_000.0]
    monkeypatch.setattr(pairings, "wall_clock", lambda: now[0])
    store = await open_store(tmp_path / "state.db", url=None)
    book = Pairings(store.db)
    strangers = 1_000
    try:
        for n in range(strangers):
            sender = str(2_000_000 + n)
            msg = IncomingMessage(ChatRef("telegram", sender), sender, "x", "/start ABCD-EFGH")
            assert (await book.redeem(msg, "ABCDEFGH")).verdict == "wrong"
        now[0] += KEPT_S + 86_400  # every window and lock long over
        for n in range(3):  # pairing goes on: a new stranger asks, another guesses
            sender = str(3_000_000 + n)
            msg = IncomingMessage(ChatRef("telegram", sender), sender, "x", "hello")
            await book.ask(msg)
            await book.redeem(msg, "ABCDEFGH")
        [(locks,)] = await store.db.fetchall("SELECT COUNT(*) FROM pairing_locks")
        [(codes,)] = await store.db.fetchall("SELECT COUNT(*) FROM pairing_codes")
    finally:
        await store.close()
    assert codes <= 3  # codes are forgotten after KEPT_S, as the locks are
    assert locks <= 10, (
        f"{locks} pairing_locks rows kept for strangers {KEPT_S / 86_400:.0f}+ days on"
    )
