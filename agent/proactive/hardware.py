"""The boards as a runtime holds them: every configured board behind one Keeper, with the
log and deadlines in state.db, the tools that drive and describe them, and the way the
daemon tells a chat what pinclaw did by itself (an output switched off at its max_on_s).

`[hardware]` is the board named "board", `[boards.NAME]` are more (tools/config.py); with
none enabled there is no Keeper and no hardware tool. Each board connects on first use,
except that the daemon starts them: it reconnects them in the background, sets their safe
states and arms the deadlines a previous run left (`start_boards`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agent.config import Settings
from agent.durable.file.state_db import StateDB
from agent.durable.store import Claims
from agent.proactive.schedule_book import owner_chat
from agent.runtime.enqueue import Enqueue
from channels.base import ChatRef, Reply
from tools.base import Tool
from tools.config import Autonomy, configured_boards
from tools.proactive.watch_tools import WatchBook, WatchDefaults, WatchTools

if TYPE_CHECKING:  # the board modules load only where a board is configured
    from tools.board.oversight.keeper import Keeper
    from tools.board.oversight.on_limits import Tell as BoardTell
    from tools.board.oversight.records import HardwareRecords

log = logging.getLogger(__name__)


def make_boards(
    settings: Settings, records: HardwareRecords | None = None, *, claims: Claims | None = None
) -> Keeper | None:
    """Every enabled board, when there is one; each connects on first use, not here.
    Closing them lets finite patterns end within the tool timeout. `claims`: the store's;
    when processes share it, a board on a serial device of this machine is refused
    (StateDBUnusable) and each board is driven by the one process holding its claim."""
    configured = configured_boards(settings.hardware, settings.boards)
    if not configured:
        return None
    shared = claims is not None and claims.shared
    if shared:
        from agent.durable.postgres.pg_state import shown_url
        from agent.durable.postgres.shared_home import check_boards

        where = shown_url(settings.state_url or "")
        check_boards(((name, board.port) for name, board in configured.items()), where)
    from tools.board.board import Board
    from tools.board.fleet import Boards
    from tools.board.oversight.keeper import Keeper

    grace_s = settings.agent.tool_timeout_s
    boards = {
        name: Board(board, pattern_grace_s=grace_s, name=name) for name, board in configured.items()
    }
    if claims is not None and claims.shared:
        for name, board in boards.items():
            board.claim = functools.partial(claims.take, "role", f"board:{name}")
    return Keeper(Boards(boards), records)


def board_tools(
    settings: Settings,
    keeper: Keeper,
    autonomy: Autonomy,
    watches: WatchBook | None,
    timezone: str,
    scrub: Callable[[str], str],
) -> list[Tool]:
    """The hardware tools, the log and chart tools, and (with `[watches]`) the pin-watch
    tools, whose book is `watches`."""
    from tools.board.board_tools import hardware_tools
    from tools.board.oversight.log_tools import LogTools

    tools = hardware_tools(keeper, autonomy=autonomy)
    tools += LogTools(keeper, timezone).tools()
    if settings.watches.enabled:
        defaults = WatchDefaults(settings.watches.min_interval_s, settings.watches.hysteresis)
        names = keeper.boards.names
        tools += WatchTools(watches, names, timezone, defaults, scrub=scrub).tools()
    return tools


def board_teller(
    settings: Callable[[], Settings], db: StateDB, runtimes: Mapping[str, Enqueue]
) -> BoardTell:
    """How pinclaw tells what it did to a board by itself (a max_on_s switching a pump off):
    to the chat whose tool set it; when that was a one-shot (the cli channel: nobody reads
    it afterwards) or its channel is not running, to the owner's private chat instead.
    Through that chat's outbox, like any reply: written once, sent once, also when the
    daemon is killed and started again meanwhile. `runtimes`: the channels as they run."""

    async def tell(chat_key: str, text: str) -> None:
        chat = ChatRef.parse(chat_key) if chat_key else None
        runtime = runtimes.get(chat.channel) if chat is not None else None
        if chat is None or runtime is None:
            owner = await owner_chat(settings(), db, runtimes.keys())
            if owner is None:
                log.warning(
                    "not told (%s is not a running chat, and no private chat of the owner is "
                    "known on a running channel): %s",
                    chat_key or "no chat",
                    text,
                )
                return
            chat, runtime = owner.chat, runtimes[owner.chat.channel]
        await runtime.queue_reply(chat, Reply(text))

    return tell


async def start_boards(
    keeper: Keeper,
    runtimes: Mapping[str, Enqueue],
    settings: Callable[[], Settings],
    db: StateDB,
) -> None:
    """The daemon holds the boards: chats hear what pinclaw switched off by itself, boards
    with safe states or deadlines connect now (in the background, retried with backoff),
    and the deadlines a previous run left are armed."""
    tell = board_teller(settings, db, runtimes)
    keeper.tell = tell
    armed = await keeper.start()
    if armed:
        log.info("%d max_on_s deadline(s) from before the restart armed", armed)
