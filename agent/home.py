"""Where pinclaw's files are: the home folder, the config file, the local daemon's socket;
and that they are the owner's alone.

Standard library only, and at import only what Python has loaded by then: the one-shot
client finds the daemon with these rules (on plain strings, `home_folder`, `config_file_path`)
without paying for pydantic or even pathlib, and `agent/config.py` uses the same ones, so the
two never disagree.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing's own costs the daemon's thin client more than its turn
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from pathlib import Path

ENV_PREFIX = "PINCLAW_"
SOCKET_NAME = "agent.sock"  # the local daemon's socket, in the home folder
LOCK_NAME = "agent.lock"  # held (flock) by the running daemon; holds its pid
ENV_FILE_NAME = "agent.env"  # NAME=value lines read at start (keys, settings): shell's win
STATE_DB_NAME = "state.db"  # every chat, memory and schedule
LOG_NAME = "agent.log"  # the service's stderr on macOS (launchd writes it)
CHAT_HISTORY_NAME = "chat_history"  # the lines typed at `agent chat` (up-arrow, next run)
LOGS_DIR = "logs"
# The home holds every chat, memory and key: no other user may read any of it. Folders are
# made 0700 and files 0600 when created; an older home's looser modes are tightened at start.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
PRIVATE_FILES = (
    "config.toml",
    STATE_DB_NAME,
    f"{STATE_DB_NAME}-wal",
    f"{STATE_DB_NAME}-shm",
    ENV_FILE_NAME,
    LOCK_NAME,
    LOG_NAME,
    CHAT_HISTORY_NAME,
)
# Variables that pick the files rather than set a key: compared as paths, not as settings.
_FILE_PICKERS = (f"{ENV_PREFIX}HOME", f"{ENV_PREFIX}CONFIG")
# How every secret setting's variable ends (a test keeps it in step with Settings):
# credentials, not behaviour, so a shell without the bot's token still reaches the daemon.
SECRET_ENDINGS = ("API_KEY", "BOT_TOKEN", "STATE__URL")


def home_folder(environ: Mapping[str, str]) -> str:
    """$PINCLAW_HOME, else ~/.pinclaw."""
    return os.path.expanduser(environ.get(f"{ENV_PREFIX}HOME") or "~/.pinclaw")


def default_home(environ: Mapping[str, str]) -> Path:
    """`home_folder` as a Path."""
    from pathlib import Path

    return Path(home_folder(environ))


def config_file_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str:
    """--config, else PINCLAW_CONFIG, else <home>/config.toml."""
    if explicit is not None:
        return os.path.expanduser(explicit)
    from_env = environ.get(f"{ENV_PREFIX}CONFIG")
    if from_env:
        return os.path.expanduser(from_env)
    return os.path.join(home_folder(environ), "config.toml")


def find_config_file(explicit: Path | None, environ: Mapping[str, str]) -> Path:
    """`config_file_path` as a Path."""
    from pathlib import Path

    return Path(config_file_path(explicit, environ))


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def settings_fingerprint(
    config_file: str | os.PathLike[str] | None, environ: Mapping[str, str]
) -> str:
    """What a process's settings are read from: the config file (path, size, mtime) and the
    PINCLAW_ variables, secrets left out. The daemon answers a one-shot only when the
    one-shot's fingerprint equals its own, so it never answers with a model or workspace the
    caller did not ask for (an edited config file differs too, until the daemon restarts)."""
    config = None
    if config_file is not None and os.path.exists(config_file):
        found = os.stat(config_file)
        config = [os.path.realpath(config_file), found.st_size, found.st_mtime_ns]
    # agent.env under the shell's variables, as `load_env_file` gives the daemon its own.
    merged = {**read_env_file(os.path.join(home_folder(environ), ENV_FILE_NAME)), **environ}
    settings = {
        name: value
        for name, value in sorted(merged.items())
        if name.startswith(ENV_PREFIX)
        and name not in _FILE_PICKERS
        and not name.endswith(SECRET_ENDINGS)
    }
    # Plain text, not a hash (hashlib's import costs a one-shot more than the comparison):
    # it travels only over the owner's 0600 socket, and secrets are not in it. Both sides
    # make it here, so repr (no import) is as good as JSON.
    return repr([config, settings])


def read_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The NAME=value lines of an agent.env, as systemd and `sh` read them: blank lines and
    `#` comments skipped, an `export ` prefix and one pair of surrounding quotes dropped;
    {} when there is no such file (or it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, equals, value = line.strip().removeprefix("export ").partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not (name.isascii() and name.isidentifier()):
            continue  # a comment, a blank line, or not a variable
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def load_env_file(home: Path, environ: MutableMapping[str, str]) -> list[str]:
    """Put `<home>/agent.env`'s variables into `environ` where it has none of that name (what
    the shell exports wins), so the key `agent init` stored there works without exporting
    it — for `agent run` and a one-shot as for the service. The names set."""
    added = []
    for name, value in read_env_file(home / ENV_FILE_NAME).items():
        if name not in environ:
            environ[name] = value
            added.append(name)
    if environ is os.environ:
        _TAKEN.setdefault(home, {}).update((name, environ[name]) for name in added)
    return added


# What this process's environment took from each home's agent.env (name: value), so that
# reading the file again tells a name it gave from one the shell exported.
_TAKEN: dict[Path, dict[str, str]] = {}
EnvBefore = dict[str, str | None]  # name: its value before a reload (None: it was unset)


def reload_env_file(home: Path) -> EnvBefore:
    """`<home>/agent.env` read again into this process's environment, for a running daemon:
    a name the file gave takes its new value (or is unset when the file dropped it), a new
    name is added, a name the shell exported stays the shell's. Returns what changed, to
    `restore_env` when the new settings are refused."""
    taken = _TAKEN.setdefault(home, {})
    now = {n: v for n, v in read_env_file(home / ENV_FILE_NAME).items() if n not in _FILE_PICKERS}
    before: EnvBefore = {}
    for name, value in list(taken.items()):
        if os.environ.get(name) != value:  # set since by someone else: no longer the file's
            del taken[name]
        elif name not in now:
            before[name] = os.environ.pop(name)
            del taken[name]
    for name, value in now.items():
        if name in taken or name not in os.environ:
            if os.environ.get(name) != value:
                before[name] = os.environ.get(name)
                os.environ[name] = value
            taken[name] = value
    return before


def restore_env(home: Path, before: EnvBefore) -> None:
    """Undo `reload_env_file`: each name back to its value before."""
    taken = _TAKEN.setdefault(home, {})
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
            taken.pop(name, None)
        else:
            os.environ[name] = value
            taken[name] = value


def create_private_file(path: Path, text: str = "") -> bool:
    """Create `path` 0600 from its first moment (no window open to others, never through a
    link) holding `text`; False when something is already there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def secure_home(home: Path, workspace: Path | None = None) -> str | None:
    """The one place the home's modes are made and fixed: the home is created 0700, and what
    an older version left open to other users (the home, its private files, the logs, the
    workspace folder when it lies inside the home) loses its group and other bits. Returns
    the one line that says what was tightened, None when nothing was."""
    home.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    real = home.resolve()  # a home that is a link: its target is the home
    # Made here, empty (SQLite takes that as a new database), so whichever connection opens
    # it first finds it 0600 — and SQLite gives its -wal and -shm the same mode. A home this
    # user may not write to is reported by whatever opens it next, not here.
    import contextlib

    with contextlib.suppress(OSError):
        create_private_file(real / STATE_DB_NAME)
    logs = real / LOGS_DIR
    paths = [real, logs, *(real / name for name in PRIVATE_FILES)]
    if _is_real_dir(logs):
        paths += sorted(logs.iterdir())
    if workspace is not None and real in workspace.resolve().parents:
        paths.append(workspace.resolve())  # its own files keep the modes programs give them
    loosened = {path: mode for path in paths if (mode := _tighten(path)) is not None}
    if not loosened:
        return None
    named = [
        f"{path.relative_to(real)} (was {mode:04o})"
        for path, mode in loosened.items()
        if path != real
    ]
    head = f"pinclaw: tightened the modes of {home}"
    if real in loosened:
        head += f" (was {loosened[real]:04o})"
    listed = f": {', '.join(named)}" if named else ""
    return f"{head}{listed}; now only its owner can read them"


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _tighten(path: Path) -> int | None:
    """Drop the group and other bits of a real file or folder (a link is left alone: its
    target is not the home's); its mode before, or None when there was nothing to drop."""
    try:
        found = path.lstat()
    except OSError:
        return None
    mode = stat.S_IMODE(found.st_mode)
    kind = stat.S_IFMT(found.st_mode)
    if kind not in (stat.S_IFREG, stat.S_IFDIR) or not mode & 0o077:
        return None
    try:
        os.chmod(path, mode & ~0o077)
    except OSError:
        return None  # not ours to change (another user's file); nothing to report
    return mode
