"""`agent run` without -m: the local daemon and every enabled channel in one asyncio
process until a signal.

The local socket (`agent/daemon/local_server.py`) is served always, also with no channel
enabled: one-shots, `agent send`, schedules, pin watches and the board live in the warm
process. It starts before the channels, so a second `agent run` for the same home stops at
once (exit 2) instead of polling the same bots. SIGINT/SIGTERM stop intake (channels and
socket), let running turns, one-shots and sending finish for `agent.shutdown_grace_s`,
cancel what is left (a channel's message stays pending in state.db for the next start),
then close the store and exit 0. A channel that cannot start is reported and the others
keep running; when every enabled channel fails, the daemon exits 2. A state.db that cannot
be used stops it before anything starts, with one line (StateDBUnusable, said by main.py).
What it starts and its stop are said in a line each (`agent/daemon/status.py`). config.toml
and agent.env are read again while it runs: on a change, SIGHUP or `agent reload`
(agent/daemon/reload.py).

Beside the channels: a daily backup of state.db (`[state] backups_kept`,
agent/cli/stores/state.py; on PostgreSQL a snapshot of its rows in state.db's format) and,
when the disk fills, one message to the owner's private chat, sent directly (the outbox needs
disk), and one when space is back (agent/durable/file/storage_health.py). The budget's
notices (agent/runtime/owner/budget.py) reach the same chat through its outbox.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from agent import collector
from agent.app import App, build_app, build_channels, start_scheduler, start_watcher
from agent.config import Settings
from agent.daemon.channel_start import IntakeRoles, start_channel, stop_quietly
from agent.daemon.local_server import Handler, LocalServer
from agent.daemon.one_shot_op import OneShots, SocketChannel
from agent.daemon.reload import Reloader
from agent.daemon.send_op import SendOp
from agent.daemon.status import Proactive, board_line, lazy_board_line, say
from agent.daemon.warmup import keep_read_ahead, warm_up
from agent.durable.file.storage_health import Listener, StorageHealth
from agent.durable.schedules import Schedules
from agent.home import settings_fingerprint
from agent.http.service import HttpIn, start_http
from agent.proactive.schedule_book import owner_chat
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.owner.budget import Tell
from agent.runtime.turn_setup import Access
from channels.base import Reply

log = logging.getLogger(__name__)


async def serve(settings: Settings, *, stop: asyncio.Event | None = None) -> int:
    app = await build_app(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    chat_runtimes: dict[str, ChannelRuntime] = {}
    live = Reloader(app, chat_runtimes, budget_teller(app, chat_runtimes))  # agent reload
    live.roles = roles = IntakeRoles(app.store.claims)  # one process takes each bot's messages
    local = local_server(app, chat_runtimes, live)
    app.store.db.health.listen(tell_owner(app, chat_runtimes))  # the disk fills, or has room
    stopped, http = False, None
    try:
        await _listen(local)  # DaemonRunning: one line and exit 2, from agent/cli/main.py
        await _connect_board(app)
        for name, state in app.mcp.lines() if app.mcp is not None else ():
            say(f"MCP server {name}: {state}")
        runtimes = await start_channels(app, roles)
        chat_runtimes.update((runtime.channel.name, runtime) for runtime in runtimes)
        for runtime in runtimes:
            runtime.controls.budget.tell = budget_teller(app, chat_runtimes)
        enabled = bool(settings.channels.enabled())
        if enabled and not runtimes:
            log.error("no channel could start; see the errors above")
            return 2
        http = await start_http(app, chat_runtimes)  # [http]: webhooks into the chats' inboxes
        if http is not None:
            say(f"serving HTTP on {http.server.address}")
        # The first message should cost what later ones do: LiteLLM's call path is loaded
        # now, in a thread, while the channels already serve (and before the freeze below).
        await warm_up(settings.llm)
        reading = asyncio.create_task(keep_read_ahead(partial(_readers, live, chat_runtimes)))
        # Everything loaded so far (LiteLLM's tables, the prompt, the libraries) lives as long
        # as the process: out of the collector's sight, full collections stay short.
        collector.release()
        if not enabled:
            say("no chat channel is enabled")
        scheduler = await start_scheduler(app, runtimes)  # schedules and the heartbeat
        watcher = await start_watcher(app, runtimes)  # pin watches
        if scheduler is not None or watcher is not None:
            say((await proactive(app, runtimes, watching=watcher is not None)).line())
        backups = start_backups(settings, app.store.db.health)
        live.start(scheduler, watcher)  # config.toml and agent.env: the watch, SIGHUP
        await stop.wait()
        reading.cancel()
        log.info("stopping: no new messages; letting running turns finish")
        if backups is not None:
            backups.cancel()
        scheduler, watcher = await live.stop()  # those running now
        if scheduler is not None:
            await scheduler.stop()
        if watcher is not None:
            await watcher.stop()
        await roles.stop()
        grace_s = app.settings.agent.shutdown_grace_s
        await shutdown([*chat_runtimes.values()], grace_s, local, http, roles)
        stopped = True
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        live.close()
        if http is not None and not stopped:
            await http.server.stop()
        await local.close()
        await app.close(board_grace_s=app.settings.agent.shutdown_grace_s)
        if stopped:
            say("stopped")


def _readers(live: Reloader, chat_runtimes: Mapping[str, ChannelRuntime]) -> list[ChannelRuntime]:
    """The runtimes whose prompts a server of one's own reads ahead, as they are now (a
    reload may change them): the one-shots' first, the chats' last (a one-slot server keeps
    the last it read)."""
    one_shots = live.one_shots.runtime if live.one_shots is not None else None
    return [r for r in [one_shots, *chat_runtimes.values()] if r is not None]


def local_server(
    app: App, chat_runtimes: Mapping[str, ChannelRuntime], live: Reloader | None = None
) -> LocalServer:
    """The socket's ops: "run" answers one-shots on a runtime of the cli channel; "send"
    queues the owner's text in a chat of the channels that started (`chat_runtimes`,
    filled as they start); "reload" reads the settings again (`live`)."""
    fingerprint = settings_fingerprint(app.settings.config_file, os.environ)
    runtime = app.runtime(SocketChannel(), Access(open_to_all=True))
    runtime.controls.budget.tell = budget_teller(app, chat_runtimes)
    one_shots = OneShots(runtime, app.scrub, fingerprint)
    ops: dict[str, Handler] = {"run": one_shots.run, "send": SendOp(chat_runtimes, app.scrub)}
    if live is not None:
        live.one_shots = one_shots
        ops["reload"] = live.op
    return LocalServer(app.settings.home, ops, about=lambda: {"asking": app.slots.asking})


async def _listen(local: LocalServer) -> None:
    """Serve the socket (DaemonRunning when another daemon runs for this home). A socket that
    cannot be made (a home path too long for one) leaves one-shots cold, not the channels down."""
    try:
        await local.start()
    except OSError as exc:
        log.warning("no local socket at %s: %s; one-shots start cold", local.path, exc)
    else:
        say(f"serving one-shots on {local.path}")


async def _connect_board(app: App) -> None:
    """With `connect_on_start`, a missing board is reported now, not at the first request;
    a line for each board."""
    if app.boards is None:
        return
    from tools.board.board import BoardError

    for board in app.boards.boards:
        if not board.settings.connect_on_start:
            say(lazy_board_line(board.settings.port))
            continue
        try:
            await board.connect()
            info = await board.info()
        except BoardError as exc:
            log.warning("board %s not connected: %s", board.name, exc)
            continue
        say(board_line(info.port, info.model, info.firmware, info.firmware_version))


async def proactive(app: App, runtimes: list[ChannelRuntime], *, watching: bool) -> Proactive:
    """What the scheduler and the watcher took on, for the line `agent run` says of them
    (the rows of the channels that started; the heartbeat's own row counted apart)."""
    schedules = Schedules(app.store.db)
    channels = [runtime.channel.name for runtime in runtimes]
    active = await schedules.active(channels)
    heartbeat = any(row.kind == "heartbeat" for row in active)
    return Proactive(
        schedules=sum(row.kind in ("once", "cron") for row in active),
        watches=len(await schedules.watches(channels)) if watching else None,
        heartbeat_minutes=app.settings.heartbeat.interval_minutes if heartbeat else None,
    )


def tell_owner(app: App, by_name: Mapping[str, ChannelRuntime]) -> Listener:
    """A line to the owner's private chat on the first channel (of those started by then)
    where it is known, sent directly: no outbox row, the outbox is on the disk that is full."""

    async def tell(full: bool, text: str) -> None:
        owner = await owner_chat(app.settings, app.store.db, by_name.keys())
        if owner is None:
            return
        channel = by_name[owner.chat.channel].channel
        for part in channel.parts(Reply(text)):
            await channel.send_part(owner.chat, part)

    return tell


def budget_teller(app: App, by_name: Mapping[str, ChannelRuntime]) -> Tell:
    """The budget's notices, to the owner's private chat on the first channel (of those
    started by then) where it is known, through that chat's outbox like any reply."""

    async def tell(text: str) -> None:
        owner = await owner_chat(app.settings, app.store.db, by_name.keys())
        if owner is not None:
            await by_name[owner.chat.channel].queue_reply(owner.chat, Reply(text))

    return tell


def start_backups(settings: Settings, health: StorageHealth) -> asyncio.Task[None] | None:
    """The daily backup of state.db, unless `[state] backups_kept = 0`."""
    kept = settings.state.backups_kept
    if kept <= 0:
        return None
    backups = keep_backups(settings.state_db, kept, health, url=settings.state_url)
    return asyncio.create_task(backups, name="backups")


async def keep_backups(
    state_db: Path,
    kept: int,
    health: StorageHealth,
    *,
    first_after_s: float = 60.0,
    url: str | None = None,
) -> None:
    """Once a day (the first a minute after start, not to slow it): a backup, the oldest
    removed past `kept`. Not while the disk is full; a failure is said and tried in an hour.
    On PostgreSQL (`url`): a state.db-format snapshot of the server's rows, in the same place."""
    from agent.durable.file.backups import Backup, daily_backup, next_backup_in

    copy: Callable[[Path], Backup] | None = None
    if url is not None:
        from agent.durable.postgres.pg_copy import backup

        copy = partial(backup, url)

    await asyncio.sleep(first_after_s)
    while True:
        await asyncio.sleep(next_backup_in(state_db))
        await health.writable()
        try:
            made = await asyncio.to_thread(daily_backup, state_db, kept, copy)
        except Exception as exc:  # a full disk, a damaged copy: said, tried again later
            health.failed(exc)
            log.warning("state.db: the daily backup failed: %s", exc)
            await asyncio.sleep(3600)
            continue
        log.info("state.db backed up to %s (%d bytes)", made.path, made.size)


async def start_channels(app: App, roles: IntakeRoles | None = None) -> list[ChannelRuntime]:
    runtimes: list[ChannelRuntime] = []
    for channel, access in build_channels(app):
        runtime = await start_channel(app, channel, access, roles=roles)
        if runtime is not None:
            runtimes.append(runtime)
    return runtimes


async def shutdown(
    runtimes: list[ChannelRuntime],
    grace_s: float,
    local: LocalServer | None = None,
    http: HttpIn | None = None,
    roles: IntakeRoles | None = None,
) -> None:
    if http is not None:  # no new requests; its silent turns drain with the channels
        await http.server.stop()
        runtimes = [*runtimes, *http.runtimes]
    for runtime in runtimes:
        await runtime.channel.stop_intake()
    if local is not None:
        local.stop_intake()
    await asyncio.gather(
        *(runtime.drain(grace_s) for runtime in runtimes),
        *([local.drain(grace_s)] if local is not None else []),
    )
    for runtime in runtimes:
        await stop_quietly(runtime, roles)
