"""The programs the runtime runs itself around every command, outside the sandbox (bwrap,
setpriv, flock, prlimit): taken from the system's own folders, never found on the daemon's
PATH. That PATH often starts with a folder of the user's (~/.local/bin, where uv and pipx put
`agent`), which a command can write when the workspace holds it; a program planted there
would run unconfined, with the runtime's environment, at the next start.
"""

from __future__ import annotations

import shutil

SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"  # root's alone; where Debian's packages put them


def system_program(name: str) -> str | None:
    """`name`'s path in SYSTEM_PATH, or None."""
    return shutil.which(name, path=SYSTEM_PATH)
