"""The daemon's HTTP server: aiohttp's (already installed with discord.py, asyncio-native,
kept up; one more server library would be one more thing to audit), bound to `[http] host`
(127.0.0.1 unless the owner writes another address) and `port`.

Bounded for hostile clients: a body over `max_body_bytes` is refused by its Content-Length
before it is read, or as soon as the bytes read pass it (aiohttp's `client_max_size`), and
a body must arrive whole within `read_timeout_s` (a client sending a byte a second is cut
off with 408), so neither a huge nor a slow request holds memory or a handler for long.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from agent.http.config import HttpSettings

log = logging.getLogger(__name__)


class Refusal(Exception):
    """A request refused: its status and the one line said of it (logged, and the body)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status, self.why = status, why


async def read_body(request: web.Request, settings: HttpSettings) -> bytes:
    """The whole body, within the size and time limits (Refusal: 413, 408)."""
    limit = settings.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise Refusal(413, f"body of {request.content_length:,} bytes; at most {limit:,}")
    try:
        async with asyncio.timeout(settings.read_timeout_s):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refusal(413, f"body over {limit:,} bytes") from None
    except TimeoutError:
        raise Refusal(408, f"body not read within {settings.read_timeout_s:g} s") from None


def json_of(body: bytes) -> Any:
    """The body read as JSON (Refusal 400 when it is not; a body nested deeper than the
    parser goes raises RecursionError, not ValueError, and must not become a 500)."""
    try:
        return json.loads(body)
    except RecursionError:
        raise Refusal(400, "the body is nested too deep to be read as JSON") from None
    except ValueError as exc:
        raise Refusal(400, f"the body is not JSON: {exc}") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(settings: HttpSettings) -> str | None:
    """The line said at start when the server is reachable from the network in plain HTTP."""
    if is_loopback(settings.host) or settings.tls_proxy:
        return None
    return (
        f"[http] host = {settings.host} is not a loopback address and no tls_proxy is named: "
        "requests and their secrets cross the network in plain HTTP; put a TLS proxy in "
        "front and name it ([http] tls_proxy)"
    )


class HttpServer:
    def __init__(self, settings: HttpSettings, routes: Sequence[web.RouteDef]) -> None:
        self.settings = settings
        app = web.Application(client_max_size=settings.max_body_bytes)
        app.add_routes(routes)
        # lingering_time 0: after a refusal, the rest of an unread body is not waited for.
        # keepalive_timeout: aiohttp's only clock on a connection that has not sent a whole
        # request head yet, so a client trickling its headers is cut off like a slow body.
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            lingering_time=0.0,
            keepalive_timeout=settings.read_timeout_s,
        )
        self.port = settings.port  # the bound one once started (0 asks the system)

    @property
    def address(self) -> str:
        host = self.settings.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    async def start(self) -> None:
        """Bound and serving (OSError: the address is taken or not this machine's)."""
        settings = self.settings
        if (warning := exposure_warning(settings)) is not None:
            log.warning("%s", warning)
        await self._runner.setup()
        site = web.TCPSite(self._runner, settings.host, settings.port)
        await site.start()
        bound = self._runner.addresses
        if bound:
            self.port = int(bound[0][1])

    async def stop(self) -> None:
        await self._runner.cleanup()
