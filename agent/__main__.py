"""`python -m agent`, and the installed `agent` and `pinclaw` commands' first step: a plain
one-shot goes to a running daemon before click is imported (`agent/cli/local_client.py`);
any other one-shot, or one no daemon takes, to a warm start process when one runs
(`agent/warm/client.py`); anything else — `--help`, no daemon and no warm start, a daemon
with other settings — goes to click in `agent/cli/main.py` unchanged."""

from __future__ import annotations

import sys


def main() -> None:
    from agent.cli.local_client import plain_one_shot, through_daemon

    args = sys.argv[1:]
    found = plain_one_shot(args)
    if found is not None:
        code = through_daemon(found.message, found.session, found.config, verbose=found.verbose > 0)
        if code is not None:
            sys.exit(code)
    if "run" in args:  # the warm start's client only for what may be a one-shot
        from agent.warm.client import hand_over, one_shot

        if one_shot(args):
            code = hand_over(args, daemon_tried=found is not None)
            if code is not None:
                sys.exit(code)
    from agent.cli.main import main as with_click

    with_click(daemon_tried=found is not None)


if __name__ == "__main__":
    main()
