"""Failures of the Telegram double: calls it refuses, polls it counts, downloads it slows.

``Faults`` holds the rules (the next N calls of a method, or every call for a time window) and
counts what they refused; ``InjectFaults`` is the part of ``FakeTelegram``'s API that sets them.
Rules are set from the test thread while the server thread answers, so all of it is locked.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fakes.telegram_files import Download
from fakes.telegram_models import ApiCall, ApiError, int_param
from fakes.telegram_state import TelegramState

__all__ = ["FailWindow", "Faults", "InjectFaults", "api_error"]

_PHRASES = {
    400: "Bad Request",
    403: "Forbidden",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def api_error(
    status: int, retry_after: int, description: str | None = None, **parameters: Any
) -> ApiError:
    """The error as Telegram words it; a 429 carries ``parameters.retry_after``, others the
    ``parameters`` given (``migrate_to_chat_id``)."""
    if status == 429:
        return ApiError(
            429,
            description or f"Too Many Requests: retry after {retry_after}",
            retry_after=retry_after,
        )
    return ApiError(status, description or _PHRASES.get(status, "Error"), **parameters)


def _matches(rule: str, method: str) -> bool:
    """A rule for "*" takes any method but getUpdates, which only a rule naming it takes."""
    name = method.lower()
    return rule == name or (rule == "*" and name != "getupdates")


@dataclass
class FailWindow:
    """One ``fail_for`` rule: refuses matching calls until ``end()`` or its time runs out."""

    method: str  # lower-case, or "*"
    status: int
    retry_after: int | None  # None: the seconds left in the window, rounded up
    description: str | None
    until: float  # time.monotonic() when the window closes
    rejected: int = 0  # calls this window refused
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def active(self) -> bool:
        with self._lock:
            return time.monotonic() < self.until

    def end(self) -> None:
        """Close the window now; the next call is answered normally."""
        with self._lock:
            self.until = min(self.until, time.monotonic())

    def refuse(self, method: str) -> ApiError | None:
        """The error for this call, counted, if the window is open and takes ``method``."""
        with self._lock:
            left = self.until - time.monotonic()
            if left <= 0 or not _matches(self.method, method):
                return None
            self.rejected += 1
        wait = self.retry_after if self.retry_after is not None else max(1, math.ceil(left))
        return api_error(self.status, wait, self.description)


class Faults:
    """The failure rules of one fake, and how many calls they refused by method."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: list[tuple[str, ApiError]] = []
        self._windows: list[FailWindow] = []
        self._rejected: Counter[str] = Counter()

    def fail_next(self, method: str, error: ApiError, times: int) -> None:
        with self._lock:
            self._next.extend([(method.lower(), error)] * times)

    def add_window(self, window: FailWindow) -> None:
        with self._lock:
            self._windows = [w for w in self._windows if w.active] + [window]

    def take(self, method: str) -> ApiError | None:
        """The error to answer this call with, if a rule takes it (``fail_next`` first)."""
        with self._lock:
            error = None
            for i, (name, queued) in enumerate(self._next):
                if name in (method.lower(), "*"):
                    del self._next[i]
                    error = queued
                    break
            for window in self._windows:
                if error is None:
                    error = window.refuse(method)
            if error is not None:
                self._rejected[method] += 1
            return error

    def rejected(self) -> dict[str, int]:
        with self._lock:
            return dict(self._rejected)


class InjectFaults:
    """Mixin for ``FakeTelegram``: failures, slow downloads and what polling looked like."""

    _state: TelegramState
    _faults: Faults

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int = 1,
        times: int = 1,
        description: str | None = None,
        **parameters: Any,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` ("*" for any, getUpdates included)
        with an error (with ``parameters``: its ResponseParameters, e.g. migrate_to_chat_id);
        these come before any ``fail_for`` window."""
        error = api_error(status, retry_after, description, **parameters)
        self._faults.fail_next(method, error, times)

    def fail_for(
        self,
        method: str,
        seconds: float,
        status: int = 429,
        retry_after: int | None = None,
        description: str | None = None,
    ) -> FailWindow:
        """Answer every call of ``method`` for the next ``seconds`` with an error: 429 with
        ``parameters.retry_after`` (by default the seconds left in the window, rounded up),
        or any other status (500, 502...). "*" takes every method but getUpdates, which only
        a rule naming it takes; a long poll already waiting is not interrupted."""
        window = FailWindow(
            method.lower(), status, retry_after, description, time.monotonic() + seconds
        )
        self._faults.add_window(window)
        return window

    @property
    def rejected_calls(self) -> dict[str, int]:
        """Calls refused by ``fail_next`` or ``fail_for``, by method name as called."""
        return self._faults.rejected()

    @property
    def poll_offsets(self) -> list[int | None]:
        """The ``offset`` of every getUpdates call, refused or not, oldest first; its length is
        the number of polls (a client polling in a tight loop shows as thousands)."""
        with self._state.lock:
            polls = [c for c in self._state.calls if c.method.lower() == "getupdates"]
        return [_offset(c) for c in polls]

    def slow_downloads(self, bytes_per_s: float | None, file_id: str | None = None) -> None:
        """Serve file downloads at ``bytes_per_s`` (of one file, or of every file without a
        rate of its own); None lifts the limit. Takes effect on downloads already running, and
        the API keeps answering other calls meanwhile."""
        self._state.files.throttle(bytes_per_s, file_id)

    @property
    def downloads(self) -> list[Download]:
        """Every file download begun, oldest first, with how far it got."""
        return self._state.files.downloads()


def _offset(call: ApiCall) -> int | None:
    try:
        return int_param(call.params, "offset")
    except ApiError:
        return None
