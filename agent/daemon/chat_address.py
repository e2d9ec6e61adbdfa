"""What `agent send --to` accepts: a chat id of the channel (its kind says their shape), or
a person named in `[people]`. Checked by the command before it calls, and by the daemon
again.
"""

from __future__ import annotations

import re

from channels.registry import channel_kinds, kind_named

_EXAMPLES = "; ".join(
    f"{kind.capabilities.display_name}'s e.g. {kind.chat_id_example}" for kind in channel_kinds()
)
TO_ACCEPTED = (
    f"--to takes a numeric chat id ({_EXAMPLES}) or the name of a person in [people], never @name"
)
_PERSON = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # a TOML bare key, not starting like an id


def chat_form(channel: str, to: str) -> str | None:
    """What --to names on `channel`: "id", "person", or None when it is neither (the daemon
    checks this again: its socket takes requests from any of the owner's scripts)."""
    kind = kind_named(channel)
    if kind is not None and kind.chat_id.fullmatch(to):
        return "id"
    return "person" if _PERSON.fullmatch(to) else None
