"""Where pinclaw's files are: the home folder, the config file, the local daemon's socket.

Standard library only: the one-shot client finds the daemon with these rules without paying
for pydantic, and `agent/config.py` uses the same ones, so the two never disagree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "PINCLAW_"
SOCKET_NAME = "agent.sock"  # the local daemon's socket, in the home folder
LOCK_NAME = "agent.lock"  # held (flock) by the running daemon; holds its pid
ENV_FILE_NAME = "agent.env"  # NAME=value lines the service reads (its keys and settings)
# Variables that pick the files rather than set a key: compared as paths, not as settings.
_FILE_PICKERS = (f"{ENV_PREFIX}HOME", f"{ENV_PREFIX}CONFIG")
# The last part of every secret setting's variable (a test keeps it in step with Settings):
# credentials, not behaviour, so a shell without the bot's token still reaches the daemon.
SECRET_ENDINGS = ("API_KEY", "BOT_TOKEN")


def default_home(environ: Mapping[str, str]) -> Path:
    """$PINCLAW_HOME, else ~/.pinclaw."""
    return Path(environ.get(f"{ENV_PREFIX}HOME") or "~/.pinclaw").expanduser()


def find_config_file(explicit: Path | None, environ: Mapping[str, str]) -> Path:
    """--config, else PINCLAW_CONFIG, else <home>/config.toml."""
    if explicit is not None:
        return explicit.expanduser()
    from_env = environ.get(f"{ENV_PREFIX}CONFIG")
    if from_env:
        return Path(from_env).expanduser()
    return default_home(environ) / "config.toml"


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def settings_fingerprint(config_file: Path | None, environ: Mapping[str, str]) -> str:
    """What a process's settings are read from: the config file (path, size, mtime) and the
    PINCLAW_ variables, secrets left out. The daemon answers a one-shot only when the
    one-shot's fingerprint equals its own, so it never answers with a model or workspace the
    caller did not ask for (an edited config file differs too, until the daemon restarts)."""
    config = None
    if config_file is not None and config_file.exists():
        stat = config_file.stat()
        config = [str(config_file.resolve()), stat.st_size, stat.st_mtime_ns]
    settings = {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(ENV_PREFIX)
        and name not in _FILE_PICKERS
        and name.rsplit("__", 1)[-1] not in SECRET_ENDINGS
    }
    # Plain text, not a hash (hashlib's import costs a one-shot more than the comparison):
    # it travels only over the owner's 0600 socket, and secrets are not in it.
    return json.dumps([config, settings])
