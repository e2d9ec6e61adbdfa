"""`agent run -m` without a running daemon: one turn in this process, through the same runtime
path as every channel (the cli one); agent/cli/local_client.py hands it to the daemon instead.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn

from agent.app import build_app
from agent.config import Settings
from agent.runtime.one_shot import answer
from agent.turns.state import Access
from channels.terminal import TerminalChannel


async def run_once(settings: Settings, text: str, *, session: str | None = None) -> int:
    """Answer `text` in this process: reply on stdout, tool activity on stderr. Exit status."""
    channel = TerminalChannel()
    app = await build_app(settings)
    try:
        runtime = app.runtime(channel, Access(open_to_all=True))
        ended = await answer(
            runtime,
            app.scrub,
            text,
            session,
            terminal=channel,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    finally:
        if app.board is not None and app.board.finite_patterns:
            pins = ", ".join(map(str, app.board.finite_patterns))
            wait = f"at most {app.board.pattern_grace_s:g} s"
            print(f"waiting for the pattern on pin {pins} to end ({wait})", file=sys.stderr)
        await app.close()
    if ended.error is not None:
        print(f"error: {ended.error}", file=sys.stderr)
        return 1
    if ended.summary:
        print(ended.summary, file=sys.stderr)
    return 0


def leave(code: int) -> NoReturn:
    """Exit once the one-shot is done and everything is written (state.db closed, output
    flushed), without tearing down the interpreter: freeing LiteLLM's and the HTTP
    clients' objects one by one took 1.4–2 s after the reply was already printed."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
