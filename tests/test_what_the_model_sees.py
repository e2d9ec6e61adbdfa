"""What reaches the model: photos as images for models that see, and strict providers
answered after one refusal, with the lesson remembered; the daemon with the fake Telegram and
the in-process model double, and Anthropic's cache marks over the wire to the fake provider.
(Discord recordings: test_discord.)"""

from __future__ import annotations

import base64
import io
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.llm_server import FakeLLM, last_user_content
from fakes.model_double import ScriptedModel, echo, error, text
from fakes.telegram_server import FakeTelegram
from PIL import Image

OWNER = 42


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, "JPEG")
    return buffer.getvalue()


def images_in(content: Any) -> list[Image.Image]:
    if not isinstance(content, list):
        return []
    found = []
    for part in content:
        if part.get("type") == "image_url":
            header, data = part["image_url"]["url"].split(",", 1)
            assert header.startswith("data:image/") and header.endswith(";base64")
            found.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return found


async def test_a_photo_reaches_a_vision_model_as_an_image_downsized_and_only_once(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_LLM__VISION", "on")
    async with daemon():
        fake_telegram.inject_photo(OWNER, OWNER, jpeg(3000, 1000), caption="which pin is it?")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "and now?")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    first, second = model.requests
    content = last_user_content(first)
    [image] = images_in(content)
    assert image.size == (1568, 523)  # the long side cut to vision_max_px
    assert (
        "which pin is it?" in content[0]["text"] and "[IMAGE:inbox/telegram-" in content[0]["text"]
    )
    assert list((home / "workspace" / "inbox").glob("telegram-*/*photo.jpg"))  # still saved
    # the next turn's history carries the marker text, not the picture
    assert not any(images_in(m.get("content")) for m in second["messages"])
    assert "[IMAGE:inbox/telegram-" in str(second["messages"])


async def test_an_image_document_counts_as_a_photo_and_auto_vision_asks_litellm(
    telegram_model_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    async with daemon():  # vision "auto": LiteLLM does not know the fake model to see
        fake_telegram.inject_document(OWNER, OWNER, jpeg(40, 30), filename="wiring.jpg",
                                      mime_type="image/jpeg", caption="look")  # fmt: skip
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    content = last_user_content(model.requests[0])
    assert isinstance(content, str) and "[IMAGE:inbox/telegram-" in content


STRICT_REFUSALS = [
    "Conversation roles must alternate user/assistant/user/assistant/...",
    "System role not supported",
    "Unexpected message role 'system' at position 2",
]


@pytest.mark.parametrize("refusal", STRICT_REFUSALS)
async def test_a_strict_template_is_answered_after_one_refusal_and_remembered(
    refusal: str,
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    def strict(body: dict[str, Any]) -> Any:
        if any(m["role"] == "system" for m in body["messages"][1:]):
            return error(400, refusal, type="invalid_request_error")
        return echo(body)

    model.responder = strict
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "first")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
        fake_telegram.inject_message(OWNER, OWNER, "second")
        replies = await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=2)
    assert "]\nsecond" in (replies[1].plain or "")  # the echo of the second message
    assert len(model.requests) == 3  # one refusal, then both answered at once
    asked = last_user_content(model.requests[-1])
    assert "Operator note, not from the user" in asked and "Telegram" in asked
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("SELECT quirk, value FROM provider_quirks").fetchall() == [
            ("delivery", "in_user")
        ]


@pytest.mark.both_stores
async def test_a_refusal_that_names_functions_moves_the_model_to_the_text_protocol(
    telegram_model_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram,
    home: Path, daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    def no_tools(body: dict[str, Any]) -> Any:
        if body.get("tools"):
            return error(400, "This model does not support function calling.")
        return echo(body)

    model.responder = no_tools
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "hello")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    assert "tools" not in model.requests[-1]
    assert "<tool_call>" in model.requests[-1]["messages"][0]["content"]
    learned = rows(home / "state.db", "SELECT model, quirk, value FROM provider_quirks")
    assert learned == [("openai/test-model", "tools", "xml")]
    from agent.durable.learned_model_facts import LearnedModelFacts

    facts = LearnedModelFacts(learned)
    assert facts.lines() == ["openai/test-model: tools through the <tool_call> text protocol"]


async def test_a_silent_reply_in_a_group_sends_nothing_and_the_group_goes_on(
    telegram_model_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram,
    home: Path, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__STREAM_REPLIES", "true")
    group = -100900
    model.script(text("NO_REPLY"))
    async with daemon():
        fake_telegram.inject_message(group, OWNER, "@pinclaw_test_bot thanks all",
                                     chat_type="group")  # fmt: skip
        # The turn ran (a preview would show at its first piece); the next waits for it.
        await eventually(lambda: model.requests, what="the first turn asked the model")
        fake_telegram.inject_message(group, OWNER, "@pinclaw_test_bot and you?",
                                     chat_type="group")  # fmt: skip
        await fake_telegram.await_for(
            lambda m: m.chat_id == group and "and you?" in (m.plain or "")
        )
    assert len(model.requests) == 2  # the first message did get its turn
    shown = [m for m in fake_telegram.sent if m.chat_id == group]
    assert len(shown) == 1 and "NO_REPLY" not in str([m.edits for m in shown])
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("SELECT status FROM inbox").fetchall() == [("done",), ("done",)]
        assert db.execute("SELECT COUNT(*) FROM outbox").fetchone() == (1,)


async def test_an_anthropic_request_marks_the_system_prompt_as_a_cache_breakpoint(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_LLM__MODEL", "anthropic/claude-sonnet-4-5")
    monkeypatch.setenv("PINCLAW_LLM__API_BASE", fake_llm.base_url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-real")
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "hello")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage")
    assert reply.plain == "echo: anthropic"
    [body] = fake_llm.requests  # as the Messages API received it
    system = body["system"]
    assert isinstance(system, list) and system[-1]["cache_control"] == {"type": "ephemeral"}
    assert "## Tools" in system[0]["text"]


async def test_workspace_files_and_skills_edited_between_turns_reach_the_next_turn(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
) -> None:
    """The prompt is kept between turns, but an edited file, a new skill or an edited skill
    is in the very next turn's prompt."""
    workspace = home / "workspace"
    skill = workspace / "skills" / "greenhouse" / "SKILL.md"
    edits: list[Callable[[], object]] = [
        lambda: (workspace / "AGENTS.md").write_text("# Rules\n\nAlways answer in haiku.\n"),
        lambda: (skill.parent.mkdir(parents=True), skill.write_text(
            "---\nname: greenhouse\ndescription: How the greenhouse is wired.\n---\n# Steps\n")),
        lambda: skill.write_text(
            "---\nname: greenhouse\ndescription: The fan is on pin 9.\n---\n# Steps\n"),
    ]  # fmt: skip
    async with daemon():
        for n, edit in enumerate([lambda: None, *edits], start=1):
            edit()
            fake_telegram.inject_message(OWNER, OWNER, f"turn {n}")
            await fake_telegram.await_for(lambda m: m.method == "sendMessage", count=n)
    prompts = [str(r["messages"][0]["content"]) for r in model.requests]
    assert ["haiku" in p for p in prompts] == [False, True, True, True]
    assert ["greenhouse is wired" in p for p in prompts] == [False, False, True, False]
    assert ["fan is on pin 9" in p for p in prompts] == [False, False, False, True]


@pytest.mark.parametrize(("kind", "shown"), [("PNG", True), ("WEBP", True), ("TIFF", False)])
def test_only_the_formats_photos_come_in_are_decoded(kind: str, shown: bool) -> None:
    """A photo's formats are read; another that Pillow could open (TIFF here; EPS would run
    Ghostscript) is left out with its note, its decoder never reached."""
    from PIL import Image

    from agent.turns.vision import image_part

    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(buffer, kind)
    assert (image_part(buffer.getvalue(), f"a.{kind.lower()}", 1568) is not None) is shown
