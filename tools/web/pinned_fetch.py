"""One GET of a web page with the guard on every hop: redirects followed by hand, each new
URL checked (scheme, host, resolved address) before anything is sent to it, and each
connection made to the address that was checked — the URL rewritten to that address, the
Host header and TLS server name (SNI, and so the certificate check) kept as the URL's host.

httpx is imported when a fetch runs, not with the tools, so `agent --help` stays light. The
client ignores proxy variables (a proxy would resolve the host itself, past the guard).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tools.web.url_guard import HostRules, Refused, Resolver, checked_address, system_resolve

if TYPE_CHECKING:
    import httpx

MAX_REDIRECTS = 5
USER_AGENT = "Mozilla/5.0 (compatible; pinclaw web_fetch)"
ACCEPT = "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.1"


@dataclass(frozen=True)
class Fetched:
    """What a fetch got: the final URL (after redirects), the answer's status and type, and
    the body when it was wanted (`cut`: there was more than `max_bytes`, left unread)."""

    url: str
    status: int
    reason: str
    media_type: str  # "text/html", lower case, without parameters; "" when none was sent
    charset: str | None
    body: bytes = b""
    cut: bool = False


class FetchFailed(Exception):
    """The fetch did not get an answer; the message is the one line the model gets."""


@dataclass(frozen=True)
class FetchLimits:
    rules: HostRules
    max_bytes: int
    timeout_s: float


async def fetch(
    url: str,
    limits: FetchLimits,
    wants: Callable[[str], bool],
    *,
    resolve: Resolver = system_resolve,
    verify: ssl.SSLContext | bool = True,
) -> Fetched:
    """GET `url` and, when the answer is a success of a type `wants`, read its body (at most
    `max_bytes`). Refused (url_guard.Refused) for a URL or hop the guard refuses;
    FetchFailed for no answer, a timeout or too many redirects."""
    import httpx

    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise Refused(f"not a URL web_fetch can read: {url!r} ({exc})") from None
    timeout = httpx.Timeout(limits.timeout_s)
    try:
        async with asyncio.timeout(limits.timeout_s):
            for _ in range(MAX_REDIRECTS + 1):
                # A client per hop: a connection made (and a certificate checked) for one
                # name is never reused for the next, even at the same address.
                async with httpx.AsyncClient(
                    trust_env=False, timeout=timeout, verify=verify
                ) as client:
                    request = await _pinned_request(client, current, limits.rules, resolve)
                    response = await client.send(request, stream=True)
                    try:
                        location = response.headers.get("location")
                        if response.is_redirect and location:
                            current = current.join(location)
                            continue
                        return await _answer(current, response, wants, limits.max_bytes)
                    finally:
                        await response.aclose()
    except (TimeoutError, httpx.TimeoutException):
        raise FetchFailed(f"{current} did not answer within {limits.timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"fetching {current} failed: {_brief(exc)}") from None
    raise FetchFailed(f"{url} redirects more than {MAX_REDIRECTS} times; not followed further")


async def _pinned_request(
    client: httpx.AsyncClient, url: httpx.URL, rules: HostRules, resolve: Resolver
) -> httpx.Request:
    """The request for `url`, addressed to the address the guard checked."""
    if url.scheme not in ("http", "https"):
        raise Refused(f"Refused: {url}: only http and https addresses can be fetched")
    host = url.raw_host.decode("ascii")
    if not host:
        raise Refused(f"Refused: {url}: the address names no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await checked_address(host, port, rules, resolve)
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    return client.build_request(
        "GET",
        url.copy_with(host=address, fragment=None),
        headers={"Host": url.netloc.decode("ascii"), "User-Agent": USER_AGENT, "Accept": ACCEPT},
        extensions=extensions,
    )


async def _answer(
    url: httpx.URL, response: httpx.Response, wants: Callable[[str], bool], max_bytes: int
) -> Fetched:
    content_type = response.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    fetched = Fetched(
        url=str(url),
        status=response.status_code,
        reason=response.reason_phrase,
        media_type=media_type,
        charset=response.charset_encoding,
    )
    if not response.is_success or not wants(media_type):
        return fetched  # nothing read: the model gets a line about it, not the body
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        room = max_bytes - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return replace(fetched, body=b"".join(chunks), cut=True)
        chunks.append(chunk)
        size += len(chunk)
    return replace(fetched, body=b"".join(chunks))


def _brief(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
