"""The `agent` command's first step: a plain one-shot goes to a running daemon before click.

`agent run -m "…"` while a daemon runs is the path people time: Python's own start, the
standard library this module and `agent/cli/local_client.py` need, and the daemon's answer.
Click, the command table and the channel registry cost more than the rest of it together,
so a command line that is only global options, `run`, `-m`/`--message` and `--session` is
read here by hand and handed over. Anything else — `--help`, `--no-daemon`, a message from
standard input, no daemon, a daemon with other settings — goes to click in
`agent/cli/main.py` unchanged, which hands a one-shot to the daemon the same way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NamedTuple


class PlainOneShot(NamedTuple):
    """What a command line of only a one-shot's options asks for (a NamedTuple: dataclasses
    would import `inspect`, a tenth of this path's start)."""

    message: str
    session: str | None = None
    config: Path | None = None
    verbose: int = 0


def plain_one_shot(args: list[str]) -> PlainOneShot | None:
    """The one-shot `args` ask for, or None when click must read them (anything unusual)."""
    config: Path | None = None
    verbose = quiet = 0
    rest = list(args)
    while rest and rest[0] != "run":
        arg = rest.pop(0)
        if arg in ("-q", "--quiet"):
            quiet += 1
        elif arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            verbose += 1 if arg == "--verbose" else len(arg) - 1
        elif arg == "--config" and rest:
            config = Path(rest.pop(0))
        elif arg.startswith("--config="):
            config = Path(arg.partition("=")[2])
        else:
            return None
    if not rest or (quiet and verbose):
        return None
    options = _run_options(rest[1:])
    if options is None or not options.get("message", "").strip() or options["message"] == "-":
        return None
    return PlainOneShot(options["message"], options.get("session"), config, verbose)


def _run_options(args: list[str]) -> dict[str, str] | None:
    """`-m`/`--message` and `--session` with their values, each once; None for anything else."""
    names = {"-m": "message", "--message": "message", "--session": "session"}
    found: dict[str, str] = {}
    while args:
        arg = args.pop(0)
        name, equals, value = arg.partition("=")
        if arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            name, equals, value = "-m", "=", arg[2:]
        if name not in names or names[name] in found:
            return None
        if not equals:
            if not args:
                return None
            value = args.pop(0)
        found[names[name]] = value
    return found


def through_daemon(
    message: str, session: str | None, config: Path | None, *, verbose: bool
) -> int | None:
    """The one-shot answered by the local daemon (its exit status), or None when none takes
    it: no daemon, another user's, other settings, or a named config file that is missing
    (loading the settings reports that)."""
    from agent.cli.local_client import run_one_shot
    from agent.home import ENV_PREFIX, default_home, find_config_file, settings_fingerprint

    env = os.environ
    config_file = find_config_file(config, env)
    named = config is not None or bool(env.get(f"{ENV_PREFIX}CONFIG"))
    if named and not config_file.exists():
        return None
    fingerprint = settings_fingerprint(config_file, env)
    return run_one_shot(default_home(env), message, session, fingerprint, verbose=verbose)


def main() -> None:
    """The installed `agent` and `pinclaw` commands."""
    found = plain_one_shot(sys.argv[1:])
    if found is not None:
        code = through_daemon(found.message, found.session, found.config, verbose=found.verbose > 0)
        if code is not None:
            sys.exit(code)
    from agent.cli.main import main as with_click

    with_click(daemon_tried=found is not None)
