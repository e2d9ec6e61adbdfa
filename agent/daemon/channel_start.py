"""One chat channel started with its runtime, or stopped with nothing lost: at `agent run`'s
start (agent/daemon/serve.py) and when a reload restarts that channel alone
(agent/daemon/reload.py).

Stopping takes the channel's intake first, lets its running turns and sending finish within
the grace, then closes the adapter; what is unfinished stays in state.db (pending inbox rows,
unsent outbox parts), which the next runtime of the channel resumes when it starts.
"""

from __future__ import annotations

import logging

from agent.app import App
from agent.daemon.status import say
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.owner.budget import Tell
from agent.runtime.turn_setup import Access
from channels.base import Channel

log = logging.getLogger(__name__)


async def start_channel(
    app: App, channel: Channel, access: Access, tell: Tell | None = None
) -> ChannelRuntime | None:
    """The channel taking messages into its runtime, and what an earlier run (or runtime)
    left pending resumed; None when it could not start (said in the log). `tell`: how the
    budget's notices reach the owner."""
    runtime = app.runtime(channel, access)
    runtime.controls.budget.tell = tell
    try:
        await channel.start(runtime.intake.submit, runtime.is_allowed_sender)
    except Exception as exc:
        log.error("%s did not start: %s: %s", channel.name, type(exc).__name__, exc)
        await stop_quietly(runtime)
        return None
    log.info("%s started", channel.name)  # with -v (tests wait for it), beside the line
    account = channel.account
    say(f"{channel.name} connected as {account}" if account else f"{channel.name} started")
    await runtime.resume()  # what an earlier run left pending
    return runtime


async def stop_channel(runtime: ChannelRuntime, grace_s: float) -> None:
    """No new messages; running turns and sending get `grace_s`; then the adapter stops."""
    await runtime.channel.stop_intake()
    await runtime.drain(grace_s)
    await stop_quietly(runtime)


async def stop_quietly(runtime: ChannelRuntime) -> None:
    try:
        await runtime.channel.stop()
    except Exception as exc:
        log.warning("%s did not stop cleanly: %s", runtime.channel.name, exc)
