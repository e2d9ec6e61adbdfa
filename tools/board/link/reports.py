"""Pins the board reports on its own, handed to watchers on the event loop.

Firmata reports an analog input every sampling interval (REPORT_ANALOG) and a digital port
whenever one of its inputs changes (REPORT_DIGITAL), so watching a pin costs no polling over
serial. The reader thread hears each report; `Watches` moves it to the event loop and calls
each subscriber there: analog values every report, digital levels when they change. When
the board is lost, each subscriber's `on_lost` hears why; the Board reconnects and
resubscribes, after a reset too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.board.link.firmata_types import PinToken

log = logging.getLogger(__name__)
OnValue = Callable[[PinToken, float], None]
OnLost = Callable[[str], None]


@dataclass(eq=False)
class Subscription:
    """One watcher of one pin. `cancel()` ends it; `lost` says why the board is gone, until
    it is back."""

    token: PinToken
    pin: int
    mode: str  # "analog", "input" or "input_pullup"
    channel: int | None  # the analog channel, for "analog"
    on_value: OnValue
    on_lost: OnLost | None = None
    lost: str | None = None
    last: float | None = None
    _owner: Watches | None = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self._owner is not None

    def cancel(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.remove(self)


class Watches:
    """Every subscription of one board; reports arrive from the reader thread."""

    def __init__(self) -> None:
        self.subs: list[Subscription] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def __bool__(self) -> bool:
        return bool(self.subs)

    def add(self, sub: Subscription) -> Subscription:
        sub._owner = self
        self.subs.append(sub)
        return sub

    def remove(self, sub: Subscription) -> None:
        if sub in self.subs:
            self.subs.remove(sub)

    def report(self, kind: str, key: int, payload: object) -> list[tuple[PinToken, float]]:
        """On the event loop: an analog or port report reaches the pins' subscribers.
        Returns each pin's reading that was handed on, once per pin."""
        handed: dict[PinToken, float] = {}
        if not isinstance(payload, int):
            return []
        for sub in list(self.subs):
            if kind == "analog" and sub.mode == "analog" and sub.channel == key:
                value = float(payload)
            elif kind == "port" and sub.mode != "analog" and sub.pin // 8 == key:
                value = float((payload >> (sub.pin % 8)) & 1)
                if value == sub.last:
                    continue
            else:
                continue
            sub.last = value
            sub.lost = None  # it hears the board again (its watch may be put back first)
            handed[sub.token] = value
            _call(sub.on_value, sub.token, value)
        return list(handed.items())

    def lost(self, reason: str) -> None:
        for sub in list(self.subs):
            if sub.lost is None:
                sub.lost = reason
                sub.last = None
                if sub.on_lost is not None:
                    _call(sub.on_lost, reason)

    def back(self) -> None:
        for sub in self.subs:
            sub.lost = None


def _call(fn: Callable[..., None], *args: object) -> None:
    try:
        fn(*args)
    except Exception:  # one watcher's bug must not stop the others
        log.exception("a pin watcher failed")
