"""Gates of the Telegram double: requests held at a point of their life, so a test can kill
the client right there.

A gate takes the next ``times`` calls of a method (optionally only those whose text or
caption contains ``text``) and holds each one for ``seconds``:

- ``stage="before"``: before Telegram handles it. The request was written, nothing is
  recorded; a client that went away meanwhile (killed) leaves nothing behind, as when a
  request dies on the way. With ``refuse`` (a status), the request is then answered with
  that error instead (429 with ``retry_after``): the part was surely not taken.
- ``stage="after"``: after Telegram handled it (the message is in ``sent``), before the
  answer goes back: Telegram answering late (past a client's read timeout), or a client
  killed between the platform's "accepted" and its own mark.

``reached`` is set when a gate holds a request, so the test knows when to strike.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from fakes.telegram_faults import api_error

__all__ = ["Gate", "Gates", "InjectGates"]

Stage = Literal["before", "after"]


@dataclass
class Gate:
    method: str  # lower-case
    stage: Stage
    seconds: float
    text: str | None
    times: int
    refuse: int | None = None  # answer with this error status after the hold
    retry_after: int = 30
    held: int = 0  # requests held so far
    dropped: int = 0  # held "before" and given up: the client had gone
    reached: threading.Event = field(default_factory=threading.Event)

    def takes(self, method: str, params: dict[str, Any]) -> bool:
        if self.held >= self.times or method.lower() != self.method:
            return False
        said = str(params.get("text") or params.get("caption") or "")
        return self.text is None or self.text in said


class Gates:
    """The gates of one fake; both hooks run on the server's loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: list[Gate] = []

    def add(self, gate: Gate) -> None:
        with self._lock:
            self._gates.append(gate)

    def _take(self, stage: Stage, method: str, params: dict[str, Any]) -> Gate | None:
        with self._lock:
            for gate in self._gates:
                if gate.stage == stage and gate.takes(method, params):
                    gate.held += 1
                    gate.reached.set()
                    return gate
        return None

    async def before(self, request: web.Request, method: str, params: dict[str, Any]) -> bool:
        """Hold the request before it is handled; False: its client went away meanwhile,
        so nothing is done (Telegram never got it)."""
        gate = self._take("before", method, params)
        if gate is None:
            return True
        await asyncio.sleep(gate.seconds)
        transport = request.transport
        if transport is None or transport.is_closing():
            with self._lock:
                gate.dropped += 1
            return False
        if gate.refuse is not None:
            raise api_error(gate.refuse, gate.retry_after)
        return True

    async def after(self, method: str, params: dict[str, Any]) -> None:
        """Hold the answer of a request Telegram has handled."""
        gate = self._take("after", method, params)
        if gate is not None:
            await asyncio.sleep(gate.seconds)


class InjectGates:
    """Mixin for ``FakeTelegram``: ``gate(...)``."""

    _gates: Gates

    def gate(
        self,
        method: str,
        seconds: float,
        *,
        stage: Stage = "after",
        text: str | None = None,
        times: int = 1,
        refuse: int | None = None,
        retry_after: int = 30,
    ) -> Gate:
        """Hold the next ``times`` calls of ``method`` (whose text contains ``text``) for
        ``seconds``, ``before`` Telegram handles them or ``after``; with ``refuse``, answer
        them with that error after the hold (see the module)."""
        gate = Gate(method.lower(), stage, seconds, text, times, refuse, retry_after)
        self._gates.add(gate)
        return gate
