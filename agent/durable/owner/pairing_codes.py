"""What a pairing code looks like: eight characters people can read aloud and retype,
shown as "K7F3-PQ2M", and how a code typed in a message is read."""

from __future__ import annotations

import re
import secrets

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L
_PREFIXED = re.compile(r"/(?:start|pair)(?:@\w+)?\s+(\S+)", re.IGNORECASE)
_CODE = re.compile(rf"[{ALPHABET}]{{4}}-?[{ALPHABET}]{{4}}")  # "WELL-DONE" is words


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(8))


def shown(code: str) -> str:
    """A code as people read it: "K7F3PQ2M" -> "K7F3-PQ2M"."""
    return f"{code[:4]}-{code[4:]}"


def normal(text: str) -> str:
    """A code as typed (any case, with or without its dash) as it is kept."""
    return re.sub(r"[\s-]", "", text).upper()


def typed_code(text: str) -> str | None:
    """The code a stranger's message holds: "/start CODE" (a Telegram link's), "/pair CODE",
    or "ABCD-EFGH" alone. Eight letters alone, without the dash, are words, not a code."""
    text = text.strip()
    found = _PREFIXED.fullmatch(text)
    candidate = found.group(1).upper() if found else text.upper() if "-" in text else ""
    return normal(candidate) if _CODE.fullmatch(candidate) else None
