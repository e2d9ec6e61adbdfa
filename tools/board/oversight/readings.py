"""Readings of watched pins, kept for a while so they can be charted (plot_pin).

A watched analog input reports every sampling interval (a tenth of a second by default), far
more than a week's chart needs: a reading is kept when `keep_readings_s` has passed since the
pin's last kept one, and a digital level also whenever it changes. Kept readings are written
in batches, a few seconds apart, and each batch forgets the pin's readings older than
`keep_readings_days`, so the table stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from tools.background import stop_tasks
from tools.board.link.firmata_types import PinToken
from tools.board.oversight.records import HardwareRecords
from tools.config import BoardSettings

log = logging.getLogger(__name__)
FLUSH_S = 2.0  # kept readings wait at most this long before they are written
DAY_S = 86_400.0


class ReadingKeeper:
    """What each board's watched pins read, thinned out and written to the records."""

    def __init__(
        self, records: HardwareRecords | None, boards: Mapping[str, BoardSettings]
    ) -> None:
        self._records = records
        self._every = {name: settings.keep_readings_s for name, settings in boards.items()}
        self._days = {name: settings.keep_readings_days for name, settings in boards.items()}
        self._last: dict[tuple[str, str], tuple[float, float]] = {}  # kept: time, value
        self._pending: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self._flushing: asyncio.Task[None] | None = None

    def heard(self, board: str, token: PinToken, value: float) -> None:
        """A reading of a watched pin (on the event loop)."""
        every = self._every.get(board, 0.0)
        if self._records is None or not every:
            return
        key, now = (board, str(token)), time.time()
        last = self._last.get(key)
        if last is not None and now - last[0] < every and not _flipped(last[1], value):
            return
        self._last[key] = (now, value)
        self._pending.setdefault(key, []).append((now, value))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush_soon(), name="keep readings")

    async def flush(self) -> None:
        """Write what is pending now (at stop)."""
        pending, self._pending = self._pending, {}
        if self._records is None:
            return
        now = time.time()
        for (board, pin), rows in pending.items():
            forget = now - self._days.get(board, 7.0) * DAY_S
            try:
                await self._records.keep_readings(board, pin, rows, forget)
            except Exception:  # a full disk must not stop the watches
                log.exception("could not keep %d readings of %s on %s", len(rows), pin, board)

    async def stop(self) -> None:
        await stop_tasks(self._flushing)
        await self.flush()

    async def _flush_soon(self) -> None:
        try:
            await asyncio.sleep(FLUSH_S)
            await self.flush()
        finally:
            self._flushing = None


def _flipped(before: float, now: float) -> bool:
    """A digital level that changed (both readings 0 or 1, and different)."""
    return before in (0.0, 1.0) and now in (0.0, 1.0) and before != now
