"""Whose conversation it is (scopes, the owner's private files) and long chats summarised,
end to end through the daemon with the fake Telegram and the in-process model double."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from daemon_process import rows
from fakes.model_double import ScriptedModel, echo, text
from fakes.telegram_server import FakeTelegram

from agent.config import PersonSettings
from agent.conversation.compaction import SUMMARY_HEADING, SUMMARY_INSTRUCTIONS
from agent.conversation.scopes import OWNER, LegacyScope, audience_of
from agent.durable.sessions import estimate_tokens
from channels.base import ChatRef, IncomingMessage

ALICE, BOB, GROUP = 42, 43, -100500
PEOPLE = {
    "alice": PersonSettings(telegram=str(ALICE), discord="9001", owner=True),
    "bob": PersonSettings(telegram=str(BOB)),
}


def message(channel: str, chat_id: str, sender: str, *, group: bool = False) -> IncomingMessage:
    return IncomingMessage(ChatRef(channel, chat_id), sender, "Name", "hi", is_group=group)


@pytest.mark.parametrize(
    ("msg", "scope", "private"),
    [
        (message("cli", "oneshot:1", "owner"), OWNER, True),
        (message("telegram", str(ALICE), str(ALICE)), OWNER, True),
        (message("discord", "dm-channel-7", "9001"), OWNER, True),  # same person, other channel
        (message("telegram", str(BOB), str(BOB)), "person:bob", False),
        (message("telegram", "77", "77"), "person:telegram:77", False),  # not in [people]
        (message("telegram", str(GROUP), str(ALICE), group=True), f"group:telegram:{GROUP}:",
         False),
    ],
)  # fmt: skip
def test_a_message_belongs_to_a_person_or_a_group(
    msg: IncomingMessage, scope: str, private: bool
) -> None:
    audience = audience_of(msg, PEOPLE)
    assert audience.scope == scope and audience.owner_private is private
    assert audience.recall[0] == scope
    assert not any(s.startswith("person:") for s in audience.recall) or not msg.is_group


def test_group_memories_reach_private_chats_only_when_shared() -> None:
    dm = message("telegram", str(BOB), str(BOB))
    assert "group:*" not in audience_of(dm, PEOPLE).recall
    assert "group:*" in audience_of(dm, PEOPLE, share_group_memories=True).recall
    group = message("telegram", str(GROUP), str(BOB), group=True)
    assert audience_of(group, PEOPLE, share_group_memories=True).recall == (
        f"group:telegram:{GROUP}:", f"chat:telegram:{GROUP}:")  # fmt: skip


def test_memories_from_before_scopes_go_to_whom_they_can_be_traced() -> None:
    legacy = LegacyScope(PEOPLE)
    assert legacy("cli:oneshot:abc:") == OWNER
    assert legacy(f"telegram:{ALICE}:") == OWNER
    assert legacy(f"telegram:{BOB}:") == "person:bob"
    assert legacy(f"telegram:{GROUP}:") == f"chat:telegram:{GROUP}:"
    assert legacy("discord:123:") == "chat:discord:123:"  # a DM or a server channel: unknown


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


async def test_memory_md_and_user_md_reach_only_the_owners_private_chat(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__TELEGRAM", str(ALICE))
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__OWNER", "true")
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS", f'["{ALICE}", "{BOB}"]')
    async with daemon():
        workspace = home / "workspace"
        (workspace / "MEMORY.md").write_text("# Memory\n\nThe safe code is in the blue box.\n")
        (workspace / "USER.md").write_text("# User\n\nAlice, allergic to peanuts.\n")
        fake_telegram.inject_message(ALICE, ALICE, "hello from my DM")
        await fake_telegram.await_for(lambda m: m.chat_id == ALICE)
        fake_telegram.inject_message(GROUP, ALICE, "@pinclaw_test_bot hello group",
                                     chat_type="group")  # fmt: skip
        await fake_telegram.await_for(lambda m: m.chat_id == GROUP)
        fake_telegram.inject_message(BOB, BOB, "hello from Bob")
        await fake_telegram.await_for(lambda m: m.chat_id == BOB)

    def prompt_of(words: str) -> str:
        return next(system_prompt(r) for r in model.requests if words in str(r["messages"]))

    by_chat = {
        "alice": prompt_of("hello from my DM"),
        "group": prompt_of("hello group"),
        "bob": prompt_of("hello from Bob"),
    }
    assert "blue box" in by_chat["alice"] and "peanuts" in by_chat["alice"]
    for shared in ("group", "bob"):
        assert "blue box" not in by_chat[shared] and "peanuts" not in by_chat[shared]
        assert "SOUL.md" in by_chat[shared]  # the rest of the workspace files still go


def note(n: int) -> str:
    return f"note {n}: " + "words " * 20


def turn_tokens() -> int:
    """What one turn of these tests costs by the store's estimate (envelope, then echo)."""
    user = {
        "role": "user",
        "content": f"[Mon 2026-11-23 19:17 Etc/UTC | telegram | from User]\n{note(0)}",
    }
    answer = {"role": "assistant", "content": f"echo: {user['content']}"}
    return estimate_tokens(json.dumps(user)) + estimate_tokens(json.dumps(answer))


def summary_requests(llm: ScriptedModel) -> list[dict[str, Any]]:
    return [r for r in llm.requests if system_prompt(r) == SUMMARY_INSTRUCTIONS]


@pytest.mark.both_stores
async def test_a_long_chat_is_summarised_once_and_the_originals_stay(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Over budget at 5 earlier turns; compaction keeps 2, so the next fold is 3 turns away.
    budget = int(turn_tokens() * 4.5)
    monkeypatch.setenv("PINCLAW_AGENT__HISTORY_BUDGET_TOKENS", str(budget))

    def respond(body: dict[str, Any]) -> Any:
        if system_prompt(body) == SUMMARY_INSTRUCTIONS:
            return text("- Alice's boat is called Wavecrest.")
        return echo(body)

    model.responder = respond
    async with daemon():
        for n in range(8):
            fake_telegram.inject_message(ALICE, ALICE, note(n))
            await fake_telegram.await_for(lambda m: m.chat_id == ALICE, count=n + 1)
    # Each fold runs as its turn starts, before its model call: the 8th answer means all ran.
    summaries = summary_requests(model)
    assert len(summaries) == 1  # compacted down to half the budget: not again at once
    assert "note 0" in str(summaries[0]["messages"][1]["content"])
    later = [r for r in model.requests[model.requests.index(summaries[0]) + 1 :]
             if r not in summaries]  # fmt: skip
    first_after = later[0]["messages"]
    assert first_after[1]["content"].startswith(SUMMARY_HEADING)
    assert "Wavecrest" in first_after[1]["content"]
    sent_history = sum(len(str(m["content"])) for m in first_after[1:-2])
    assert sent_history // 3 <= budget  # the history sent is within the budget again
    [stored] = rows(home / "state.db", "SELECT COUNT(*), SUM(compacted) FROM messages")
    [(up_to,)] = rows(home / "state.db", "SELECT up_to_turn FROM summaries")
    assert stored[0] == 16 and 1 <= stored[1] < 16  # every original kept, the old ones marked
    assert up_to * 2 == stored[1]


@pytest.mark.both_stores
async def test_a_failed_summary_falls_back_to_dropping_the_oldest_turns(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budget = int(turn_tokens() * 4.5)
    monkeypatch.setenv("PINCLAW_AGENT__HISTORY_BUDGET_TOKENS", str(budget))

    def respond(body: dict[str, Any]) -> Any:
        return text("") if system_prompt(body) == SUMMARY_INSTRUCTIONS else echo(body)

    model.responder = respond
    async with daemon():
        for n in range(6):
            fake_telegram.inject_message(ALICE, ALICE, note(n))
            await fake_telegram.await_for(lambda m: m.chat_id == ALICE, count=n + 1)
    last = [r for r in model.requests if system_prompt(r) != SUMMARY_INSTRUCTIONS][-1]
    assert "note 5" in str(last["messages"][-2]) or "note 5" in str(last["messages"][-1])
    assert "note 0" not in str(last["messages"])  # dropped, not summarised
    assert sum(len(str(m["content"])) for m in last["messages"][1:-2]) // 3 <= budget
    assert rows(home / "state.db", "SELECT COUNT(*) FROM summaries") == [(0,)]


async def test_auto_recall_adds_what_is_relevant_and_nothing_otherwise(tmp_path: Path) -> None:
    from agent.conversation.recall import readable_scopes, remembered_block
    from tools.config import MemorySettings
    from tools.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "state.db")
    await store.add(OWNER, "Alice's boat is called Wavecrest.")
    await store.add("group:telegram:-100:", "The club meets on Fridays.")
    settings = MemorySettings()
    block = await remembered_block(store, (OWNER,), "what is my boat called?", settings)
    assert block.startswith("[Remembered") and "Wavecrest" in block
    assert await remembered_block(store, (OWNER,), "how hot is the oven today?", settings) == ""
    off = MemorySettings(auto_recall=False)
    assert await remembered_block(store, (OWNER,), "what is my boat called?", off) == ""
    shared = await readable_scopes(store, (OWNER, "group:*"))
    assert shared == (OWNER, "group:telegram:-100:")
    block = await remembered_block(store, shared, "when does the club meet?", settings)
    assert "Fridays" in block


@pytest.mark.parametrize(
    "chat",
    [
        ChatRef("telegram", "42"),
        ChatRef("telegram", "-100123", "7"),
        ChatRef("cli", "session:work"),  # the terminal's ids hold ":"
        ChatRef("cli", "session:a:b"),
        ChatRef("discord", "998877", "112233"),
    ],
    ids=lambda chat: chat.key,
)
def test_a_chat_key_reads_back_into_its_chat(chat: ChatRef) -> None:
    assert ChatRef.parse(chat.key) == chat


def test_a_key_without_its_thread_part_has_no_thread() -> None:
    assert ChatRef.parse("telegram:42") == ChatRef("telegram", "42")
