"""A file server on 127.0.0.1 whose body never ends and announces no length (chunked): what
a download with a size limit must stop reading, whatever size was announced before."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

PIECE = 2**16
GIVE_UP = 64 * 2**20  # the server stops by itself there: a test never hangs


@dataclass
class EndlessFile:
    url: str
    sent: int = 0  # bytes written before the client went away


@contextlib.asynccontextmanager
async def endless_file(path: str) -> AsyncIterator[EndlessFile]:
    """The server, serving `path` (e.g. "/file/x.pdf") and counting what it sent."""
    served = EndlessFile("")

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # chunked: no Content-Length
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            while served.sent < GIVE_UP:
                await response.write(bytes(PIECE))
                served.sent += PIECE
        return response

    app = web.Application()
    app.router.add_get(path, endless)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    served.url = f"http://127.0.0.1:{port}{path}"
    try:
        yield served
    finally:
        await runner.cleanup()
