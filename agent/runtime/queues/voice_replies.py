"""VoiceReplies: a reply read aloud and sent as a voice note, when the chat asks for it —
`[voice] reply` "always", or "when_spoken_to" after a voice note (a chat's `/voice` choice
first). The speech is made before the turn's commit, so the outbox holds the note like any
other part (a restart between the synthesis and the send sends it once). The text goes with
it: as its caption where the platform takes one and it fits, else in messages after it. A
failed synthesis sends the text with one line saying why; a failed send is the channel's
(its line, and the caption's text, go out instead). Code blocks, tables and links are not
read aloud (channels/spoken.py)."""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from agent.model.failures import short
from agent.model.side_calls import speak
from agent.security import Scrubber
from channels.base import Channel, IncomingMessage, OutgoingMedia, OutgoingPart, Reply
from channels.config import VoiceReply, VoiceSettings
from channels.spoken import spoken_text

log = logging.getLogger(__name__)

VOICE_NAME = "reply.ogg"


def spoken_to(msg: IncomingMessage) -> bool:
    """The message is (or holds) a voice note."""
    kinds = [f.kind for f in msg.files] + [a.kind for a in msg.attachments]
    return "VOICE" in kinds


class VoiceReplies:
    def __init__(
        self,
        channel: Channel,
        settings: Callable[[], VoiceSettings],
        mode_of: Callable[[str], Awaitable[VoiceReply | None]],
    ) -> None:
        self._channel = channel
        self._settings = settings  # read at each reply: a reload may change [voice]
        self._mode_of = mode_of  # a chat's /voice choice, None: the configured one

    async def wanted(self, msg: IncomingMessage) -> bool:
        if "VOICE" not in self._channel.capabilities.media:
            return False
        mode = await self._mode_of(msg.chat.key) or self._settings().reply
        return mode == "always" or (mode == "when_spoken_to" and spoken_to(msg))

    async def parts(
        self,
        reply: Reply,
        parts: list[OutgoingPart],
        split: Callable[[Reply], list[OutgoingPart]],
    ) -> list[OutgoingPart]:
        """The reply's parts with its voice note first; `parts` unchanged when there is
        nothing to read; the text with a line saying why when the speech failed."""
        voice = self._settings()
        said = spoken_text(reply.text)
        if not said:
            return parts
        if len(said) > voice.max_chars:
            log.info(
                "voice reply skipped: %d characters to read, over %d", len(said), voice.max_chars
            )
            return parts
        try:
            audio = await speak(
                said, voice.model, voice.voice, api_base=voice.api_base, timeout_s=voice.timeout_s
            )
        except Exception as exc:  # any failure: the text goes, and says why
            why = Scrubber.from_environment()(short(exc))
            log.warning("voice reply failed, sending the text: %s", why)
            line = f"(No voice reply: the speech model failed: {why[:200]})"
            return split(dataclasses.replace(reply, text=f"{reply.text}\n\n{line}"))
        note = OutgoingMedia("VOICE", VOICE_NAME, spoken=base64.b64encode(audio).decode())
        caption_chars = self._channel.capabilities.voice_caption_chars
        texts = [p for p in parts if p.media is None]
        files = [p for p in parts if p.media is not None]
        if len(reply.text) <= caption_chars and len(texts) <= 1:
            first = OutgoingPart(text=reply.text, media=note, previews=reply.previews)
            return [first, *files]
        return [OutgoingPart(media=note, previews=reply.previews), *parts]
