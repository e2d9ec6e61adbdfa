"""A file a message carries, fetched from Telegram's file server with a cap on its size.

The size an update announces is optional (0 when Telegram leaves `file_size` out), so it
cannot be the only check: the body is streamed and the download stopped as soon as it
passes the cap, never read whole into memory first (python-telegram-bot's
`download_as_bytearray` reads whatever comes).
"""

from __future__ import annotations

import httpx
from telegram import Bot

from channels.base import too_big

READ_TIMEOUT_S = 30.0  # between two pieces of the body; the runtime bounds the whole download


async def download(bot: Bot, file_id: str, max_bytes: int | None = None) -> bytes:
    """The file's bytes; OSError when it cannot be had or passes `max_bytes`. Errors never
    carry the download URL: it holds the bot token."""
    found = await bot.get_file(file_id)
    if max_bytes is not None and (found.file_size or 0) > max_bytes:
        raise too_big(max_bytes)
    if not found.file_path:
        raise OSError("Telegram gave no path to download the file from")
    data = bytearray()
    try:
        # Identity: a compressed body would be counted, and could grow, only once decoded.
        async with (
            httpx.AsyncClient(timeout=READ_TIMEOUT_S) as client,
            client.stream("GET", found.file_path, headers={"Accept-Encoding": "identity"}) as got,
        ):
            if got.status_code != httpx.codes.OK:
                raise OSError(f"the file server answered HTTP {got.status_code}")
            announced = int(got.headers.get("Content-Length") or 0)
            if max_bytes is not None and announced > max_bytes:
                raise too_big(max_bytes)
            async for piece in got.aiter_bytes():
                data += piece
                if max_bytes is not None and len(data) > max_bytes:
                    raise too_big(max_bytes)
    except httpx.HTTPError as exc:  # its message may name the URL
        raise OSError(f"the download failed ({type(exc).__name__})") from None
    return bytes(data)
