"""One chat channel started with its runtime, or stopped with nothing lost: at `agent run`'s
start (agent/daemon/serve.py) and when a reload restarts that channel alone
(agent/daemon/reload.py).

Stopping takes the channel's intake first, lets its running turns and sending finish within
the grace, then closes the adapter; what is unfinished stays in state.db (pending inbox rows,
unsent outbox parts), which the next runtime of the channel resumes when it starts.

When several processes share the store (PostgreSQL), one of them takes a bot's messages: the
role "intake:NAME" (`Store.claims`). The others start the channel on standby — connected,
sending their turns' replies, taking nothing — and try for the role every TAKE_OVER_EVERY_S;
the holder's role dies with it (kill -9 included), so the intake is taken over within that
(Telegram keeps what nobody acknowledged; Discord's gateway does not replay what came in the
gap). `IntakeRoles` keeps those tries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agent.app import App
from agent.daemon.status import say
from agent.durable.store import Claims
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.owner.budget import Tell
from agent.runtime.turn_setup import Access
from channels.base import Channel, SharesIntake

log = logging.getLogger(__name__)

TAKE_OVER_EVERY_S = 2.0  # a dead holder's intake is taken over within this (and a connect)


class IntakeRoles:
    """The bots' intakes this process holds, and those it waits to take over."""

    def __init__(self, claims: Claims) -> None:
        self._claims = claims
        self._waiting: dict[str, ChannelRuntime] = {}
        self._holding: dict[str, ChannelRuntime] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        claims.on_lost(self._lost)

    async def first_try(self, channel: Channel) -> None:
        """Before the channel starts: its intake, if no other process holds it."""
        if self._claims.shared and isinstance(channel, SharesIntake):
            channel.standby = not await self._claims.take("role", _role(channel.name))

    def wait_for(self, runtime: ChannelRuntime) -> None:
        """After the channel started: hold its intake, or try for it from now on."""
        channel = runtime.channel
        if not (self._claims.shared and isinstance(channel, SharesIntake)):
            return
        if channel.standby:
            say(f"{channel.name}: on standby; another process takes its messages")
            self._waiting[channel.name] = runtime
        else:
            self._holding[channel.name] = runtime
        if self._task is None:
            self._task = asyncio.create_task(self._take_over(), name="intake roles")

    async def let_go(self, name: str) -> None:
        """The channel stops here: its role (held or tried for) is let go."""
        self._waiting.pop(name, None)
        self._holding.pop(name, None)
        await self._claims.give_back("role", _role(name))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _lost(self) -> None:
        """The claims' connection broke: every intake held here may be another's by now, so
        each goes back to standby (two processes polling one bot would fight) and tries."""
        for name, runtime in self._holding.items():
            say(f"{name}: lost the intake with the store's connection; on standby")
            self._waiting[name] = runtime
            task = asyncio.create_task(runtime.channel.stop_intake(), name=f"{name} standby")
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        self._holding.clear()

    async def _take_over(self) -> None:
        while True:
            await asyncio.sleep(TAKE_OVER_EVERY_S)
            try:
                await self._claims.check()  # a broken connection found out: _lost
            except Exception as exc:
                log.warning("intake roles: the store cannot be reached: %s", exc)
                continue
            for name, runtime in list(self._waiting.items()):
                try:
                    if not await self._claims.take("role", _role(name)):
                        continue
                    await runtime.channel.start_intake()  # type: ignore[attr-defined]
                except Exception as exc:  # the store or the platform: next time
                    log.warning("%s: could not take the intake over: %s", name, exc)
                    continue
                self._holding[name] = self._waiting.pop(name)
                say(f"{name}: took the intake over; taking its messages here now")


def _role(channel: str) -> str:
    return f"intake:{channel}"


async def start_channel(
    app: App,
    channel: Channel,
    access: Access,
    tell: Tell | None = None,
    roles: IntakeRoles | None = None,
) -> ChannelRuntime | None:
    """The channel taking messages into its runtime (or on standby, `roles` saying), and what
    an earlier run (or runtime) left pending resumed; None when it could not start (said in
    the log). `tell`: how the budget's notices reach the owner."""
    runtime = app.runtime(channel, access)
    runtime.controls.budget.tell = tell
    try:
        if roles is not None:
            await roles.first_try(channel)
        await channel.start(runtime.intake.submit, runtime.is_allowed_sender)
    except Exception as exc:
        log.error("%s did not start: %s: %s", channel.name, type(exc).__name__, exc)
        await stop_quietly(runtime, roles)
        return None
    log.info("%s started", channel.name)  # with -v (tests wait for it), beside the line
    account = channel.account
    say(f"{channel.name} connected as {account}" if account else f"{channel.name} started")
    if roles is not None:
        roles.wait_for(runtime)
    await runtime.resume()  # what an earlier run left pending
    return runtime


async def stop_channel(
    runtime: ChannelRuntime, grace_s: float, roles: IntakeRoles | None = None
) -> None:
    """No new messages; running turns and sending get `grace_s`; then the adapter stops."""
    await runtime.channel.stop_intake()
    await runtime.drain(grace_s)
    await stop_quietly(runtime, roles)


async def stop_quietly(runtime: ChannelRuntime, roles: IntakeRoles | None = None) -> None:
    try:
        await runtime.channel.stop()
    except Exception as exc:
        log.warning("%s did not stop cleanly: %s", runtime.channel.name, exc)
    if roles is not None:
        with contextlib.suppress(Exception):  # the claims' connection may be gone already
            await roles.let_go(runtime.channel.name)
