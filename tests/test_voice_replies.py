"""Voice replies (issue 40): `agent run` in this process with the real Telegram adapter on the
fake Bot API and LiteLLM's speech API on the model double, whose /audio/speech answers real
OGG/Opus (tests/fakes/ogg_opus.py) and whose Telegram double refuses a sendVoice that is not
OGG with an Opus head. The note goes with the text as its caption, or before it when the
text is too long; code, tables and links are not read aloud; a failed synthesis sends the
text with a line why; "when_spoken_to" speaks only after a voice note; a note made and not
yet sent when pinclaw stops is sent once at the next start, without a second synthesis."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from conftest import Daemon, eventually
from fakes.discord_server import FakeDiscord
from fakes.llm_server import FakeLLM, Reply, text
from fakes.ogg_opus import ogg_opus_silence, opus_problem
from fakes.telegram_models import SentMessage
from fakes.telegram_server import FakeTelegram

from channels.telegram.channel import STREAM_EDIT_EVERY_S

OWNER = 42
ANSWER = "Water them **twice** a week. See [the guide](https://example.com/guide)."
CODE = "Run this:\n\n```sh\nrm -rf build\n```\n\nThen build again."


@pytest.fixture
def voice_settings(
    llm_env: dict[str, str], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "PINCLAW_VOICE__REPLY": "always",
        "PINCLAW_VOICE__MODEL": "openai/tts-test",
        "PINCLAW_VOICE__VOICE": "nova",
        "PINCLAW_VOICE__API_BASE": fake_llm.base_url,
        "PINCLAW_VOICE__TIMEOUT_S": "10",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def voice_env(voice_settings: None, telegram_env: dict[str, str]) -> None:
    """[voice] reply = "always", spoken by the model double, on Telegram."""


def sent(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.sent if m.chat_id == OWNER]


async def test_a_reply_goes_as_an_ogg_opus_voice_note_with_its_text_as_caption(
    voice_env: None, fake_llm: FakeLLM, fake_telegram: FakeTelegram, daemon: Callable[[], Daemon]
) -> None:
    async with daemon():
        fake_llm.script(text(ANSWER), text(CODE))
        fake_telegram.inject_message(OWNER, OWNER, "how often?")
        await eventually(lambda: len(sent(fake_telegram)) == 1, within=10)
        fake_telegram.inject_message(OWNER, OWNER, "and the build?")
        await eventually(lambda: len(sent(fake_telegram)) == 2, within=10)
    note, code = sent(fake_telegram)
    assert note.method == "sendVoice" and note.data is not None
    assert opus_problem(note.data) == ""
    assert note.plain == "Water them twice a week. See the guide."  # the caption, rendered
    read = fake_llm.speech.read
    assert read[0] == (
        "Water them twice a week. See the guide.\n\n"
        "The written reply also has links, not read aloud."
    )
    assert "rm -rf" not in read[1] and "Then build again." in read[1]
    assert read[1].endswith("The written reply also has code, not read aloud.")
    assert code.method == "sendVoice" and "rm -rf build" in (code.plain or "")
    speech = fake_llm.speech.requests[0]
    assert (speech["model"], speech["voice"], speech["response_format"]) == (
        "tts-test",
        "nova",
        "opus",
    )


async def test_a_long_text_follows_the_note_and_a_failed_synthesis_sends_the_text_and_why(
    voice_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_VOICE__MAX_CHARS", "5000")
    long = " ".join(f"Sentence {n} of a long answer." for n in range(50))  # over 1,024
    async with daemon():
        fake_llm.script(text(long), text("A short answer."))
        fake_telegram.inject_message(OWNER, OWNER, "tell me everything")
        await eventually(lambda: len(sent(fake_telegram)) == 2, within=10)
        fake_llm.speech.error = 500
        fake_telegram.inject_message(OWNER, OWNER, "and briefly?")
        await eventually(lambda: len(sent(fake_telegram)) == 3, within=10)
    note, whole, fallback = sent(fake_telegram)
    assert note.method == "sendVoice" and not note.plain and opus_problem(note.data or b"") == ""
    assert whole.method == "sendMessage" and whole.plain == long
    assert fallback.method == "sendMessage"
    assert (fallback.plain or "").startswith("A short answer.\n\n(No voice reply: ")
    assert "speech model failed" in (fallback.plain or "")
    assert len((fallback.plain or "").splitlines()) == 3  # the text, a blank, one line why


async def test_when_spoken_to_a_voice_note_is_answered_aloud_a_typed_message_in_text(
    voice_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_VOICE__REPLY", "when_spoken_to")
    async with daemon():
        fake_llm.script(text("Typed back."), text("Spoken back."))
        fake_telegram.inject_message(OWNER, OWNER, "typed")
        await eventually(lambda: len(sent(fake_telegram)) == 1, within=10)
        fake_telegram.inject_voice(OWNER, OWNER, ogg_opus_silence(1.0))
        await eventually(lambda: len(sent(fake_telegram)) == 2, within=10)
    typed, spoken = sent(fake_telegram)
    assert (typed.method, typed.plain) == ("sendMessage", "Typed back.")
    assert (spoken.method, spoken.plain) == ("sendVoice", "Spoken back.")
    assert fake_llm.speech.read == ["Spoken back."]


async def test_a_note_made_but_not_sent_when_pinclaw_stops_goes_once_at_the_next_start(
    voice_env: None, fake_llm: FakeLLM, fake_telegram: FakeTelegram, daemon: Callable[[], Daemon]
) -> None:
    refusing = fake_telegram.fail_for("sendVoice", 60, status=500)
    async with daemon():
        fake_llm.script(text("Kept for later."))
        fake_telegram.inject_message(OWNER, OWNER, "hello")
        await eventually(lambda: fake_telegram.rejected_calls.get("sendVoice", 0) >= 1, within=10)
    assert sent(fake_telegram) == [] and len(fake_llm.speech.requests) == 1
    refusing.end()
    async with daemon():
        await eventually(lambda: len(sent(fake_telegram)) == 1, within=15)
    [note] = sent(fake_telegram)
    assert (note.method, note.plain) == ("sendVoice", "Kept for later.")
    assert len(fake_llm.speech.requests) == 1  # read once: the outbox kept the audio


async def test_on_discord_the_note_is_a_voice_message_and_the_text_follows(
    voice_settings: None,
    discord_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_discord: FakeDiscord,
    daemon: Callable[[], Daemon],
) -> None:
    dm = fake_discord.dm_channel_id("111")
    async with daemon():
        fake_llm.script(text("Twice a week."))
        fake_discord.inject_dm("111", "how often?")
        await fake_discord.await_for(
            lambda: len([m for m in fake_discord.messages if m.channel_id == dm]) >= 2,
            timeout=10,
        )
    note, words = [m for m in fake_discord.messages if m.channel_id == dm]
    [(name, audio)] = note.attachments
    assert name == "voice-message.ogg"
    assert opus_problem(audio) == "" and note.content == ""
    assert note.payload["flags"] & (1 << 13)  # the voice-message flag
    [meta] = note.payload["attachments"]
    assert meta["duration_secs"] >= 1 and base64.b64decode(meta["waveform"])
    assert words.content == "Twice a week."


async def test_voice_sets_this_chats_replies_kept_across_a_restart_and_reset(
    voice_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_VOICE__REPLY", "never")

    def last() -> SentMessage:
        return sent(fake_telegram)[-1]

    async def say(words: str, count: int) -> SentMessage:
        fake_telegram.inject_message(OWNER, OWNER, words)
        await eventually(lambda: len(sent(fake_telegram)) == count, within=10, what=words)
        return last()

    async with daemon():
        fake_llm.script(text("In text."), text("Aloud."), text("In text again."))
        usage = "/voice always | when_spoken_to | never | reset"
        assert (await say("/voice", 1)).plain == f"Voice replies here: never (the default). {usage}"
        assert (await say("/voice loudly", 2)).plain == f"Not a voice setting: loudly. {usage}"
        assert (await say("hello", 3)).method == "sendMessage"
        assert (await say("/voice always", 4)).plain == "Voice replies here: always."
    async with daemon():  # kept in state.db
        assert (await say("hello again", 5)).method == "sendVoice"
        assert last().plain == "Aloud."
        assert (await say("/voice reset", 6)).plain == (
            "Voice replies here follow the default again: never."
        )
        assert (await say("and now?", 7)).method == "sendMessage"
    assert fake_llm.speech.read == ["Aloud."]


async def test_a_streamed_reply_read_aloud_is_shown_once(
    voice_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streaming on: the preview shows the answer while the model writes it, and the reply's
    first part is the voice note, with the same text as its caption, which cannot take a
    text's place. The preview is removed: the person reads the answer once (it stayed above
    the note, cut where the stream had got to)."""
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__STREAM_REPLIES", "true")
    slow = STREAM_EDIT_EVERY_S + 0.2
    async with daemon():
        fake_llm.script(Reply("Water them twice a week please", piece_delay_s=slow))
        fake_telegram.inject_message(OWNER, OWNER, "how often?")
        await eventually(lambda: any(m.method == "sendVoice" for m in sent(fake_telegram)), 15)
    shown = [m for m in sent(fake_telegram) if not m.deleted]
    answers = [m for m in shown if "Water them" in (m.plain or "")]
    assert [m.method for m in answers] == ["sendVoice"], [(m.method, m.plain) for m in shown]
    assert any(m.deleted and "Water them" in (m.plain or "") for m in sent(fake_telegram))
