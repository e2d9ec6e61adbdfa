"""Where web_fetch may connect: the SSRF guard.

A URL names a host, but what is connected to is an address. So the host is resolved here,
every address it resolves to is checked, and the fetch connects to the address that was
checked (tools/web/pinned_fetch.py): no second DNS answer (rebinding) gets a say. Refused is
any address Python's `ipaddress` does not call global — loopback, private, link-local,
carrier-grade NAT, unspecified, reserved — and multicast, also when IPv4 hides inside IPv6
(mapped, 6to4, Teredo, NAT64). The owner lets a named host through with `[web] allow_hosts`
("host" or "host:port"); the cloud metadata services stay refused even then, since no page
the owner wants lives there and their credentials are what an SSRF is after.

Stdlib only: imported with the tools, before any fetch.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from tools.config import host_entry

IPAddress = IPv4Address | IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

METADATA = frozenset(
    ip_address(text)
    for text in (
        "169.254.169.254",  # AWS, Google Cloud, Azure, DigitalOcean, OpenStack...
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure's host agent (WireServer), a public address
    )
)
_CGNAT = IPv4Network("100.64.0.0/10")
_NAT64 = IPv6Network("64:ff9b::/96")
OWNER_HINT = (
    "web_fetch reaches public addresses only; the owner may allow a host in [web] allow_hosts"
)


class Refused(Exception):
    """A URL web_fetch will not fetch; the message is the one line the model gets."""


@dataclass(frozen=True)
class HostRules:
    """The owner's `allow_hosts`: (host, port) pairs, port None for any port."""

    allowed: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[str]) -> HostRules:
        return cls(frozenset(host_entry(entry) for entry in entries))

    def allows(self, host: str, port: int) -> bool:
        name = host.lower().rstrip(".")
        return (name, None) in self.allowed or (name, port) in self.allowed


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives for `host`, in its order."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _inner(ip: IPAddress) -> Iterator[IPAddress]:
    """Any IPv4 address carried inside the address (it says more of where a packet goes),
    then the address itself."""
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None:
            yield ip.ipv4_mapped
        if ip.sixtofour is not None:
            yield ip.sixtofour
        if ip.teredo is not None:
            yield from ip.teredo
        if ip in _NAT64:
            yield IPv4Address(int(ip) & 0xFFFF_FFFF)
    yield ip


def why_blocked(ip: IPAddress) -> str | None:
    """What kind of address this is when web_fetch must not reach it, else None."""
    if any(each in METADATA for each in _inner(ip)):
        return "a cloud metadata address"
    for each in _inner(ip):
        checks = (
            (each.is_unspecified, "an unspecified address"),
            (each.is_loopback, "a loopback address"),
            (each.is_link_local, "a link-local address"),
            (each.is_multicast, "a multicast address"),
            (isinstance(each, IPv4Address) and each in _CGNAT, "a carrier-grade NAT address"),
            (each.is_reserved, "a reserved address"),
            (each.is_private, "a private address"),
            (not each.is_global, "not a public address"),
        )
        for hit, kind in checks:
            if hit:
                return kind
    return None


async def checked_address(
    host: str, port: int, rules: HostRules, resolve: Resolver = system_resolve
) -> str:
    """The address to connect to for `host`: resolved once, each answer checked. Refused
    when any answer is an address web_fetch may not reach (unless the owner allows the
    host), when one is a metadata address, or when the name does not resolve."""
    try:
        answers = await resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise Refused(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}") from None
    if not answers:
        raise Refused(f"cannot resolve {host}: no address")
    allowed = rules.allows(host, port)
    for answer in answers:
        ip = ip_address(answer.split("%", 1)[0])  # an IPv6 zone ("%eth0") is not the address
        kind = why_blocked(ip)
        metadata = any(inner in METADATA for inner in _inner(ip))
        if kind is None or (allowed and not metadata):
            continue
        named = host if host == str(ip) else f"{host} ({ip})"
        if metadata:
            raise Refused(f"Refused: {named} is a cloud metadata address, never fetched")
        raise Refused(f"Refused: {named} is {kind}; {OWNER_HINT}")
    return answers[0]
