"""A third channel, added as a new one is: a folder (tests/toy_channel/: its kind and its
adapter) and one registration line, in the `toy` fixture below. The daemon runs in this
event loop with the in-process model double and knows the toy only through the registry:
its settings section and a person's id on it come from the environment, the registry builds
it, and the runtime answers, asks, pairs and schedules through it. The tests assert what the
chats show: the parts the toy was asked to send and the questions it was asked to show.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from fakes.llm_requests import last_user_content, tool_results
from fakes.model_double import ScriptedModel, text, tool_calls
from toy_channel.channel import ToyChannel
from toy_channel.kind import TOY

from agent.conversation.compaction import SUMMARY_HEADING, SUMMARY_INSTRUCTIONS
from agent.prompt.context import SILENT_REPLY
from channels import registry

OWNER, FRIEND, STRANGER = "alice", "bob", "mallory"  # the owner in [people]; allowed; nobody
GROUP = "#garden"
WAIT_S = 10.0
Request = dict[str, Any]


@pytest.fixture
def toy(model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy channel registered and enabled; alice (the owner) and bob allowed."""
    monkeypatch.setattr(registry, "CHANNEL_KINDS", (*registry.CHANNEL_KINDS, TOY))  # registered
    for name, value in {
        "PINCLAW_CHANNELS__TOY__ENABLED": "true",
        "PINCLAW_CHANNELS__TOY__ALLOWED_USERS": f'["{OWNER}", "{FRIEND}"]',
        "PINCLAW_PEOPLE__ALICE__TOY": OWNER,
        "PINCLAW_PEOPLE__ALICE__OWNER": "true",
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "2",
    }.items():
        monkeypatch.setenv(name, value)
    ToyChannel.built.clear()


def the_toy() -> ToyChannel:
    (channel,) = ToyChannel.built  # made by the registry, from [channels.toy]
    return channel


async def shown_in(toy: ToyChannel, chat_id: str, count: int) -> list[str]:
    """What chat `chat_id` shows, once it shows `count` messages."""
    await eventually(lambda: len(toy.said_in(chat_id)) >= count, WAIT_S, f"{count} in {chat_id}")
    return toy.said_in(chat_id)


pytestmark = pytest.mark.usefixtures("toy")


async def test_a_private_message_is_answered_there(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "hello over the loop")
        (reply,) = await shown_in(toy, OWNER, 1)
    assert reply.startswith("echo: ") and reply.endswith("hello over the loop")
    (request,) = model.requests
    assert "| toy |" in last_user_content(request).splitlines()[0]  # the envelope names it
    said = [str(m["content"]) for m in request["messages"]]
    assert any("Delivery on Toy: text only, no files." in m for m in said)  # its kind's


async def test_a_group_hears_the_bot_only_when_named_and_only_from_people_let_in(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    async with daemon():
        toy = the_toy()
        assert await toy.say(GROUP, FRIEND, "@toy_bot what should I plant?")
        (first,) = await shown_in(toy, GROUP, 1)
        model.script(text(SILENT_REPLY))  # the next message the model sees needs no answer
        assert not await toy.say(GROUP, FRIEND, "talking among ourselves")  # not named
        await toy.say(GROUP, STRANGER, "@toy_bot let me in")  # a stranger in a group: silence
        assert await toy.say(GROUP, OWNER, "@toy_bot nothing to say to this")
        assert await toy.say(GROUP, FRIEND, "@toy_bot and when?")
        await shown_in(toy, GROUP, 2)
        await asyncio.sleep(0.2)  # anything late would show now
    assert first.startswith("echo: ") and first.endswith("what should I plant?")
    assert toy.said_in(GROUP)[1].endswith("and when?")
    assert len(toy.said_in(GROUP)) == 2  # the silent reply sent nothing
    assert toy.said_in(STRANGER) == []  # no code for a stranger in a group
    asked = [last_user_content(r).splitlines()[-1] for r in model.requests]
    assert asked == ["what should I plant?", "nothing to say to this", "and when?"]


async def test_a_command_waits_for_the_owners_press(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("precious\n")
    model.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("done"))
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "delete keep.txt")
        (question,) = await shown_in(toy, OWNER, 1)
        assert keep.exists()  # nothing runs before the answer
        toy.press("approve", by=OWNER)
        await shown_in(toy, OWNER, 2)
    assert question.startswith("Approve shell: rm keep.txt\n(Why I ask: rm is not in the")
    (asked,) = [shown for shown in toy.shown if shown.buttons]
    assert asked.buttons == ("Approve", "Deny", "Always allow") and asked.answer == "approve"
    assert toy.said_in(OWNER)[1] == "done"
    assert not keep.exists()
    assert tool_results(model.requests[1]) == ["exit code: 0 (no output)"]


async def test_a_schedule_fires_into_the_toy_chat(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    task = "Remind Alice to water the tomatoes."
    model.script(
        tool_calls(("schedule_task", {"when": "in 1 second", "task": task})),
        text("I'll remind you."),
        text("Time to water the tomatoes!"),
    )
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "remind me in a second to water the tomatoes")
        await shown_in(toy, OWNER, 2)
    assert toy.said_in(OWNER) == ["I'll remind you.", "Time to water the tomatoes!"]
    assert tool_results(model.requests[1])[0].endswith(f": {task}")
    fired = last_user_content(model.requests[2])
    assert fired.splitlines()[0].endswith("| toy | scheduled]") and task in fired


async def test_a_stranger_gets_a_code_and_the_owner_lets_them_in(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    async with daemon():
        toy = the_toy()
        await toy.say(STRANGER, STRANGER, "hi, I'm Mallory")
        (with_code,) = await shown_in(toy, STRANGER, 1)
        (question,) = await shown_in(toy, OWNER, 1)  # in the owner's private toy chat
        toy.press("approve", by=OWNER)
        await shown_in(toy, STRANGER, 2)
        assert await toy.say(STRANGER, STRANGER, "hello again")
        await shown_in(toy, STRANGER, 3)
    code = re.search(r"\b[A-Z0-9]{4}-[A-Z0-9]{4}\b", with_code)
    assert code is not None and "I have asked the owner to let you in" in with_code
    assert "(Your toy user id is mallory;" in with_code
    assert "Mallory" in question and code.group() in question
    (asked,) = [shown for shown in toy.shown if shown.buttons]
    assert asked.buttons == ("Approve", "Deny") and asked.answer == "approve"  # no "Always"
    welcome, answer = toy.said_in(STRANGER)[1:]
    assert welcome == "The owner let you in: write to me any time."
    assert answer.startswith("echo: ") and answer.endswith("hello again")
    assert len(model.requests) == 1  # only the message after the approval reached the model


async def test_a_message_while_the_chat_is_busy_gets_a_line_where_there_are_no_reactions(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    """The toy channel cannot react (issue 40): a message that comes while the chat's turn
    waits for an approval is told it was taken, then answered in its own turn (queue)."""
    model.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("done"))
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "delete keep.txt")
        await shown_in(toy, OWNER, 1)  # the question: the turn is running
        assert await toy.say(OWNER, OWNER, "and then this")
        await shown_in(toy, OWNER, 2)
        toy.press("deny", by=OWNER)
        said = await shown_in(toy, OWNER, 4)
    assert said[1] == "Got it: I'll answer this once I've finished the answer I'm on."
    assert said[2] == "done" and said[3].endswith("and then this")


def is_summary(request: Request) -> bool:
    """The compaction's request: the chat's model asked to summarise the older turns."""
    return request["messages"][0].get("content") == SUMMARY_INSTRUCTIONS


async def test_new_while_the_turn_summarises_the_history_starts_a_really_fresh_conversation(
    model: ScriptedModel,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long chat: the next message's turn first summarises the older turns (a model call,
    seconds on a real provider). The person sends /new meanwhile and is told "Started a
    fresh conversation.": /new stops the turn (it runs as the chat's turn from the start,
    inputs and summary included), and the next question's request holds nothing of the old
    conversation. Before, /new found no running turn to stop (the turn was registered only
    after its inputs were ready), and the summary and the old turn's answer were saved into
    whichever session was current when they were written: the new one."""
    monkeypatch.setenv("PINCLAW_AGENT__MAX_HISTORY_MESSAGES", "4")
    release = asyncio.Event()
    original = model._answer

    async def gated(request: Request, on_text: Any) -> Any:
        if is_summary(request):
            await release.wait()  # the summary takes its time
        return await original(request, on_text)

    monkeypatch.setattr(model, "_answer", gated)

    def respond(request: Request) -> Any:
        if is_summary(request):
            return "Notes: the secret word is PLUM."
        return "echo: " + str(last_user_content(request)).splitlines()[-1]

    model.responder = respond
    async with daemon():
        toy = the_toy()
        for n, words in enumerate(["the secret word is plum", "second", "third"], start=1):
            assert await toy.say(OWNER, OWNER, words)
            await eventually(lambda n=n: len(toy.said_in(OWNER)) >= n, WAIT_S, f"answer {n}")
        assert await toy.say(OWNER, OWNER, "fourth")  # its turn summarises turns 1 and 2
        await eventually(lambda: any(is_summary(r) for r in model.requests), WAIT_S, "summary")
        assert await toy.say(OWNER, OWNER, "/new")
        await eventually(
            lambda: "Started a fresh conversation." in toy.said_in(OWNER), WAIT_S, "/new's reply"
        )
        release.set()
        assert await toy.say(OWNER, OWNER, "what is the secret word?")
        await eventually(
            lambda: toy.said_in(OWNER)[-1] == "echo: what is the secret word?", WAIT_S, "answer"
        )
    (fresh,) = [
        r for r in model.requests if str(last_user_content(r)).endswith("what is the secret word?")
    ]
    seen = "\n".join(str(m.get("content")) for m in fresh["messages"][1:])
    assert SUMMARY_HEADING not in seen, seen  # the fresh conversation holds no summary
    assert "plum" not in seen.lower(), seen  # nor anything of the old conversation


def _deletes_keep(request: Request) -> Any:
    """Bob's "delete keep.txt" is a shell call, which asks a person first; the rest echo."""
    asked = str(last_user_content(request))
    if request["messages"][-1]["role"] == "tool":
        return "deleted"
    if asked.endswith("delete keep.txt"):
        return tool_calls(("shell", {"command": "rm keep.txt"}))
    return "echo: " + asked.splitlines()[-1]


@pytest.fixture
def keep(home: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file Bob will ask the bot to delete; the question may wait 600 s for a press."""
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "600")
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("old\n")
    model.responder = _deletes_keep
    return keep


def still_there(path: Path) -> bool:
    return path.exists()


@pytest.mark.parametrize("busy", ["queue", "steer", "interrupt", "collect"])
async def test_in_a_group_another_persons_message_is_answered_while_a_question_waits(
    model: ScriptedModel,
    keep: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
    busy: str,
) -> None:
    """Bob asks the bot in the group to delete a file; the question waits for the owner's
    press. Alice asks something else in the same group meanwhile, and is answered at once,
    in a turn of her own, whatever the chat's busy mode (before, she waited behind Bob's
    question for its whole timeout). Then the owner approves: Bob's turn goes on, the file
    is deleted and Bob told; the next request's history holds both exchanges."""
    monkeypatch.setenv("PINCLAW_CHANNELS__BUSY", busy)
    async with daemon():
        toy = the_toy()
        assert await toy.say(GROUP, FRIEND, "@toy_bot delete keep.txt")
        await eventually(lambda: any(s.buttons for s in toy.shown), WAIT_S, "bob's question")
        assert await toy.say(GROUP, OWNER, "@toy_bot what should I plant?")
        await eventually(
            lambda: "echo: what should I plant?" in toy.said_in(GROUP),
            WAIT_S,
            "alice's answer while bob's question waits",
        )
        assert still_there(keep)
        toy.press("approve", by=OWNER)
        await eventually(lambda: "deleted" in toy.said_in(GROUP), WAIT_S, "bob's answer")
        assert not still_there(keep)
        assert await toy.say(GROUP, OWNER, "@toy_bot and now?")
        await eventually(lambda: "echo: and now?" in toy.said_in(GROUP), WAIT_S, "the next")
    (alice,) = [r for r in model.requests if "what should I plant?" in str(last_user_content(r))]
    assert "delete keep.txt" not in str(alice["messages"][-1])  # not folded into Bob's turn
    (later,) = [r for r in model.requests if str(last_user_content(r)).endswith("and now?")]
    history = "\n".join(str(m.get("content")) for m in later["messages"][1:-1])
    for said in ("delete keep.txt", "deleted", "what should I plant?", "echo: what should I"):
        assert said in history, (said, history)


async def test_stop_in_a_group_also_stops_a_turn_waiting_for_a_press(
    model: ScriptedModel, keep: Path, daemon: Callable[[], Daemon]
) -> None:
    """Bob's turn waits for a press, set aside so that the group goes on. /stop there still
    reaches it: it ends, and the file stays."""
    async with daemon():
        toy = the_toy()
        assert await toy.say(GROUP, FRIEND, "@toy_bot delete keep.txt")
        await eventually(lambda: any(s.buttons for s in toy.shown), WAIT_S, "bob's question")
        assert await toy.say(GROUP, OWNER, "@toy_bot /stop")
        await eventually(lambda: "Stopped." in toy.said_in(GROUP), WAIT_S, "bob's turn stopped")
        assert "Stopping." in toy.said_in(GROUP)
        toy.press("approve", by=OWNER)  # too late: nobody waits for it
        assert await toy.say(GROUP, OWNER, "@toy_bot still there?")
        await eventually(lambda: "echo: still there?" in toy.said_in(GROUP), WAIT_S, "answer")
    assert still_there(keep)


async def test_a_friends_chat_goes_on_while_the_owner_is_asked_privately_for_it(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    """Bob, in his own chat, asks for a change only the owner may allow (SOUL.md shapes
    every prompt): the question goes to Alice's chat. Bob's next message is answered at
    once, not after Alice's press or the question's timeout; then Alice denies, and Bob's
    first turn ends with the file unchanged."""
    soul = home / "workspace" / "SOUL.md"

    def respond(request: Request) -> Any:
        asked = str(last_user_content(request))
        if request["messages"][-1]["role"] == "tool":
            return "I could not change it."
        if asked.endswith("change the soul file"):
            return tool_calls(("file_write", {"path": "SOUL.md", "content": "be rude"}))
        return "echo: " + asked.splitlines()[-1]

    model.responder = respond
    async with daemon():
        toy = the_toy()
        before = soul.read_text()
        assert await toy.say(FRIEND, FRIEND, "change the soul file")
        (question,) = await shown_in(toy, OWNER, 1)  # asked of the owner, privately
        assert "SOUL.md" in question
        assert await toy.say(FRIEND, FRIEND, "hello?")
        await eventually(lambda: "echo: hello?" in toy.said_in(FRIEND), WAIT_S, "bob's answer")
        toy.press("deny", by=OWNER)
        await eventually(
            lambda: "I could not change it." in toy.said_in(FRIEND), WAIT_S, "bob's first turn"
        )
        assert soul.read_text() == before
    assert toy.said_in(FRIEND) == ["echo: hello?", "I could not change it."]
