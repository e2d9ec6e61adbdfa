"""What a message must be before it is stored: valid text, bounded size, files within limits.

Pure functions; the runtime applies them before the message reaches the inbox, so nothing a
chat sends can make a turn fail (a lone surrogate cannot be encoded, a 1 MB text cannot fit
any model's window, a 200 MB file would be held in memory).
"""

from __future__ import annotations

import dataclasses
import re

from channels.base import IncomingMessage, RemoteFile

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
MB = 1024 * 1024


def repair_text(text: str) -> str:
    """Replace lone UTF-16 surrogates (which no encoder accepts) with U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def cut_text(text: str, max_chars: int) -> str:
    """At most `max_chars` characters, with a note to the model saying what was cut."""
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n\n[The message was cut here: it had {len(text):,} characters, "
        f"the limit is {max_chars:,}. Tell the user if the rest matters.]"
    )


def too_big(files: tuple[RemoteFile, ...], max_mb: float) -> list[RemoteFile]:
    return [item for item in files if item.size > max_mb * MB]


def refusal_text(refused: list[RemoteFile], max_mb: float) -> str:
    names = ", ".join(f"{item.name} ({item.size / MB:.0f} MB)" for item in refused)
    return f"I can't take {names}: files over {max_mb:g} MB are not accepted."


def stranger_text(channel: str, sender_id: str) -> str:
    """The one polite answer to someone not on the channel's allow-list."""
    env = f"PINCLAW_CHANNELS__{channel.upper()}__ALLOWED_USERS"
    return (
        f"Hello! This is a private assistant and you are not on its list. Your "
        f"{channel} user id is {sender_id}. To allow you, the owner adds "
        f'"{sender_id}" to allowed_users in [channels.{channel}] (or {env}) '
        "and restarts the bot."
    )


def prepared(msg: IncomingMessage, *, max_chars: int, max_mb: float) -> IncomingMessage:
    """The message as it will be stored: repaired, cut, and without files over the limit."""
    files = tuple(
        dataclasses.replace(item, name=repair_text(item.name))
        for item in msg.files
        if item not in too_big(msg.files, max_mb)
    )
    return dataclasses.replace(
        msg,
        text=cut_text(repair_text(msg.text), max_chars),
        sender_name=repair_text(msg.sender_name),
        sender_username=repair_text(msg.sender_username),
        files=files,
    )
