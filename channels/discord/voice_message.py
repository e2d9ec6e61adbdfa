"""A voice message on Discord: an OGG/Opus file sent with the voice-message flag (1 << 13)
and, in its attachment's metadata, the duration and a waveform — what Discord's own clients
send. discord.py reads voice messages but only sends plain files, so the message is made
with its own parameters and sent through its HTTP client. Such a message carries no text:
the reply's text follows it."""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

import discord
from discord.abc import Messageable
from discord.http import handle_message_parameters

VOICE_FLAG = 1 << 13
WAVEFORM_POINTS = 64
FILENAME = "voice-message.ogg"


def packet_sizes(ogg: bytes) -> tuple[list[int], int, int]:
    """The Ogg stream's packet sizes (OpusHead and OpusTags left out), its last granule
    position and the Opus pre-skip, read page by page."""
    sizes: list[int] = []
    granule, at, current = 0, 0, 0
    while at + 27 <= len(ogg) and ogg[at : at + 4] == b"OggS":
        granule = max(granule, struct.unpack_from("<q", ogg, at + 6)[0])
        count = ogg[at + 26]
        lacing = ogg[at + 27 : at + 27 + count]
        for value in lacing:
            current += value
            if value < 255:
                sizes.append(current)
                current = 0
        at += 27 + count + sum(lacing)
    head = ogg.find(b"OpusHead")
    pre_skip = struct.unpack_from("<H", ogg, head + 10)[0] if head >= 0 else 0
    return sizes[2:], granule, pre_skip


def voice_metadata(ogg: bytes) -> tuple[float, str]:
    """The note's duration in seconds and its waveform (base64 of up to 64 levels, 0-255):
    each level the mean size of its packets, which grows with what is heard."""
    sizes, granule, pre_skip = packet_sizes(ogg)
    duration = max(0.0, (granule - pre_skip) / 48_000)
    if not sizes:
        return duration, base64.b64encode(bytes(WAVEFORM_POINTS)).decode()
    points = min(WAVEFORM_POINTS, len(sizes))
    step = len(sizes) / points
    means = [
        sum(chunk) / len(chunk)
        for chunk in (
            sizes[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)]
            for i in range(points)
        )
    ]
    top = max(means) or 1.0
    levels = bytes(min(255, round(255 * mean / top)) for mean in means)
    return duration, base64.b64encode(levels).decode()


class _VoiceFile(discord.File):
    """The file with the attachment metadata of a voice message."""

    def __init__(self, ogg: bytes) -> None:
        super().__init__(io.BytesIO(ogg), filename=FILENAME)
        self.duration, self.waveform = voice_metadata(ogg)

    def to_dict(self, index: int) -> dict[str, Any]:
        payload = super().to_dict(index)
        payload.update(duration_secs=round(self.duration, 2), waveform=self.waveform)
        return payload


async def send_voice_message(
    channel: Messageable, ogg: bytes, nonce: str | None
) -> discord.Message:
    """Send `ogg` as a voice message in `channel` (with the part's nonce)."""
    target: Any = await channel._get_channel()
    state = target._state
    flags = discord.MessageFlags._from_value(VOICE_FLAG)
    params = handle_message_parameters(file=_VoiceFile(ogg), nonce=nonce, flags=flags)
    with params:
        data = await state.http.send_message(target.id, params=params)
    message: discord.Message = state.create_message(channel=target, data=data)
    return message
