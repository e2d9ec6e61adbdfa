"""The fake Telegram server speaks the Bot API well enough for the real python-telegram-bot."""

from __future__ import annotations

import asyncio
import datetime as dtm
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from conftest import eventually
from fakes.telegram_server import BOT_USERNAME, FakeTelegram, SentMessage, generated_bytes
from telegram import Bot, Update
from telegram.error import BadRequest, Conflict, InvalidToken, NetworkError, RetryAfter
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

TOKEN = "123456:TEST"
CHAT, USER = 4242, 77


@pytest.fixture
def fake(fake_telegram: FakeTelegram) -> FakeTelegram:
    """conftest.py's `fake_telegram` (its token is TOKEN), by a shorter name."""
    assert fake_telegram.token == TOKEN
    return fake_telegram


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    bot = Bot(TOKEN, base_url=fake.api_base, base_file_url=fake.file_api_base)
    await bot.initialize()
    yield bot
    await bot.shutdown()


async def test_get_me_describes_the_test_bot(bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (999, "pinclaw_test_bot", True)


async def test_a_wrong_token_is_unauthorized(fake: FakeTelegram) -> None:
    with pytest.raises(InvalidToken):
        async with Bot("1:WRONG", base_url=fake.api_base):  # initialize() calls getMe
            pass
    assert (fake.calls[-1].method, fake.calls[-1].status) == ("getMe", 401)


async def test_a_sent_message_is_recorded(bot: Bot, fake: FakeTelegram) -> None:
    msg = await bot.send_message(CHAT, "hello")
    [record] = fake.sent
    assert (record.method, record.chat_id, record.text) == ("sendMessage", CHAT, "hello")
    assert record.message_id == msg.message_id and msg.chat.id == CHAT and msg.text == "hello"


async def test_a_text_over_4096_characters_is_refused(bot: Bot, fake: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(CHAT, "x" * 5000)
    await bot.send_message(CHAT, "x" * 4096)
    assert [len(r.text or "") for r in fake.sent] == [4096]
    assert fake.calls[-2].status == 400


@pytest.mark.parametrize(
    "html", ["<b>bold", "<b>x</i>", "a < b", "AT&T", "line<br>break", "<div>x</div>"]
)
async def test_bad_html_is_refused(bot: Bot, fake: FakeTelegram, html: str) -> None:
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(CHAT, html, parse_mode="HTML")
    assert fake.sent == []


async def test_valid_html_is_accepted(bot: Bot, fake: FakeTelegram) -> None:
    html = '<b>Hi</b> <a href="https://x.org">link</a> &lt;3 '
    html += '<pre><code class="language-py">x = 1</code></pre>'
    msg = await bot.send_message(CHAT, html, parse_mode="HTML")
    assert msg.text == "Hi link <3 x = 1"
    assert [e.type for e in msg.entities] == ["bold", "text_link", "pre"]
    assert fake.sent[0].plain == "Hi link <3 x = 1" and fake.sent[0].parse_mode == "HTML"


async def test_empty_text_is_refused(bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(CHAT, "  ")


async def test_edits_update_the_record(bot: Bot, fake: FakeTelegram) -> None:
    msg = await bot.send_message(CHAT, "draft")
    await bot.edit_message_text("final", chat_id=CHAT, message_id=msg.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("final", chat_id=CHAT, message_id=msg.message_id)
    [record] = fake.sent
    assert (record.text, record.edits) == ("final", ["draft"])


async def test_a_reply_to_an_unknown_message_is_refused(bot: Bot, fake: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message to be replied not found"):
        await bot.send_message(CHAT, "hi", reply_to_message_id=12345)
    asked = fake.inject_message(CHAT, USER, "question")
    await bot.send_message(CHAT, "answer", reply_to_message_id=asked)
    assert fake.sent[0].reply_to_message_id == asked


async def test_a_photo_upload_keeps_its_bytes(bot: Bot, fake: FakeTelegram) -> None:
    data = b"\x89PNG fake image bytes"
    msg = await bot.send_photo(CHAT, data, caption="<i>look</i>", parse_mode="HTML")
    [record] = fake.sent
    assert (record.method, record.data, record.plain) == ("sendPhoto", data, "look")
    assert msg.photo and msg.caption == "look"
    file = await bot.get_file(msg.photo[-1].file_id)
    assert bytes(await file.download_as_bytearray()) == data


async def test_a_document_upload_keeps_its_name(bot: Bot, fake: FakeTelegram) -> None:
    await bot.send_document(CHAT, b"a,b\n1,2\n", filename="table.csv")
    await bot.send_chat_action(CHAT, "upload_document")
    assert (fake.sent[0].filename, fake.sent[0].data) == ("table.csv", b"a,b\n1,2\n")
    assert [a.action for a in fake.chat_actions] == ["upload_document"]


async def test_commands_are_stored(bot: Bot, fake: FakeTelegram) -> None:
    await bot.set_my_commands([("new", "Start over"), ("status", "Show status")])
    assert [c.command for c in await bot.get_my_commands()] == ["new", "status"]
    assert fake.commands[0] == {"command": "new", "description": "Start over"}


async def test_an_injected_message_is_polled_and_confirmed(bot: Bot, fake: FakeTelegram) -> None:
    message_id = fake.inject_message(CHAT, USER, "hi there", username="alice")
    [update] = await bot.get_updates(timeout=0)
    assert update.message is not None
    assert (update.message.message_id, update.message.text) == (message_id, "hi there")
    assert update.message.from_user is not None and update.message.from_user.username == "alice"
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [update.update_id]
    assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()
    assert fake.pending_updates == []


async def test_a_long_poll_returns_early_when_a_message_arrives(
    bot: Bot, fake: FakeTelegram
) -> None:
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, fake.inject_message, CHAT, USER, "late")
    started = time.monotonic()
    updates = await bot.get_updates(timeout=5)
    assert [u.message.text for u in updates if u.message] == ["late"]
    assert time.monotonic() - started < 4


async def test_a_group_mention_has_a_utf16_entity(bot: Bot, fake: FakeTelegram) -> None:
    text = f"😀 hey @{BOT_USERNAME} /status"
    fake.inject_message(-100, USER, text, chat_type="supergroup", chat_title="Lab")
    [update] = await bot.get_updates(timeout=0)
    msg = update.message
    assert msg is not None and msg.chat.type == "supergroup" and msg.chat.title == "Lab"
    assert msg.parse_entities() == {
        msg.entities[0]: f"@{BOT_USERNAME}",
        msg.entities[1]: "/status",
    }
    assert (msg.entities[0].type, msg.entities[0].offset) == ("mention", 7)


async def test_429_surfaces_as_retry_after(
    bot: Bot, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")
    fake.fail_next("sendMessage", status=429, retry_after=1)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(CHAT, "hello")
    assert caught.value.retry_after == dtm.timedelta(seconds=1)
    await bot.send_message(CHAT, "hello")
    assert [c.status for c in fake.calls if c.method == "sendMessage"] == [429, 200]


async def test_502_surfaces_as_network_error(bot: Bot, fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", status=502)
    with pytest.raises(NetworkError, match="Bad Gateway"):
        await bot.send_message(CHAT, "hello")


async def test_an_injected_photo_can_be_downloaded(bot: Bot, fake: FakeTelegram) -> None:
    data = bytes(range(256)) * 10
    fake.inject_photo(CHAT, USER, data, caption="what is this?")
    [update] = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.caption == "what is this?"
    file = await update.message.photo[-1].get_file()
    assert bytes(await file.download_as_bytearray()) == data


async def test_json_bodies_are_accepted(fake: FakeTelegram) -> None:
    async with httpx.AsyncClient() as client:
        url = f"{fake.api_base}{TOKEN}/sendMessage"
        answer = (await client.post(url, json={"chat_id": CHAT, "text": "via json"})).json()
    assert answer["ok"] and answer["result"]["text"] == "via json"
    assert fake.sent[0].text == "via json"


async def test_injected_files_of_every_kind_can_be_downloaded(bot: Bot, fake: FakeTelegram) -> None:
    fake.inject_document(CHAT, USER, b"%PDF-1.4", filename="spec.pdf", caption="read this")
    fake.inject_voice(CHAT, USER, b"OggS voice", duration=3)
    fake.inject_audio(CHAT, USER, b"ID3 song", duration=200, filename="song.mp3")
    messages = [u.message for u in await bot.get_updates(timeout=0) if u.message]
    files = [m.document or m.voice or m.audio for m in messages]
    assert [type(f).__name__ for f in files] == ["Document", "Voice", "Audio"]
    assert messages[0].document and messages[0].document.file_name == "spec.pdf"
    downloaded = [bytes(await (await f.get_file()).download_as_bytearray()) for f in files if f]
    assert downloaded == [b"%PDF-1.4", b"OggS voice", b"ID3 song"]


async def test_a_second_poller_ends_the_first_with_conflict(fake: FakeTelegram) -> None:
    async with (
        Bot(TOKEN, base_url=fake.api_base) as first,
        Bot(TOKEN, base_url=fake.api_base) as second,
    ):
        waiting = asyncio.create_task(first.get_updates(timeout=5))
        await eventually(lambda: fake.polls_begun == 1, what="the first poll waits")
        assert await second.get_updates(timeout=0) == ()
        with pytest.raises(Conflict):
            await waiting


def test_wait_for_explains_a_timeout(fake: FakeTelegram) -> None:
    with pytest.raises(TimeoutError, match="sent: nothing"):
        fake.wait_for(lambda r: r.text == "never", timeout=0.05)


async def test_an_application_replies_through_polling(fake: FakeTelegram) -> None:
    app = (
        ApplicationBuilder()
        .token(TOKEN)
        .base_url(fake.api_base)
        .base_file_url(fake.file_api_base)
        .build()
    )

    async def echo(update: Update, _context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        msg = update.effective_message
        await msg.reply_text(f"echo: {msg.text}", do_quote=True)

    app.add_handler(MessageHandler(filters.TEXT, echo))
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(poll_interval=0, timeout=1)
    try:
        asked = fake.inject_message(CHAT, USER, "ping")
        [reply] = await fake.await_for(lambda r: r.text == "echo: ping")
        assert isinstance(reply, SentMessage) and reply.reply_to_message_id == asked
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()
    assert fake.pending_updates == []


# -- fault rules the durability tests lean on ---------------------------------------------------


async def test_fail_for_refuses_a_method_for_a_window(
    bot: Bot, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")
    window = fake.fail_for("sendMessage", 1.0, retry_after=7)
    for _ in range(3):
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(CHAT, "hello")
        assert caught.value.retry_after == dtm.timedelta(seconds=7)
    assert (await bot.get_me()).id == 999  # other methods answer meanwhile
    assert window.active and window.rejected == 3
    await asyncio.sleep(max(0.0, window.until - time.monotonic()))
    assert not window.active
    await bot.send_message(CHAT, "hello")
    assert [c.status for c in fake.calls if c.method == "sendMessage"] == [429, 429, 429, 200]
    assert fake.rejected_calls == {"sendMessage": 3}
    assert [r.text for r in fake.sent] == ["hello"]


async def test_fail_for_429_advises_the_time_left_by_default(
    bot: Bot, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")
    fake.fail_for("sendChatAction", 2.5)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_chat_action(CHAT, "typing")
    assert caught.value.retry_after == dtm.timedelta(seconds=3)
    body = fake.calls[-1]
    assert (body.status, body.description) == (429, "Too Many Requests: retry after 3")


@pytest.mark.parametrize(
    ("status", "message"), [(500, "Internal Server Error"), (502, "Bad Gateway")]
)
async def test_fail_for_any_method_spares_polling_until_ended(
    bot: Bot, fake: FakeTelegram, status: int, message: str
) -> None:
    window = fake.fail_for("*", 30, status=status)
    with pytest.raises(NetworkError, match=message):
        await bot.send_message(CHAT, "hello")
    with pytest.raises(NetworkError, match=message):
        await bot.get_me()
    fake.inject_message(CHAT, USER, "still polled")
    [update] = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.text == "still polled"
    window.end()
    await bot.send_message(CHAT, "hello")
    assert fake.rejected_calls == {"sendMessage": 1, "getMe": 1}
    assert window.rejected == 2 and not window.active


async def test_fail_for_get_updates_when_named(bot: Bot, fake: FakeTelegram) -> None:
    fake.fail_for("getUpdates", 30, status=502)
    fake.inject_message(CHAT, USER, "waiting")
    with pytest.raises(NetworkError, match="Bad Gateway"):
        await bot.get_updates(timeout=0)
    assert fake.rejected_calls == {"getUpdates": 1}
    assert len(fake.pending_updates) == 1


async def test_an_unparseable_update_fails_its_batch_until_confirmed(
    bot: Bot, fake: FakeTelegram
) -> None:
    fake.inject_message(CHAT, USER, "before")
    poison = fake.inject_unparseable_message(CHAT, USER, "bad date")
    fake.inject_message(CHAT, USER, "after")
    with pytest.raises(TypeError):  # Update.de_json of the real library
        await bot.get_updates(timeout=0)
    async with httpx.AsyncClient() as client:  # what the wire carried
        url = f"{fake.api_base}{TOKEN}/getUpdates"
        raw = (await client.post(url, json={"timeout": 0})).json()["result"]
    assert [u["update_id"] for u in raw] == [poison - 1, poison, poison + 1]
    assert raw[1]["message"]["date"] == "yesterday" and raw[1]["message"]["text"] == "bad date"
    [update] = await bot.get_updates(offset=poison + 1, timeout=0)
    assert update.message is not None and update.message.text == "after"
    assert update.message.message_id == raw[1]["message"]["message_id"] + 1


async def test_a_raw_update_is_delivered_verbatim(bot: Bot, fake: FakeTelegram) -> None:
    weird = {"message": {"message_id": 5, "chat": {"type": "private"}, "date": 0}}
    update_id = fake.inject_raw_update({"update_id": 1, **weird})
    assert fake.pending_updates == [{"update_id": update_id, **weird}]
    with pytest.raises(TypeError):  # a chat without an id
        await bot.get_updates(timeout=0)


async def test_polling_offsets_confirm_and_are_recorded(bot: Bot, fake: FakeTelegram) -> None:
    first = fake.inject_message(CHAT, USER, "one")
    fake.inject_message(CHAT, USER, "two")
    updates = await bot.get_updates(timeout=0)
    assert [u.message.message_id for u in updates if u.message] == [first, first + 1]
    ids = [u.update_id for u in updates]
    assert [u.update_id for u in await bot.get_updates(offset=ids[1], timeout=0)] == ids[1:]
    assert [u["update_id"] for u in fake.pending_updates] == ids[1:]
    assert await bot.get_updates(offset=ids[1] + 1, timeout=0) == ()
    assert fake.pending_updates == []
    assert await bot.get_updates(offset=ids[0], timeout=0) == ()  # confirmed ones are gone
    assert fake.poll_offsets == [None, ids[1], ids[1] + 1, ids[0]]


async def test_a_slow_download_leaves_the_api_responsive(bot: Bot, fake: FakeTelegram) -> None:
    data = bytes(range(256)) * 24  # 6144 bytes at 4096 B/s: 1.5 s
    message_id = fake.inject_photo(CHAT, USER, data)
    file_id = fake.file_id_of(CHAT, message_id)
    fake.slow_downloads(4096, file_id)
    file = await bot.get_file(file_id)
    started = time.monotonic()
    download = asyncio.create_task(file.download_as_bytearray())
    await eventually(lambda: fake.downloads and fake.downloads[0].sent, what="a first chunk")
    assert not download.done()
    sent_at = time.monotonic()
    await bot.send_message(CHAT, "meanwhile")
    assert time.monotonic() - sent_at < 0.5
    [progress] = fake.downloads
    assert 0 < progress.sent < len(data) and not progress.done
    assert bytes(await download) == data
    assert time.monotonic() - started >= 1.2
    [finished] = fake.downloads
    assert (finished.file_id, finished.sent, finished.done) == (file_id, len(data), True)


async def test_lifting_the_limit_speeds_up_a_running_download(bot: Bot, fake: FakeTelegram) -> None:
    fake.slow_downloads(1000)  # every file: 5 s for this one
    fake.inject_document(CHAT, USER, b"x" * 5000)
    [update] = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.document is not None
    started = time.monotonic()
    download = asyncio.create_task(
        (await update.message.document.get_file()).download_as_bytearray()
    )
    await eventually(lambda: fake.downloads and fake.downloads[0].sent, what="a first chunk")
    fake.slow_downloads(None)
    assert bytes(await download) == b"x" * 5000
    assert time.monotonic() - started < 2


async def test_a_generated_document_advertises_its_size(bot: Bot, fake: FakeTelegram) -> None:
    huge, small = 200 * 1024 * 1024, 3 * 1024 * 1024 + 7
    fake.inject_generated_document(CHAT, USER, huge, filename="dump.tar", caption="all of it")
    fake.inject_generated_document(CHAT, USER, small)
    updates = await bot.get_updates(timeout=0)
    docs = [u.message.document for u in updates if u.message and u.message.document]
    assert [(d.file_size, d.file_name) for d in docs] == [(huge, "dump.tar"), (small, "big.bin")]
    with pytest.raises(BadRequest, match=r"(?i)file is too big"):
        await docs[0].get_file()
    file = await docs[1].get_file()
    assert file.file_size == small
    data = bytes(await file.download_as_bytearray())
    assert len(data) == small and data == generated_bytes(0, small)
    assert data[251:254] == b"\x00\x01\x02"


async def test_an_abandoned_download_is_recorded_as_broken(bot: Bot, fake: FakeTelegram) -> None:
    fake.slow_downloads(2000)
    fake.inject_photo(CHAT, USER, b"p" * 10_000)
    [update] = await bot.get_updates(timeout=0)
    assert update.message is not None
    file = await update.message.photo[-1].get_file()
    download = asyncio.create_task(file.download_as_bytearray())
    await eventually(lambda: fake.downloads and fake.downloads[0].sent, what="a first chunk")
    download.cancel()
    for _ in range(60):  # the fake's thread notices when it next writes
        if fake.downloads[0].broken:
            break
        await asyncio.sleep(0.05)
    [abandoned] = fake.downloads
    assert abandoned.broken and not abandoned.done and 0 < abandoned.sent < 10_000
