"""Changes without a restart: config.toml and agent.env read again while the daemon runs — when
either file changes (agent/daemon/config_watch.py), on SIGHUP, and on `agent reload` (the
socket's "reload" op) — checked, then applied between turns.

A reload reads agent.env into the environment again (a name the file gave takes its new
value; what the shell exported still wins), then the settings as `agent run` reads them, and
checks a changed model's route and key. Anything refused keeps the last good settings (and
environment): the problems go to the log, to whoever asked, and once per distinct problem to
the owner's private chat. Accepted settings are applied by what they change
(agent/daemon/setting_changes.py): live keys give every runtime a new generation of prompt,
tools and model between turns (agent/daemon/reloaded_app.py); a channel's own keys restart that
channel alone, its pending messages kept; keys that need `agent run` again are kept at their
running values and named in one line. The scheduler and the pin watcher start again with the
settings and channels as they now are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.app import App, build_channels, start_scheduler, start_watcher
from agent.config import ConfigError, Settings, load_settings, make_scrubber
from agent.daemon.channel_start import IntakeRoles, start_channel, stop_channel
from agent.daemon.config_watch import ConfigWatch
from agent.daemon.local_server import Connection, Request
from agent.daemon.one_shot_op import OneShots
from agent.daemon.reloaded_app import (
    BOARDS,
    SHARED_ONCE,
    close_shared,
    next_generation,
)
from agent.daemon.setting_changes import SettingChanges, restart_line
from agent.daemon.status import say
from agent.durable.schedules import Schedules
from agent.home import (
    ENV_FILE_NAME,
    ENV_PREFIX,
    find_config_file,
    reload_env_file,
    restore_env,
    settings_fingerprint,
)
from agent.model.keys import ModelUnusable, check_model
from agent.proactive.hardware import board_teller
from agent.proactive.pin_watcher import PinWatcher
from agent.proactive.scheduler import Scheduler
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.owner.budget import Tell
from agent.security import ScrubbingFilter
from tools.background import stop_tasks

if TYPE_CHECKING:  # the board modules load only where a board is configured
    from tools.board.oversight.on_limits import Tell as BoardTell

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reloaded:
    """What a reload did, a line each; or why nothing was applied."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def text(self) -> str:
        if self.problems:
            return "\n".join(["not applied; the last good settings stay:", *self.problems])
        return "\n".join(self.lines) or "nothing changed"


class Reloader:
    """The daemon's settings, read again on request. `runtimes`: the running chat channels by
    name (the same mapping the socket's ops and the owner's notices use); `tell`: a line to
    the owner's private chat."""

    def __init__(self, app: App, runtimes: dict[str, ChannelRuntime], tell: Tell) -> None:
        self.app = app
        self.runtimes = runtimes
        self.one_shots: OneShots | None = None  # the socket's runtime, set with its ops
        self.scheduler: Scheduler | None = None
        self.watcher: PinWatcher | None = None
        self.roles: IntakeRoles | None = None  # the channels' intake, when processes share
        self._tell = tell
        self._explicit = app.settings.config_file  # --config, PINCLAW_CONFIG or the default
        config = self._explicit or find_config_file(None, os.environ)
        self._watch = ConfigWatch([config, app.settings.home / ENV_FILE_NAME], self._on_file)
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Reloaded]] = set()
        self._told: set[str] = set()  # problems told the owner since settings were last good
        self._waiting = ""  # the keys waiting for a restart, as last told the owner
        self._running = asyncio.Event()  # everything started: a reload asked before waits
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._on_hup)

    # -- what starts it ------------------------------------------------------------------

    def start(self, scheduler: Scheduler | None, watcher: PinWatcher | None) -> None:
        """Watch the files, and reload on SIGHUP (taken since this was made), once
        everything runs."""
        self.scheduler, self.watcher = scheduler, watcher
        if self.app.boards is not None:
            self.app.boards.tell = self._board_teller()  # the channels as they run
        self._watch.start()
        self._running.set()

    async def stop(self) -> tuple[Scheduler | None, PinWatcher | None]:
        """No more reloads (one under way is cancelled); the scheduler and the watcher that
        run now, for the caller to stop."""
        self.close()
        await self._watch.stop()
        await stop_tasks(*self._tasks)
        return self.scheduler, self.watcher

    def close(self) -> None:
        """No SIGHUP taken, no reload waiting (also when the daemon did not start)."""
        with contextlib.suppress(RuntimeError):  # no loop any more: nothing to remove
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        for task in self._tasks:
            task.cancel()

    def _on_hup(self) -> None:
        log.info("SIGHUP: reading the settings again")
        self._spawn("SIGHUP")

    async def _on_file(self) -> None:
        await self.reload("a file changed")

    async def op(self, request: Request, conn: Connection) -> None:
        """The socket's "reload" op (`agent reload`): what changed, or the problems."""
        done = await self.reload("agent reload")
        if done.problems:
            conn.send({"event": "error", "message": done.text(), "code": 2})
        else:
            conn.send({"event": "done", "code": 0, "stderr": done.text()})

    async def reload(self, why: str) -> Reloaded:
        """Read and apply the settings (one reload at a time; a shutdown cancels it)."""
        return await asyncio.shield(self._spawn(why))

    def _spawn(self, why: str) -> asyncio.Task[Reloaded]:
        task = asyncio.create_task(self._locked(why), name="reload")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _locked(self, why: str) -> Reloaded:
        await self._running.wait()  # asked while the daemon starts: once it runs
        async with self._lock:
            self._watch.seen()
            try:
                done = await self._reload()
            except Exception as exc:  # what was applied stays; the rest waits for a restart
                log.exception("applying the settings failed")
                done = Reloaded(problems=[f"applying them failed: {type(exc).__name__}: {exc}"])
        for line in done.problems:
            log.error("settings not applied (%s): %s", why, line)
        if done.problems:
            await self._tell_once("Settings not applied; the last good ones stay:", done.problems)
        elif done.lines:
            say(f"settings read again ({why}): {'; '.join(done.lines)}")
        else:
            log.info("settings read again (%s): nothing changed", why)
        return done

    # -- reading and checking ------------------------------------------------------------

    async def _reload(self) -> Reloaded:
        app = self.app
        home = app.settings.home
        before = reload_env_file(home)
        try:
            read = load_settings(self._explicit)
            changes = SettingChanges.between(app.settings, read)
            if changes.touches("llm") or before:  # a key may have gone from agent.env
                check_model(changes.settings.llm, str(home / ENV_FILE_NAME))
        except (ConfigError, ModelUnusable) as exc:
            restore_env(home, before)
            return Reloaded(problems=exc.problems if isinstance(exc, ConfigError) else [str(exc)])
        self._told.clear()  # good settings: a problem made again is told again
        learn_secrets(app, changes.settings)
        lines = changes.lines(await self._apply(changes) if changes.applied else [])
        others = sorted(name for name in before if not name.startswith(ENV_PREFIX))
        if others:  # read where they are used (a provider's key: at its next call)
            lines.append(f"{ENV_FILE_NAME}: {', '.join(others)}")
        if changes.restart:
            line = restart_line(changes.restart)
            if line != self._waiting:
                self._waiting = line
                await self._say_to_owner(f"Saved settings wait for a restart: {line}")
        else:
            self._waiting = ""
            if self.one_shots is not None:  # one-shots with these settings are its again
                fingerprint = settings_fingerprint(app.settings.config_file, os.environ)
                self.one_shots.reloaded(fingerprint)
        return Reloaded(lines)

    async def _tell_once(self, head: str, lines: list[str]) -> None:
        """The owner's private chat hears each distinct problem once."""
        text = "\n".join([head, *lines])
        if text not in self._told:
            self._told.add(text)
            await self._say_to_owner(text)

    async def _say_to_owner(self, text: str) -> None:
        try:
            await self._tell(self.app.scrub(text))
        except Exception as exc:  # the log has said it already
            log.warning("the owner was not told: %s", exc)

    # -- applying ------------------------------------------------------------------------

    async def _apply(self, changes: SettingChanges) -> list[str]:
        """The new generation between turns, the channels that need it restarted, the
        scheduler and the watcher started again; the lines of the channels' restarts."""
        await self._stop_proactive()
        shared = changes.touches(*SHARED_ONCE)
        runtimes = [*self.runtimes.values()]
        if self.one_shots is not None:
            runtimes.append(self.one_shots.runtime)
        quiet = self.app.slots.quiet() if shared else contextlib.nullcontext()
        async with quiet:
            if shared:
                await close_shared(self.app, changes)
            await next_generation(self.app, changes, runtimes)
        lines = await self._restart_channels(changes)
        await self._start_proactive(new_boards=changes.touches(*BOARDS))
        return lines

    async def _restart_channels(self, changes: SettingChanges) -> list[str]:
        app, lines = self.app, []
        grace_s = app.settings.agent.shutdown_grace_s
        for name, keys in changes.channels.items():
            old = self.runtimes.pop(name, None)
            if old is not None:
                await stop_channel(old, grace_s, self.roles)
            if not getattr(app.settings.channels, name).enabled:
                lines.append(f"{name} stopped" if old is not None else f"{name}: off")
                continue
            started = None
            for channel, access in build_channels(app, only=(name,)):
                started = await start_channel(app, channel, access, self._tell, self.roles)
            if started is None:
                lines.append(f"{name} did not start (see the log)")
                continue
            self.runtimes[name] = started
            restarted = "restarted" if old is not None else "started"
            lines.append(f"{name} {restarted} for: {', '.join(keys)}")
        return lines

    async def _stop_proactive(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        if self.watcher is not None:
            await self.watcher.stop()
            self.watcher = None

    async def _start_proactive(self, *, new_boards: bool) -> None:
        app = self.app
        running = list(self.runtimes.values())
        self.scheduler = await start_scheduler(app, running)
        if new_boards:  # start_watcher starts the new boards too
            self.watcher = await start_watcher(app, running)
        elif app.boards is not None and app.settings.watches.enabled:
            boards = app.boards.boards
            self.watcher = PinWatcher(Schedules(app.store.db), self.runtimes, boards, app.settings)
            await self.watcher.start()
            if app.watches is not None:
                app.watches.live = self.watcher
        if app.boards is not None:
            app.boards.tell = self._board_teller()

    def _board_teller(self) -> BoardTell:
        """What pinclaw did to a board by itself, to the chat whose tool set it (or the
        owner's private chat): agent/proactive/hardware.py's one rule, over the channels
        as they run now."""
        return board_teller(lambda: self.app.settings, self.app.store.db, self.runtimes)


def learn_secrets(app: App, settings: Settings) -> None:
    """The secrets of `settings` and of the environment as it is now scrubbed too: from the
    tools' output, the replies and the log."""
    fresh = make_scrubber(settings)
    app.scrub.learn(fresh)
    for handler in logging.getLogger().handlers:
        for found in handler.filters:
            if isinstance(found, ScrubbingFilter):
                found.learn(fresh)
