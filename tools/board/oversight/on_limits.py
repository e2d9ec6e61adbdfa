"""`max_on_s`: the longest an output (or a PWM above 0) may stay on before pinclaw turns it
off, and tells the chat that switched it on (the daemon's `tell` picks the owner's private
chat when that chat cannot hear it: agent/proactive/hardware.py).

When a limited pin goes on, its deadline is written down (`HardwareRecords.set_deadline`,
state.db) before the tool answers, and a timer waits for it; switching the pin off clears
it, and switching it on again while it is on keeps the first deadline. A daemon that starts
arms every deadline it finds, so one killed while a pump ran still switches it off at the
original time (at once, if that has passed). A board that cannot be reached at the
deadline is tried again with backoff until it answers; the chat hears of both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from tools.board.fleet import Boards
from tools.board.link.firmata_types import BoardError, PinReading
from tools.board.oversight.records import MAX_ON, PINCLAW, Actuation, Deadline, HardwareRecords
from tools.board.pin_names import Target
from tools.board.pin_policy import describe_value
from tools.config import pin_token

log = logging.getLogger(__name__)
Tell = Callable[[str, str], Awaitable[None]]  # (chat key, text): a message to that chat
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 30.0
LONGEST_SLEEP_S = 60.0  # the wall clock is looked at again at least this often


async def until(due: float) -> None:
    """Sleep until the wall clock reads `due`, looking at it again every minute (a clock
    set forward or back is followed)."""
    left = due - time.time()
    while left > 0:
        await asyncio.sleep(min(left, LONGEST_SLEEP_S))
        left = due - time.time()


class OnLimits:
    """Deadlines of every limited output of the runtime's boards, and their timers."""

    def __init__(self, boards: Boards, records: HardwareRecords | None) -> None:
        self._boards = boards
        self._records = records
        self.limits = {
            (name, str(pin.pin)): pin.max_on_s
            for name, board in boards.boards.items()
            for pin in board.settings.pins.values()
            if pin.max_on_s is not None
        }
        self._due: dict[tuple[str, str], Deadline] = {}
        self._timers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.tell: Tell | None = None  # the daemon's way to a chat; None: only logged

    def limit_of(self, target: Target) -> float | None:
        return self.limits.get((target.board, str(target.ref.token)))

    def pattern_refusal(self, target: Target, steps: Sequence[tuple[int, float]]) -> str | None:
        """A pattern whose on-step outlasts the pin's max_on_s is refused."""
        limit = self.limit_of(target)
        longest = max((seconds for level, seconds in steps if level), default=0.0)
        if limit is None or longest <= limit:
            return None
        return (
            f"Not done: {target.label} may stay on at most {limit:g} s (max_on_s), and this "
            f"pattern keeps it on {longest:g} s at a time; give a shorter period_ms."
        )

    async def after_write(self, target: Target, reading: PinReading, chat: str) -> str:
        """Keep or clear the pin's deadline after a confirmed write; a note for the result."""
        key = (target.board, str(target.ref.token))
        limit = self.limits.get(key)
        if limit is None:
            return ""
        if not reading.value or reading.mode not in ("output", "pwm"):
            await self.clear(*key)
            return ""
        now = time.time()
        deadline = self._due.get(key)
        kept = ""
        if deadline is None:
            deadline = Deadline(target.board, key[1], target.label, now + limit, chat, now)
            if self._records is not None:
                try:
                    await self._records.set_deadline(deadline)
                except Exception:
                    log.exception("could not keep the max_on_s deadline of %s", target.label)
                    kept = " (not written to state.db: a restart before then would not)"
            self._arm(deadline)
        left = max(0.0, deadline.due - now)
        return f"pinclaw switches it off in {left:.0f} s (max_on_s {limit:g} s){kept}."

    async def clear(self, board: str, pin: str) -> None:
        """The pin is off (or a pattern took it over): no deadline any more."""
        timer = self._timers.pop((board, pin), None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
        if self._due.pop((board, pin), None) is not None and self._records is not None:
            await self._records.clear_deadline(board, pin)

    async def arm_kept(self) -> int:
        """At start: arm every deadline state.db holds for a pin still limited; forget the
        rest. Returns how many were armed."""
        if self._records is None:
            return 0
        armed = 0
        for deadline in await self._records.deadlines():
            if (deadline.board, deadline.pin) in self.limits:
                self._arm(deadline)
                armed += 1
            else:
                await self._records.clear_deadline(deadline.board, deadline.pin)
        return armed

    @property
    def armed(self) -> list[tuple[str, str]]:
        """(board, pin) of every deadline waited for now."""
        return list(self._timers)

    def stop(self) -> None:
        """Stop the timers; the deadlines stay written down for the next start."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _arm(self, deadline: Deadline) -> None:
        key = (deadline.board, deadline.pin)
        self._due[key] = deadline
        if key not in self._timers:
            name = f"max_on_s {deadline.board} {deadline.pin}"
            self._timers[key] = asyncio.create_task(self._expire(deadline), name=name)

    async def _expire(self, deadline: Deadline) -> None:
        await until(deadline.due)
        reading = await self._switch_off(deadline)
        key = (deadline.board, deadline.pin)
        self._timers.pop(key, None)
        await self.clear(*key)
        limit = self.limits.get(key, 0.0)
        state = describe_value(reading.mode, reading.value, note=reading.note)
        if self._records is not None:
            pin = self._pin_label(deadline)
            entry = Actuation(time.time(), deadline.board, pin, "off", state, MAX_ON)
            await self._records.log(dataclasses.replace(entry, who=PINCLAW, chat=deadline.chat))
        log.warning("%s switched off: on for %g s, its max_on_s", deadline.label, limit)
        await self._say(
            deadline.chat,
            f"pinclaw switched {deadline.label} off: it had been on for {limit:g} s, its "
            "max_on_s. It is now " + (state or "off") + ".",
        )

    def _pin_label(self, deadline: Deadline) -> str:
        """The pin as the actuation log names it, without its board: the log has a column
        for the board, while the deadline's label names it too (said to the chat)."""
        policy = self._boards.names.policies.get(deadline.board)
        ref = policy.allowed.get(pin_token(deadline.pin)) if policy is not None else None
        return ref.label if ref is not None else deadline.label

    async def _switch_off(self, deadline: Deadline) -> PinReading:
        board = self._boards[deadline.board]
        token: int | str = int(deadline.pin) if deadline.pin.isdigit() else deadline.pin
        modes = {str(pin.pin): pin.mode for pin in board.settings.pins.values()}
        pwm = modes.get(deadline.pin) == "pwm"
        wait, told = RETRY_FIRST_S, False
        while True:
            try:
                if pwm:
                    return await board.pwm_write(token, 0.0)
                return await board.digital_write(token, 0)
            except BoardError as exc:
                log.warning("could not switch %s off at its max_on_s: %s", deadline.label, exc)
                if not told:
                    told = True
                    await self._say(
                        deadline.chat,
                        f"pinclaw could not switch {deadline.label} off at its max_on_s ({exc}); "
                        "it keeps trying until the board answers.",
                    )
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_S)

    async def _say(self, chat: str, text: str) -> None:
        """To the chat that switched it on ("" for none): the daemon's `tell` finds someone
        to tell when that chat cannot hear it (agent/proactive/hardware.py)."""
        if self.tell is None:
            return
        try:
            await self.tell(chat, text)
        except Exception:  # a chat that cannot be told must not stop the switching off
            log.exception("could not tell %s: %s", chat, text)
