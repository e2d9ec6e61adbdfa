"""Where a warm start process listens, and which one-shots it may answer.

One per user, installation and start environment: its files' names carry a checksum of this
Python (its environment and binary), pinclaw's folder and the variables modules read as they
are imported (PYTHON*, LANG, LC_*, LITELLM_*, TMPDIR; never a key, token or password), so a
one-shot started with other values gets a warm start of its own. The folder is
$XDG_RUNTIME_DIR/pinclaw, else $TMPDIR/pinclaw-<uid> (/tmp), made 0700 and used only while it
is a real folder of this user with no access for others.

Standard library only, and at import only what Python has loaded by then: the thin client
reads it before anything else.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_START_PREFIXES = ("PYTHON", "LC_", "LITELLM_")
_START_NAMES = ("LANG", "TMPDIR")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
# Set by pinclaw itself wherever LiteLLM is imported (IMPORT_ENV in
# agent/model/profiles/litellm_import.py):
# a one-shot that imported it must find the warm start its shell's variables name.
_OURS = ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_MODE")
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # agent/
OFF = "PINCLAW_AGENT__WARM_START_S"  # "0": no warm start is used or started


def start_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables read at import time, which a warm start and its one-shots share."""
    return {
        name: value
        for name, value in environ.items()
        if (name in _START_NAMES or name.startswith(_START_PREFIXES))
        and name not in _OURS
        and not any(word in name.upper() for word in _SECRET_WORDS)
    }


def folder(environ: Mapping[str, str]) -> str | None:
    """The warm starts' folder, made if missing; None when it is not this user's alone."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        path = os.path.join(runtime, "pinclaw")
    else:
        path = os.path.join(environ.get("TMPDIR") or "/tmp", f"pinclaw-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        found = os.lstat(path)
    except OSError:
        return None
    mine = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
    return path if mine and not found.st_mode & 0o077 else None


def name(environ: Mapping[str, str]) -> str:
    """The file name (without suffix) of the warm start for this installation and `environ`."""
    shared = sorted(start_env(environ).items())
    python = (sys.prefix, os.path.realpath(sys.executable))  # `python`, `python3`: the same
    checksum = zlib.crc32(repr((python, PACKAGE_DIR, shared)).encode())
    return f"warm-{checksum:08x}"


def paths(environ: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The socket, the token file and the lock file (holding the pid) of the warm start for
    `environ`; None when there is no folder for them or warm starts are off."""
    if environ.get(OFF, "").strip() in ("0", "0.0"):
        return None
    where = folder(environ)
    if where is None:
        return None
    base = os.path.join(where, name(environ))
    return f"{base}.sock", f"{base}.token", f"{base}.lock"
