"""An attachment fetched from Discord's CDN with a cap on its size.

The size a message announces is what the runtime checks first, but the download must hold
to the cap too: the body is read in pieces and the download stopped as soon as it passes
it, never read whole into memory first (discord.py's `get_from_cdn` reads whatever comes).
"""

from __future__ import annotations

import aiohttp
from discord.http import HTTPClient

from channels.base import too_big

PIECE = 64 * 1024
READ_TIMEOUT_S = 30.0  # between two pieces of the body; the runtime bounds the whole download


async def fetch_from_cdn(http: HTTPClient, url: str, max_bytes: int | None = None) -> bytes:
    """The attachment's bytes, through discord.py's proxy if it has one; OSError when they
    cannot be had or pass `max_bytes`."""
    data = bytearray()
    timeout = aiohttp.ClientTimeout(sock_read=READ_TIMEOUT_S)
    # Identity: a compressed body would be counted, and could grow, only once decoded.
    headers = {"Accept-Encoding": "identity"}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers, proxy=http.proxy, proxy_auth=http.proxy_auth) as got,
        ):
            if got.status != 200:
                raise OSError(f"Discord's CDN answered HTTP {got.status}")
            if max_bytes is not None and (got.content_length or 0) > max_bytes:
                raise too_big(max_bytes)
            async for piece in got.content.iter_chunked(PIECE):
                data += piece
                if max_bytes is not None and len(data) > max_bytes:
                    raise too_big(max_bytes)
    except aiohttp.ClientError as exc:
        raise OSError(f"the download failed ({type(exc).__name__}: {exc})") from exc
    return bytes(data)
