"""Delivery rules of the Discord double: nonces as Discord enforces them, and gates that hold
a message send at a point of its life so a test can kill the client right there.

- ``NonceBook``: a message created with ``enforce_nonce`` and a nonce that the same author
  used within the window (Discord says "the past few minutes") is not created again: the
  first message is returned, nothing is echoed. Without ``enforce_nonce`` a nonce only
  travels with the message, as on Discord.
- ``SendGates``: ``stage="before"`` holds a send before Discord handles it (a client gone
  meanwhile leaves nothing); ``stage="after"`` holds the answer of a send that created its
  message (Discord answering late, or a client killed between "accepted" and its own mark).
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from fakes.discord_models import json_response

__all__ = ["NONCE_WINDOW_S", "NonceBook", "SendFailures", "SendGate", "SendGates", "Stage"]

NONCE_WINDOW_S = 300.0
Stage = Literal["before", "after"]


class NonceBook:
    """(author, nonce) -> the message it created and when; called with the world's lock."""

    def __init__(self, window_s: float = NONCE_WINDOW_S) -> None:
        self.window_s = window_s
        self._seen: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self.deduplicated = 0  # sends answered with the message an earlier one created

    @staticmethod
    def _key(author: str, payload: dict[str, Any]) -> tuple[str, str] | None:
        nonce = payload.get("nonce")
        if nonce is None or not payload.get("enforce_nonce"):
            return None
        return author, str(nonce)

    def earlier(self, author: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The message this send's nonce already created within the window, if any."""
        key = self._key(author, payload)
        found = self._seen.get(key) if key is not None else None
        if found is None or time.monotonic() - found[0] > self.window_s:
            return None
        self.deduplicated += 1
        return copy.deepcopy(found[1])

    def keep(self, author: str, payload: dict[str, Any], snapshot: dict[str, Any]) -> None:
        key = self._key(author, payload)
        if key is not None:
            self._seen[key] = (time.monotonic(), copy.deepcopy(snapshot))


@dataclass
class SendGate:
    stage: Stage
    seconds: float
    text: str | None
    times: int
    held: int = 0
    dropped: int = 0  # held "before" and given up: the client had gone
    reached: threading.Event = field(default_factory=threading.Event)


class SendGates:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: list[SendGate] = []

    def add(self, gate: SendGate) -> SendGate:
        with self._lock:
            self._gates.append(gate)
        return gate

    def _take(self, stage: Stage, payload: dict[str, Any]) -> SendGate | None:
        content = str(payload.get("content") or "")
        with self._lock:
            for gate in self._gates:
                fits = gate.text is None or gate.text in content
                if gate.stage == stage and gate.held < gate.times and fits:
                    gate.held += 1
                    gate.reached.set()
                    return gate
        return None

    async def before(self, request: web.Request, payload: dict[str, Any]) -> bool:
        """Hold the send before it is handled; False: its client went away meanwhile."""
        gate = self._take("before", payload)
        if gate is None:
            return True
        await asyncio.sleep(gate.seconds)
        transport = request.transport
        if transport is None or transport.is_closing():
            with self._lock:
                gate.dropped += 1
            return False
        return True

    async def after(self, payload: dict[str, Any]) -> None:
        gate = self._take("after", payload)
        if gate is not None:
            await asyncio.sleep(gate.seconds)


class SendFailures:
    """Errors to answer the next message sends (POST .../messages) with, oldest first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: list[tuple[int, str, int, dict[str, str], float | None]] = []

    def add(
        self,
        status: int,
        message: str,
        code: int = 0,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        """As Discord words it: ``retry_after`` goes in a 429's body; a 429 without a
        ``Via`` header is what discord.py takes for Cloudflare's block."""
        with self._lock:
            self._queued.extend([(status, message, code, headers or {}, retry_after)] * times)

    def answer(self, request: web.Request) -> web.Response | None:
        """The error for this request, if it is a message send and one is queued."""
        if request.method != "POST" or not request.path.endswith("/messages"):
            return None
        with self._lock:
            if not self._queued:
                return None
            status, message, code, headers, retry_after = self._queued.pop(0)
        body: dict[str, Any] = {"message": message, "code": code}
        if retry_after is not None:
            body |= {"retry_after": retry_after, "global": False}
        resp = json_response(body, status=status)
        resp.headers.update(headers)
        return resp
