"""Plain data of the Discord double: the records tests read, Discord's error shape, JSON replies.

Nothing here holds state or imports the other ``discord_*`` modules, so every one of them
can use it (the layering is models <- cdn <- state <- routes <- server).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = [
    "MAX_CONTENT",
    "ApiError",
    "Call",
    "ChannelSpec",
    "Handler",
    "Route",
    "SentMessage",
    "check_content",
    "form_error",
    "json_response",
]

MAX_CONTENT = 2000
ChannelSpec = str | int | Mapping[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]  # HTTP method, aiohttp path pattern, handler


@dataclass(frozen=True)
class SentMessage:
    """A message the bot sent over REST, as the fake holds it now (after edits)."""

    message_id: str
    channel_id: str
    content: str
    reply_to: str | None  # message_reference.message_id
    attachments: tuple[tuple[str, bytes], ...] = ()
    edits: int = 0
    deleted: bool = False
    payload: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # the message's components now: action rows (type 1) of buttons (type 2)...
    components: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)

    @property
    def buttons(self) -> dict[str, str]:
        """The buttons the message shows: label -> custom_id (link buttons have none)."""
        return {
            str(item.get("label", "")): str(item.get("custom_id", ""))
            for row in self.components
            for item in row.get("components", ())
            if item.get("type") == 2
        }


@dataclass(frozen=True)
class Call:
    """One HTTP request; ``path`` is relative to ``api_base`` for REST calls."""

    method: str
    path: str
    status: int


class ApiError(Exception):
    """Raised by handlers; rendered as Discord's JSON error body by the middleware."""

    def __init__(
        self, status: int, message: str, code: int, errors: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.errors = status, message, code, errors


def json_response(body: Any, status: int = 200) -> web.Response:
    """Exactly ``Content-Type: application/json``: discord.py compares the header verbatim
    and treats anything else (aiohttp's ``; charset=utf-8`` included) as text."""
    return web.Response(
        body=json.dumps(body).encode(), status=status, content_type="application/json"
    )


def form_error(fld: str, code: str, message: str) -> ApiError:
    """Discord's 50035 "Invalid Form Body" with the per-field error discord.py shows."""
    errors = {fld: {"_errors": [{"code": code, "message": message}]}}
    return ApiError(400, "Invalid Form Body", 50035, errors)


def check_content(content: Any) -> str:
    """Message text as Discord stores it; over ``MAX_CONTENT`` characters is a form error."""
    text = "" if content is None else str(content)
    if len(text) > MAX_CONTENT:
        raise form_error(
            "content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length."
        )
    return text
