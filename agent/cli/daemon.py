"""`agent run` without -m: every enabled channel in one asyncio process until a signal.

SIGINT/SIGTERM stop intake, let running turns and sending finish for
`agent.shutdown_grace_s`, cancel what is left (it stays pending in state.db for the next
start), then close the store and exit 0. A channel that cannot start is reported
and the others keep running.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal

from agent.app import App, build_app, build_channels, start_scheduler
from agent.config import Settings
from agent.turns.runtime import ChannelRuntime

log = logging.getLogger(__name__)


async def serve(settings: Settings, *, stop: asyncio.Event | None = None) -> int:
    app = await build_app(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _connect_board(app)
        runtimes = await start_channels(app)
        # Everything loaded so far (LiteLLM's tables, the prompt, the libraries) lives as long
        # as the process: out of the collector's sight, full collections stay short.
        gc.freeze()
        if not runtimes:
            enabled = settings.channels.telegram.enabled or settings.channels.discord.enabled
            log.error(
                "no channel could start; see the errors above"
                if enabled
                else "no channel is enabled: set [channels.telegram] enabled = true (or "
                '[channels.discord]), or use `agent run -m "..."` for one message'
            )
            return 2
        scheduler = await start_scheduler(app, runtimes)  # schedules and the heartbeat
        await stop.wait()
        log.info("stopping: no new messages; letting running turns finish")
        if scheduler is not None:
            await scheduler.stop()
        await shutdown(runtimes, settings.agent.shutdown_grace_s)
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await app.close()


async def _connect_board(app: App) -> None:
    """With `connect_on_start`, a missing board is reported now, not at the first request."""
    if app.board is None or not app.settings.hardware.connect_on_start:
        return
    from tools.hardware import BoardError

    try:
        await app.board.connect()
        log.info("board connected on %s", app.settings.hardware.port)
    except BoardError as exc:
        log.warning("board not connected: %s", exc)


async def start_channels(app: App) -> list[ChannelRuntime]:
    runtimes: list[ChannelRuntime] = []
    for channel, access in build_channels(app):
        runtime = app.runtime(channel, access)
        try:
            await channel.start(runtime.submit)
        except Exception as exc:
            log.error("%s did not start: %s: %s", channel.name, type(exc).__name__, exc)
            await _quietly_stop(runtime)
            continue
        log.info("%s started", channel.name)
        await runtime.resume()  # what an earlier run left pending
        runtimes.append(runtime)
    return runtimes


async def shutdown(runtimes: list[ChannelRuntime], grace_s: float) -> None:
    for runtime in runtimes:
        await runtime.channel.stop_intake()
    await asyncio.gather(*(runtime.drain(grace_s) for runtime in runtimes))
    for runtime in runtimes:
        await _quietly_stop(runtime)


async def _quietly_stop(runtime: ChannelRuntime) -> None:
    try:
        await runtime.channel.stop()
    except Exception as exc:
        log.warning("%s did not stop cleanly: %s", runtime.channel.name, exc)
