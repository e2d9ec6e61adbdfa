"""Real OGG/Opus bytes, built at test time, and the check a platform makes of a voice note.

A valid Ogg stream (RFC 3533, each page's CRC computed) holding an Opus stream (RFC 7845):
the OpusHead page, the OpusTags page, then 20 ms packets of silence (the one-byte-frame
code 0xF8 0xFF 0xFE that every Opus decoder reads as silence). What the speech endpoint of
the model double answers, and what the Telegram double accepts as a voice note.
"""

from __future__ import annotations

import struct

SAMPLE_RATE = 48_000
FRAME_SAMPLES = 960  # 20 ms at 48 kHz
SILENCE_FRAME = b"\xf8\xff\xfe"


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return table


_TABLE = _crc_table()


def _crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _page(packets: list[bytes], *, granule: int, serial: int, seq: int, flags: int) -> bytes:
    lacing = b""
    for packet in packets:
        lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, serial, seq, 0, len(lacing))
    page = header + lacing + b"".join(packets)
    crc = _crc(page)
    return page[:22] + struct.pack("<I", crc) + page[26:]


def ogg_opus_silence(seconds: float = 1.0, serial: int = 0x5069636C) -> bytes:
    """`seconds` of silence as an OGG/Opus file (mono, 48 kHz)."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 312, SAMPLE_RATE, 0, 0)
    vendor = b"pinclaw tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    frames = max(1, round(seconds * SAMPLE_RATE / FRAME_SAMPLES))
    pages = [
        _page([head], granule=0, serial=serial, seq=0, flags=0x02),
        _page([tags], granule=0, serial=serial, seq=1, flags=0),
    ]
    seq, done = 2, 0
    while done < frames:
        count = min(50, frames - done)  # a second of packets a page
        done += count
        last = 0x04 if done == frames else 0
        granule = 312 + done * FRAME_SAMPLES
        pages.append(
            _page([SILENCE_FRAME] * count, granule=granule, serial=serial, seq=seq, flags=last)
        )
        seq += 1
    return b"".join(pages)


def opus_problem(data: bytes) -> str:
    """Why `data` is not an OGG/Opus voice note ("" when it is): an Ogg page whose CRC
    holds, with an OpusHead packet first."""
    if not data.startswith(b"OggS") or len(data) < 28:
        return "not an Ogg stream"
    segments = data[26]
    body_at = 27 + segments
    size = sum(data[27:body_at])
    page = data[: body_at + size]
    zeroed = page[:22] + b"\0\0\0\0" + page[26:]
    if _crc(zeroed) != struct.unpack("<I", page[22:26])[0]:
        return "the first Ogg page's CRC is wrong"
    if not data[body_at:].startswith(b"OpusHead"):
        return "no OpusHead: not Opus"
    return ""
