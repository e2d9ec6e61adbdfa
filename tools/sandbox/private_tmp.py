"""The private temporary folder a Landlock-sandboxed command gets as TMPDIR.

Its runtime removes it when the command has been waited for. A runtime that is killed
(SIGKILL, the power cut) cannot, so each folder's name carries its runtime's pid, and the
next sandbox chosen on the machine removes the folders whose runtime is gone: on a Pi that
runs for months, /tmp does not fill with what killed daemons' commands left.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "pinclaw-sandbox-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")


def make_private_tmp() -> Path:
    """A new folder only this user can enter, named after this process."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def sweep_dead_runtimes_tmp() -> list[str]:
    """Remove this user's folders left by runtimes no longer running; their names."""
    swept = []
    folder = tempfile.gettempdir()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        found = _NAME.match(name)
        if found is None or _running(int(found.group(1))):
            continue
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)  # a symlink of that name is not ours to follow
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)
            swept.append(name)
    return swept


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds that pid now
        return True
    return True
