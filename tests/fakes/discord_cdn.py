"""Attachments of the Discord double: multipart uploads in, stored files, the CDN route out.

discord.py uploads files as ``files[n]`` parts next to a ``payload_json`` part and downloads
them from the attachment's ``url``; this module owns both ends so the bytes a test injects or
the bot sends are exactly the bytes read back.
"""

from __future__ import annotations

import json
import mimetypes
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aiohttp import BodyPartReader, web
from fakes.discord_gateway import Snowflakes
from fakes.discord_models import ApiError

__all__ = ["Attachments", "FilePart", "read_body"]

FilePart = tuple[str, bytes, str | None]  # filename, data, Content-Type as uploaded


async def read_body(
    request: web.Request, upload_limit: int
) -> tuple[dict[str, Any], list[FilePart]]:
    """JSON, or multipart with ``payload_json`` and ``files[n]`` (discord.py's shape)."""
    payload: dict[str, Any] = {}
    files: list[FilePart] = []
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        async for part in reader:
            if isinstance(part, BodyPartReader):  # nested multiparts are ignored
                if part.name == "payload_json":
                    payload = json.loads(await part.text())
                elif (part.name or "").startswith("files["):
                    data = bytes(await part.read())
                    ctype = part.headers.get("Content-Type")
                    files.append((part.filename or "file", data, ctype))
    elif request.can_read_body:
        payload = await request.json()
    if any(len(b) > upload_limit for _, b, _ in files):
        raise ApiError(413, "Request entity too large", 40005)
    return payload, files


class Attachments:
    """Files by attachment id, served at ``/attachments/{channel}/{id}/{filename}``."""

    ROUTE = "/attachments/{channel_id}/{attachment_id}/{filename}"

    def __init__(self, ids: Snowflakes, origin: Callable[[], str]) -> None:
        """``origin``: ``http://127.0.0.1:PORT``, asked when storing (the port comes late)."""
        self._ids = ids
        self._origin = origin
        self._lock = threading.Lock()
        self._files: dict[str, tuple[str, bytes, str]] = {}  # attachment id -> file

    def store(self, cid: str, filename: str, data: bytes, ctype: str | None) -> dict[str, Any]:
        """Keep the file and return its attachment object (type guessed from the name)."""
        aid = self._ids.next()
        ctype = ctype or mimetypes.guess_type(filename)[0] or "application/octet-stream"
        with self._lock:
            self._files[aid] = (filename, data, ctype)
        url = f"{self._origin()}/attachments/{cid}/{aid}/{quote(filename)}"
        return {
            "id": aid,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": ctype,
        }

    async def serve(self, request: web.Request) -> web.Response:
        """The CDN: public (no token), a plain 404 for an unknown id like Discord's."""
        with self._lock:
            found = self._files.get(request.match_info["attachment_id"])
        if found is None:
            return web.Response(status=404, text="asset not found")
        return web.Response(body=found[1], content_type=found[2])
