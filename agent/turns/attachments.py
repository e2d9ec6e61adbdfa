"""A message's files, fetched when its turn runs (not in the channel's update handler, so a
slow download holds up only its own chat), each within a deadline, into the workspace's
inbox/ folder; a voice note or audio file gets its transcript. A file that cannot be
fetched becomes a note for the model instead of a failed turn."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from channels.base import Attachment, Channel, IncomingMessage

log = logging.getLogger(__name__)

Transcriber = Callable[[Path], Awaitable[str]]
INBOX = "inbox"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


async def fetch_files(
    msg: IncomingMessage,
    channel: Channel,
    workspace: Path,
    *,
    timeout_s: float,
    transcribe: Transcriber | None,
    scrub: Callable[[str], str],
) -> IncomingMessage:
    saved: list[Attachment] = list(msg.attachments)
    notes: list[str] = []
    folder = workspace / INBOX
    for item in msg.files:
        name = _UNSAFE.sub("_", item.name).strip("._") or "file"
        dest = folder / f"{msg.chat.channel}-{msg.chat.chat_id}-{msg.message_id}-{name}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            async with asyncio.timeout(timeout_s):
                await channel.fetch_file(item, dest)
        except Exception as exc:  # a timeout, a refused download, a full disk
            log.warning("%s: %s not downloaded: %s", msg.chat.key, item.name, exc)
            dest.unlink(missing_ok=True)
            notes.append(f"[{item.name} could not be downloaded: {type(exc).__name__}]")
            continue
        spoken = item.kind in ("VOICE", "AUDIO")
        note = await _transcript(item.kind, dest, transcribe, scrub) if spoken else ""
        saved.append(Attachment(item.kind, dest, note))
    text = "\n".join([msg.text, *notes]) if notes else msg.text
    return dataclasses.replace(msg, text=text, attachments=tuple(saved), files=())


async def _transcript(
    kind: str, path: Path, transcribe: Transcriber | None, scrub: Callable[[str], str]
) -> str:
    what = "voice note" if kind == "VOICE" else "recording"
    if transcribe is None:
        return f"(a {what}, saved there; no transcription is configured)"
    try:
        return f"({what} transcript: {scrub(await transcribe(path))})"
    except Exception as exc:
        log.warning("transcription failed: %s", exc)
        return f"(a {what}, saved there; transcription failed)"
