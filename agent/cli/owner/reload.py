"""`agent reload`: the running daemon reads config.toml and agent.env again now, and says what
it applied, which channel it restarted, what waits for a restart, or why it kept the last good
settings (agent/daemon/reload.py). Thin like the one-shot client: click and the standard
library only.
"""

from __future__ import annotations

import os
import sys

import click

EXIT_NO_DAEMON = 2


@click.command()
def reload() -> None:
    """Apply edits of config.toml and agent.env to the running daemon now."""
    from agent.cli.local_client import call
    from agent.home import default_home

    code = call(default_home(os.environ), {"op": "reload"})
    if code is None:
        click.echo(
            "error: no pinclaw daemon runs for this home; `agent run` reads the settings when "
            "it starts (`agent doctor` checks them now)",
            err=True,
        )
        code = EXIT_NO_DAEMON
    sys.exit(code)
