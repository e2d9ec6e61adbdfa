"""Files of the Telegram double: stored uploads, their JSON in messages, and the download route.

Both the bot's uploads and the files a test injects live here, so ``getFile`` plus the
download URL return exactly the bytes that went in. A file can also be *generated*: it has a
size but no bytes in memory, and its download streams ``generated_bytes``, so a test can offer
a 200 MB document cheaply. Downloads can be throttled to trickle a file over seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from fakes.telegram_models import MEDIA, int_param

__all__ = ["Download", "FileStore", "StoredFile", "file_json", "generated_bytes"]

_BLOCK = bytes(range(251)) * 264  # a prime period, so shifted or dropped chunks show
_CHUNK = 64 * 1024


def generated_bytes(start: int, length: int) -> bytes:
    """Bytes ``start`` to ``start + length`` of every generated file: byte i is ``i % 251``."""
    out = bytearray()
    while len(out) < length:
        offset = (start + len(out)) % 251
        out += _BLOCK[offset : offset + min(length - len(out), _CHUNK)]
    return bytes(out)


@dataclass
class StoredFile:
    file_id: str
    path: str
    data: bytes
    name: str | None
    mime: str
    size: int | None = None  # a generated file: this many ``generated_bytes``, ``data`` empty

    @property
    def length(self) -> int:
        """The advertised ``file_size``, which is also what a download serves."""
        return len(self.data) if self.size is None else self.size

    def read(self, start: int, length: int) -> bytes:
        if self.size is None:
            return self.data[start : start + length]
        return generated_bytes(start, max(0, min(length, self.size - start)))


@dataclass
class Download:
    """One download of a file, as far as it got (``sent`` bytes of ``size``)."""

    file_id: str
    size: int
    sent: int = 0  # handed to the connection
    done: bool = False  # every byte handed over
    broken: bool = False  # the client went away (or the server stopped) midway


def file_json(file: StoredFile) -> dict[str, Any]:
    """The fields every Telegram file object has."""
    return {
        "file_id": file.file_id,
        "file_unique_id": "u" + file.file_id,
        "file_size": file.length,
    }


class FileStore:
    """Files by ``file_id``, downloadable at ``/file/bot<token>/<file_path>``."""

    def __init__(self, token: Callable[[], str]) -> None:
        """``token``: the bot token now (the fake's attribute, read on each download)."""
        self._token = token
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._files: dict[str, StoredFile] = {}
        self._rates: dict[str | None, float] = {}  # bytes/s by file_id; None: every other file
        self._downloads: list[Download] = []

    def store(
        self, kind: str, data: bytes, name: str | None, mime: str, size: int | None = None
    ) -> StoredFile:
        """Keep a file of ``kind`` ("photo", "document"...) in that kind's folder; with
        ``size``, a generated file of that many bytes instead of ``data``."""
        folder, ext = next((m[1], m[2]) for m in MEDIA.values() if m[0] == kind)
        with self._lock:
            n = next(self._ids)
            if name and "." in name:
                ext = name[name.rindex(".") :]
            file_id, path = f"file-{kind}-{n}", f"{folder}/file_{n}{ext}"
            file = StoredFile(file_id, path, b"" if size is not None else data, name, mime, size)
            self._files[file.file_id] = file
        return file

    def get(self, file_id: str) -> StoredFile | None:
        with self._lock:
            return self._files.get(file_id)

    def throttle(self, bytes_per_s: float | None, file_id: str | None = None) -> None:
        """Serve ``file_id`` (None: every file without its own rate) at ``bytes_per_s``."""
        if bytes_per_s is not None and bytes_per_s <= 0:
            raise ValueError("bytes_per_s must be positive (None lifts the limit)")
        with self._lock:
            if bytes_per_s is None:
                self._rates.pop(file_id, None)
            else:
                self._rates[file_id] = float(bytes_per_s)

    def downloads(self) -> list[Download]:
        with self._lock:
            return [dataclasses.replace(d) for d in self._downloads]

    def _rate(self, file_id: str) -> float | None:
        with self._lock:
            return self._rates.get(file_id, self._rates.get(None))

    @staticmethod
    def media(kind: str, file: StoredFile, params: dict[str, Any]) -> dict[str, Any]:
        """The message field for ``file`` (``{"photo": [...]}``, ``{"voice": {...}}``...)."""
        base = file_json(file)
        if kind == "photo":
            return {"photo": [{**base, "width": 90, "height": 90}]}
        if kind in ("document", "video", "audio") and file.name:
            base["file_name"] = file.name
        base["mime_type"] = file.mime
        if kind == "video":
            width, height = int_param(params, "width"), int_param(params, "height")
            base.update(width=width or 320, height=height or 240)
        if kind in ("video", "audio", "voice"):
            base["duration"] = int_param(params, "duration") or 1
        return {kind: base}

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """The download route; a wrong token or unknown path is Telegram's 404 body. The body
        streams in chunks, paced by the file's rate if it has one; the loop stays free."""
        path = request.match_info["path"]
        with self._lock:
            found = [f for f in self._files.values() if f.path == path]
        if request.match_info["token"] != self._token() or not found:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        file = found[0]
        record = Download(file.file_id, file.length)
        with self._lock:
            self._downloads.append(record)
        resp = web.StreamResponse(headers={"Content-Type": file.mime})
        resp.content_length = file.length
        await resp.prepare(request)
        due = time.monotonic()  # when the bytes sent so far may have left, at the rate
        try:
            while record.sent < file.length:
                rate = self._rate(file.file_id)
                size = _CHUNK if rate is None else max(1, min(_CHUNK, int(rate / 20)))
                chunk = file.read(record.sent, size)
                with self._lock:  # counted first, so a client never has more than ``sent``
                    record.sent += len(chunk)
                    record.done = record.sent >= file.length
                await resp.write(chunk)
                if rate is not None and not record.done:
                    due = max(due, time.monotonic() - 0.1) + len(chunk) / rate
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
            await resp.write_eof()
        except ConnectionError:  # the client hung up; nothing left to answer
            with self._lock:
                record.broken = True
            return resp
        except asyncio.CancelledError:
            with self._lock:
                record.broken = True
            raise
        return resp
