"""Files of the Telegram double: stored uploads, their JSON in messages, and the download route.

Both the bot's uploads and the files a test injects live here, so ``getFile`` plus the
download URL return exactly the bytes that went in.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from fakes.telegram_models import MEDIA, int_param

__all__ = ["FileStore", "StoredFile", "file_json"]


@dataclass
class StoredFile:
    file_id: str
    path: str
    data: bytes
    name: str | None
    mime: str


def file_json(file: StoredFile) -> dict[str, Any]:
    """The fields every Telegram file object has."""
    return {
        "file_id": file.file_id,
        "file_unique_id": "u" + file.file_id,
        "file_size": len(file.data),
    }


class FileStore:
    """Files by ``file_id``, downloadable at ``/file/bot<token>/<file_path>``."""

    def __init__(self, token: Callable[[], str]) -> None:
        """``token``: the bot token now (the fake's attribute, read on each download)."""
        self._token = token
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._files: dict[str, StoredFile] = {}

    def store(self, kind: str, data: bytes, name: str | None, mime: str) -> StoredFile:
        """Keep a file of ``kind`` ("photo", "document"...) in that kind's folder."""
        folder, ext = next((m[1], m[2]) for m in MEDIA.values() if m[0] == kind)
        with self._lock:
            n = next(self._ids)
            if name and "." in name:
                ext = name[name.rindex(".") :]
            file = StoredFile(f"file-{kind}-{n}", f"{folder}/file_{n}{ext}", data, name, mime)
            self._files[file.file_id] = file
        return file

    def get(self, file_id: str) -> StoredFile | None:
        with self._lock:
            return self._files.get(file_id)

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

    async def serve(self, request: web.Request) -> web.Response:
        """The download route; a wrong token or unknown path is Telegram's 404 body."""
        path = request.match_info["path"]
        with self._lock:
            found = [f for f in self._files.values() if f.path == path]
        if request.match_info["token"] != self._token() or not found:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        return web.Response(body=found[0].data, content_type=found[0].mime)
