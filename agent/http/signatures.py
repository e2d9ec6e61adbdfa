"""Is a webhook delivery signed with its secret? The two schemes (pure, stdlib):

- `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, as GitHub (and
  Gitea, Forgejo) send it;
- `generic`: `X-Timestamp: <unix seconds>` and `X-Signature-256: sha256=<hex HMAC-SHA256 of
  "<timestamp>.<body>">`, the timestamp within the hook's window (5 minutes) of now, so a
  captured delivery cannot be sent again later.

Digests are compared in constant time, as bytes (a header that is not UTF-8 reaches us
with surrogates: it is a wrong signature, not an error). `Verdict.key` is what makes a
delivery unique, for the inbox's once-only: under `generic` the signature, which covers the
timestamp and the body, so a captured delivery sent again within the window is the same
key whatever its unsigned `X-Delivery` says; under `github` the `X-GitHub-Delivery` id (else
the signature). GitHub signs neither that id nor a time: a captured delivery sent again
under a new id is not caught, the limit of its scheme.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str = ""  # a refusal's line: what is wrong, never the secret nor the digest expected
    key: str = ""  # the delivery's identity, for the inbox's once-only


def _digest(secret: str, data: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def sign_github(secret: str, body: bytes) -> str:
    return _digest(secret, body)


def sign_generic(secret: str, timestamp: str, body: bytes) -> str:
    return _digest(secret, timestamp.encode() + b"." + body)


def verify(
    scheme: str,
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    window_s: float,
) -> Verdict:
    """Whether `body` with `headers` is signed with `secret` under `scheme`."""
    if scheme == "github":
        given = headers.get("X-Hub-Signature-256", "")
        expected = sign_github(secret, body)
        delivery = _printable(headers.get("X-GitHub-Delivery", ""))
    else:
        stamp = headers.get("X-Timestamp", "")
        given = headers.get("X-Signature-256", "")
        try:
            age = abs(now - float(stamp))
        except ValueError:
            return Verdict(False, "no X-Timestamp header with unix seconds")
        if age > window_s:
            return Verdict(
                False, f"stale: the timestamp is {age:.0f} s from now (window {window_s:g} s)"
            )
        expected = sign_generic(secret, stamp, body)
        delivery = ""  # X-Delivery is not signed: a replay could name any
    if not given:
        return Verdict(False, "no signature header")
    if not hmac.compare_digest(_bytes(given), expected.encode()):
        return Verdict(False, "the signature does not match")
    return Verdict(True, key=delivery[:200] or given.removeprefix("sha256="))


def _bytes(header: str) -> bytes:
    """A header's own bytes: aiohttp decodes them with surrogateescape, so one that is not
    UTF-8 holds surrogates, which a plain `encode()` refuses."""
    return header.encode("utf-8", "surrogateescape")


def _printable(header: str) -> str:
    """A header fit for a message id (state.db refuses surrogates in text)."""
    return header.encode("utf-8", "backslashreplace").decode("utf-8")
