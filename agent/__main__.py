"""`python -m agent`, and the installed `agent` and `pinclaw` commands' first step: a plain
one-shot goes to a running daemon before click is imported (`agent/cli/local_client.py`);
anything else — `--help`, `--no-daemon`, a message from standard input, no daemon, a daemon
with other settings — goes to click in `agent/cli/main.py` unchanged."""

from __future__ import annotations

import sys


def main() -> None:
    from agent.cli.local_client import plain_one_shot, through_daemon

    found = plain_one_shot(sys.argv[1:])
    if found is not None:
        code = through_daemon(found.message, found.session, found.config, verbose=found.verbose > 0)
        if code is not None:
            sys.exit(code)
    from agent.cli.main import main as with_click

    with_click(daemon_tried=found is not None)


if __name__ == "__main__":
    main()
