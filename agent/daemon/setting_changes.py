"""What a newly read Settings changes in the running daemon: each changed key is applied live,
restarts one chat channel, or waits for a full restart (agent/daemon/reload.py applies it).

The rule of thumb: what is read per turn or per message, or built again cheaply between
turns (the model client, the prompt, the tools, the books, the scheduler), is live. What a
channel adapter took when it was made (its token, its platform options) restarts that channel
alone. What the process was built around (the home and workspace, the OS sandbox and the
security policy, the memory store, the turn slots, the backups' task) needs `agent run` again;
until then the running value is kept, so nothing runs half on the old and half on the new.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from agent.config import Settings
from channels.registry import channel_names

# Keys a running daemon cannot take; each covers the keys under it.
FULL_RESTART = (
    "workspace.path",
    "security",
    "memory.enabled",
    "memory.embedding_model",
    "state",
    "agent.max_concurrent_turns",
    "http",  # the server's address and limits
    "agent.max_jobs",
    "agent.sub_agents",
)
# Read per question, per delivery, under FULL_RESTART's
LIVE_INSIDE = ("security.approval_timeout_s", "http.hooks")
CHANNEL_LIVE = ("allowed_users", "pairing")  # a channel's keys its runtime reads as it goes
EVERY_CHANNEL = ("channels.download_timeout_s", "channels.delivery")  # taken at a start

M = TypeVar("M", bound=BaseModel)


def changed_keys(old: BaseModel, new: BaseModel, prefix: str = "") -> Iterator[str]:
    """The dotted keys whose values differ: down to the leaves of the sections, and to each
    entry of a table such as `[people.NAME]` or `[boards.NAME]`, and into each channel's
    section (`[channels.NAME]`, kept beside the model's own fields)."""
    for name in [*type(old).model_fields, *(old.model_extra or {})]:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        key = prefix + name
        if isinstance(before, BaseModel) and type(before) is type(after):
            yield from changed_keys(before, after, f"{key}.")
        elif isinstance(before, dict) and isinstance(after, dict):
            names = sorted({*before, *after}, key=str)
            yield from (f"{key}.{n}" for n in names if before.get(n) != after.get(n))
        else:
            yield key


def _under(key: str, prefixes: Iterable[str]) -> bool:
    return any(key == p or key.startswith(f"{p}.") for p in prefixes)


def needs_restart(key: str) -> bool:
    return _under(key, FULL_RESTART) and not _under(key, LIVE_INSIDE)


def channels_restarted(key: str) -> tuple[str, ...]:
    """The chat channels a changed key restarts (none: it is live, or not a channel's)."""
    if _under(key, EVERY_CHANNEL):
        return tuple(channel_names())
    parts = key.split(".")
    if len(parts) >= 3 and parts[0] == "channels" and parts[1] in channel_names():
        return () if parts[2] in CHANNEL_LIVE else (parts[1],)
    return ()


@dataclass(frozen=True)
class SettingChanges:
    """A new Settings against the running one: `settings` is the new one with the keys that
    need a restart kept at their running values (what the daemon runs with from now on)."""

    settings: Settings
    live: tuple[str, ...]  # applied between turns
    channels: dict[str, tuple[str, ...]]  # channel -> the changed keys that restart it
    restart: tuple[str, ...]  # kept as they run until `agent run` starts again

    @classmethod
    def between(cls, running: Settings, read: Settings) -> SettingChanges:
        keys = list(changed_keys(running, read))
        restart = tuple(key for key in keys if needs_restart(key))
        channels: dict[str, tuple[str, ...]] = {}
        for key in keys:
            for name in channels_restarted(key):
                channels[name] = (*channels.get(name, ()), key)
        live = tuple(k for k in keys if k not in restart and not channels_restarted(k))
        return cls(kept(read, running, restart), live, channels, restart)

    @property
    def applied(self) -> bool:
        """Something changes in the running daemon."""
        return bool(self.live or self.channels)

    def touches(self, *prefixes: str) -> bool:
        """A live key under one of `prefixes` changed."""
        return any(_under(key, prefixes) for key in self.live)

    def lines(self, channels: list[str]) -> list[str]:
        """What was done, a line each (keys named, never values); `channels`: the lines of
        the channels' restarts."""
        found = [f"applied: {', '.join(self.live)}"] if self.live else []
        return found + channels + ([restart_line(self.restart)] if self.restart else [])


def restart_line(keys: Iterable[str]) -> str:
    return f"restart pinclaw for: {', '.join(keys)}"


def kept(new: M, running: M, keys: Iterable[str]) -> M:
    """`new` with each of `keys` (dotted, through sections) at its value in `running`."""
    by_head: dict[str, list[str]] = {}
    for key in keys:
        head, _, rest = key.partition(".")
        by_head.setdefault(head, []).append(rest)
    update: dict[str, Any] = {}
    for head, rests in by_head.items():
        before, after = getattr(running, head), getattr(new, head)
        whole = "" in rests or not isinstance(after, BaseModel)
        update[head] = before if whole else kept(after, before, rests)
    return new.model_copy(update=update)
