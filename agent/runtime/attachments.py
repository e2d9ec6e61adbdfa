"""A message's files, fetched when its turn comes (not in the channel's update handler, nor
in a turn slot: a slow download holds up only its own chat), each within a deadline, into
the chat's own folder `inbox/<channel>-<chat>/`; a voice note or audio file gets its
transcript, within the same deadline. What was fetched is kept on the message's inbox row,
so a turn run again fetches nothing twice; a forwarded message's files are recorded as
someone else's words (agent/durable/file_sources.py).

Every file is created by the resolver (tools/paths.py): no link followed on the way, a
fresh name (O_CREAT|O_EXCL) never an existing file, the name cut to fit (keeping its
extension). A file that cannot be fetched or saved, or is over the size limit, becomes a
note for the model, and the chat's queue goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import os
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from agent.durable.inbox import Inbox, Pending
from channels.base import Attachment, Channel, IncomingMessage, RemoteFile, too_big
from tools.background import despite_a_cut
from tools.boundaries import inbox_folder
from tools.paths import PathRules, PolicyError
from tools.taint import FileProvenance

log = logging.getLogger(__name__)

Transcriber = Callable[[str, bytes], Awaitable[str]]  # (file name, its bytes) -> text
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_EXTENSION = re.compile(r"[A-Za-z0-9_-]{1,16}")  # kept as it is, or not at all
MAX_NAME_CHARS = 100  # of the saved name: well under any file system's 255 bytes
MB = 1024 * 1024


def saved_name(message_id: str, name: str) -> str:
    """`<message id>-<name>` in plain characters, at most MAX_NAME_CHARS, extension kept.
    The extension is split off first: "报告.pdf" cleaned whole would lose its dot."""
    stem, dot, extension = name.rpartition(".")
    if not (dot and stem.strip(".") and _EXTENSION.fullmatch(extension)):
        stem, extension = name, ""
    stem = _UNSAFE.sub("_", stem).strip("._") or "file"
    prefix = _UNSAFE.sub("_", message_id)[:24]
    room = MAX_NAME_CHARS - len(prefix) - 1 - (len(extension) + 1 if extension else 0)
    return f"{prefix}-{stem[:room]}" + (f".{extension}" if extension else "")


def forwarded_words(msg: IncomingMessage) -> str:
    """Whose words a forwarded message (and each file it brought) holds, as a tainted turn's
    writes are recorded (tools/taint.py); "": the sender's own."""
    forwarded = msg.forwarded_from
    return f"after reading a message forwarded from {forwarded}" if forwarded else ""


@dataclass(frozen=True)
class Downloads:
    """How a channel's messages get their files: where, within what time, transcribed how."""

    channel: Channel
    files: PathRules  # the workspace's resolver
    timeout_s: float
    transcribe: Transcriber | None
    scrub: Callable[[str], str]

    async def fetch(
        self, msg: IncomingMessage, max_mb: float, sources: FileProvenance
    ) -> IncomingMessage:
        """The message with its files saved (or a note for each that was not); a forwarded
        message's files recorded in `sources` as someone else's words, so that a later turn
        reading them is tainted as by a web page."""
        if not msg.files:
            return msg
        saved: list[Attachment] = list(msg.attachments)
        notes: list[str] = []
        for item in msg.files:
            try:
                async with asyncio.timeout(self.timeout_s):  # the channel stops past the limit
                    data = await self.channel.fetch_file(item, int(max_mb * MB))
                if len(data) > max_mb * MB:  # a channel that could not stop sooner
                    raise too_big(int(max_mb * MB))
                dest = await despite_a_cut(self._kept(msg, item, data, sources))
            except Exception as exc:  # a timeout, a refused download, a planted link, a full disk
                why = exc.short if isinstance(exc, PolicyError) else type(exc).__name__
                if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
                    why = exc.strerror or why
                log.warning("%s: %s not saved: %s", msg.chat.key, item.name[:80], exc)
                notes.append(f"[{item.name[:80]} could not be saved: {why}]")
                continue
            spoken = item.kind in ("VOICE", "AUDIO")
            note = await self._transcript(item.kind, dest.name, data) if spoken else ""
            saved.append(Attachment(item.kind, dest, note))
        text = "\n".join([msg.text, *notes]) if notes else msg.text
        return dataclasses.replace(msg, text=text, attachments=tuple(saved), files=())

    async def fetch_rows(
        self, lead: Pending, inbox: Inbox, max_mb: float, sources: FileProvenance
    ) -> Pending:
        """The turn's rows with their files fetched, each row's message stored so: a turn run
        again (after an outage, an interruption, a restart) finds them saved and transcribed,
        and fetches, saves and pays for nothing twice."""

        async def fetched(row: Pending) -> Pending:
            if not row.message.files:
                return row
            message = await self.fetch(row.message, max_mb, sources)
            await inbox.keep_fetched(row.id, message)
            return dataclasses.replace(row, message=message)

        folded = tuple([await fetched(row) for row in lead.folded])
        return dataclasses.replace(await fetched(lead), folded=folded)

    async def _kept(
        self, msg: IncomingMessage, item: RemoteFile, data: bytes, sources: FileProvenance
    ) -> Path:
        """The file saved and, when forwarded, recorded: never one without the other (it is
        removed when the record fails), so no file of someone else's passes for the owner's."""
        folder = inbox_folder(msg.chat.key)
        dest = await asyncio.to_thread(_save, self.files, folder, msg.message_id, item, data)
        if source := forwarded_words(msg):
            try:
                await sources.record([dest], source)
            except BaseException:
                _remove(self.files, f"{folder}/{dest.name}")
                raise
        return dest

    async def _transcript(self, kind: str, name: str, data: bytes) -> str:
        """The transcript (within the download's deadline: agent/model/side_calls.py)."""
        what = "voice note" if kind == "VOICE" else "recording"
        if self.transcribe is None:
            return f"(a {what}, saved there; no transcription is configured)"
        try:
            said = await self.transcribe(name, data)
        except Exception as exc:  # a timeout too
            log.warning("transcription failed: %r", exc)
            return f"(a {what}, saved there; transcription failed)"
        return f"({what} transcript: {self.scrub(said)})"


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
