"""What several processes on one PostgreSQL store must share besides it, checked at start so
that a process set up apart fails loudly instead of quietly diverging.

The workspace: its files (SOUL.md, MEMORY.md, what the tools wrote) are read and written by
whichever process answers a chat, so every process must see the same folder — a shared disk
mounted at each machine. The first process marks the workspace with `.pinclaw-store` (a token
also kept in `pinclaw_meta`); a process whose workspace carries no mark, or another one, is
refused with one line. The mark is made with O_EXCL, so processes starting together on the
same shared folder agree on one.

The boards: a turn runs wherever a chat's claim lands, so a board must be reachable from
every machine: a network port (rfc2217://, socket://), not a serial device of one machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from agent.durable.file.state_db import StateDB, StateDBUnusable, Transaction

MARK = ".pinclaw-store"
STORE = "PostgreSQL state"
ADVICE = "docs/several-processes.md says what the processes must share"


async def check_workspace(db: StateDB, workspace: Path, where: str) -> None:
    """StateDBUnusable unless `workspace` is the folder the store's other processes use."""
    mine = _mark(workspace)

    def agree(conn: Transaction) -> str:
        conn.execute(
            "INSERT INTO pinclaw_meta VALUES ('workspace', ?) ON CONFLICT DO NOTHING", (mine,)
        )
        row = conn.execute("SELECT value FROM pinclaw_meta WHERE key = 'workspace'").fetchone()
        return str(row[0])

    shared = await db.write(agree)
    if shared != mine:
        raise StateDBUnusable(
            where,
            f"the workspace {workspace} is not the one the other processes on this store use "
            f"(its {MARK} mark differs)",
            f"put the workspace on a folder every process shares and point [workspace] path at "
            f"it; {ADVICE}",
            store=STORE,
        )


def check_boards(ports: Iterable[tuple[str, str]], where: str) -> None:
    """StateDBUnusable for a board on a serial device: another machine's turn cannot reach it."""
    local = [f"{name} ({port})" for name, port in ports if "://" not in port]
    if local:
        raise StateDBUnusable(
            where,
            f"board {', '.join(local)} is a serial device of this machine, and any process "
            "sharing the store may run a turn",
            f'serve it over the network (ser2net) and set port = "rfc2217://host:port"; {ADVICE}',
            store=STORE,
        )


def _mark(workspace: Path) -> str:
    """The workspace's token: read, or made now (exclusively) when it has none."""
    path = workspace / MARK
    token = secrets.token_hex(16)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        return token
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as handle:
        return handle.read().strip()
