"""What `agent send --to` accepts: a chat id of the channel, or a person named in
`[channels.<name>.people]`. Checked by the command before it calls, and by the daemon again.
"""

from __future__ import annotations

import re

TO_ACCEPTED = (
    "--to takes a numeric chat id (Telegram's may be negative, e.g. -1001234567890; Discord's "
    "are numeric snowflakes) or the name of a person in [people], never @name"
)
_CHAT_ID = {"telegram": re.compile(r"-?\d+"), "discord": re.compile(r"\d+")}
_PERSON = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # a TOML bare key, not starting like an id


def chat_form(channel: str, to: str) -> str | None:
    """What --to names on `channel`: "id", "person", or None when it is neither (the daemon
    checks this again: its socket takes requests from any of the owner's scripts)."""
    if (pattern := _CHAT_ID.get(channel)) is not None and pattern.fullmatch(to):
        return "id"
    return "person" if _PERSON.fullmatch(to) else None
