"""A message's files, fetched when its turn runs (not in the channel's update handler, so a
slow download holds up only its own chat), each within a deadline, into the chat's own
folder `inbox/<channel>-<chat>/`; a voice note or audio file gets its transcript.

Every file is created by the resolver (tools/paths.py): no link followed on the way, a
fresh name (O_CREAT|O_EXCL) never an existing file, the name cut to fit (keeping its
extension). Nothing here raises: a file that cannot be fetched or saved becomes a note for
the model, and the chat's queue goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from channels.base import Attachment, Channel, IncomingMessage, RemoteFile
from tools.boundaries import inbox_folder
from tools.paths import PathRules, PolicyError

log = logging.getLogger(__name__)

Transcriber = Callable[[str, bytes], Awaitable[str]]  # (file name, its bytes) -> text
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 100  # of the saved name: well under any file system's 255 bytes
_MAX_EXTENSION_CHARS = 16


def saved_name(message_id: str, name: str) -> str:
    """`<message id>-<name>` in plain characters, at most MAX_NAME_CHARS, extension kept."""
    clean = _UNSAFE.sub("_", name).strip("._") or "file"
    stem, dot, extension = clean.rpartition(".")
    if not dot or len(extension) > _MAX_EXTENSION_CHARS:
        stem, extension = clean, ""
    prefix = _UNSAFE.sub("_", message_id)[:24]
    room = MAX_NAME_CHARS - len(prefix) - 1 - (len(extension) + 1 if extension else 0)
    return f"{prefix}-{stem[:room]}" + (f".{extension}" if extension else "")


@dataclass(frozen=True)
class Downloads:
    """How a channel's messages get their files: where, within what time, transcribed how."""

    channel: Channel
    files: PathRules  # the workspace's resolver
    timeout_s: float
    transcribe: Transcriber | None
    scrub: Callable[[str], str]

    async def fetch(self, msg: IncomingMessage) -> IncomingMessage:
        """The message with its files saved (or a note for each that was not)."""
        if not msg.files:
            return msg
        saved: list[Attachment] = list(msg.attachments)
        notes: list[str] = []
        folder = inbox_folder(msg.chat.key)
        for item in msg.files:
            try:
                async with asyncio.timeout(self.timeout_s):
                    data = await self.channel.fetch_file(item)
                dest = await asyncio.to_thread(
                    _save, self.files, folder, msg.message_id, item, data
                )
            except Exception as exc:  # a timeout, a refused download, a planted link, a full disk
                why = exc.short if isinstance(exc, PolicyError) else type(exc).__name__
                log.warning("%s: %s not saved: %s", msg.chat.key, item.name[:80], exc)
                notes.append(f"[{item.name[:80]} could not be saved: {why}]")
                continue
            spoken = item.kind in ("VOICE", "AUDIO")
            note = await self._transcript(item.kind, dest.name, data) if spoken else ""
            saved.append(Attachment(item.kind, dest, note))
        text = "\n".join([msg.text, *notes]) if notes else msg.text
        return dataclasses.replace(msg, text=text, attachments=tuple(saved), files=())

    async def _transcript(self, kind: str, name: str, data: bytes) -> str:
        what = "voice note" if kind == "VOICE" else "recording"
        if self.transcribe is None:
            return f"(a {what}, saved there; no transcription is configured)"
        try:
            return f"({what} transcript: {self.scrub(await self.transcribe(name, data))})"
        except Exception as exc:
            log.warning("transcription failed: %s", exc)
            return f"(a {what}, saved there; transcription failed)"


def _save(files: PathRules, folder: str, message_id: str, item: RemoteFile, data: bytes) -> Path:
    """Write `data` under a fresh name in the chat's folder; never over an existing file."""
    name = base = saved_name(message_id, item.name)
    for _ in range(3):
        relative = f"{folder}/{name}"
        try:
            fd = files.open_beneath(
                relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL, make_folders=True
            )
        except FileExistsError:  # the same message fetched again, or a name planted there
            name = f"{secrets.token_hex(4)}-{base}"[:MAX_NAME_CHARS]
            continue
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except BaseException:
            _remove(files, relative)
            raise
        return files.workspace / relative
    raise FileExistsError(f"{folder}/{name}")


def _remove(files: PathRules, relative: str) -> None:
    """Take away a half-written file; a failure here is logged, never raised."""
    try:
        os.unlink(files.workspace / relative)
    except OSError as exc:
        log.warning("could not remove the partial file %s: %s", relative, exc)
