"""The OpenAI-compatible API's bearer keys: each a line `HTTP_KEY_<ID>=pk-<person>-<secret>`
in agent.env (the name holds KEY, so the scrubber knows the value; the person it is for is
inside it, so the key alone says whose turns it asks for). Read from the environment at
each request: a key `agent http keys add` wrote, or one `revoke` removed, counts once the
daemon has read agent.env again (it watches the file). Stdlib only: the CLI reads it too.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "HTTP_KEY_"
_KEY = re.compile(r"pk-([A-Za-z_][A-Za-z0-9_-]*)-([0-9a-f]{32})")


@dataclass(frozen=True)
class ApiKey:
    id: str  # what `agent http keys revoke` takes
    person: str  # the [people] name its turns run as

    @property
    def variable(self) -> str:
        return f"{PREFIX}{self.id}"


def new_key(person: str) -> tuple[ApiKey, str]:
    """A fresh key for `person`: its id and the token, shown once."""
    return ApiKey(secrets.token_hex(4).upper(), person), f"pk-{person}-{secrets.token_hex(16)}"


def keys_in(environ: Mapping[str, str]) -> list[ApiKey]:
    """The keys an environment holds, in the order of their ids."""
    found = []
    for name, value in environ.items():
        match = _KEY.fullmatch(value)
        if name.startswith(PREFIX) and match:
            found.append(ApiKey(name.removeprefix(PREFIX), match.group(1)))
    return sorted(found, key=lambda key: key.id)


def person_for(token: str, environ: Mapping[str, str]) -> str | None:
    """The person a bearer token is a key for; None when no key is that token (every key
    compared, in constant time, as bytes: aiohttp decodes a header with surrogateescape, so
    a token that is not UTF-8 holds surrogates, which a plain `encode()` refuses)."""
    match = _KEY.fullmatch(token)
    given, found = token.encode("utf-8", "surrogateescape"), False
    for name, value in environ.items():
        key = value.encode("utf-8", "surrogateescape")  # os.environ decodes as aiohttp does
        if name.startswith(PREFIX) and hmac.compare_digest(key, given):
            found = True
    return match.group(1) if found and match else None
