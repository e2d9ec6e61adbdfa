"""The command to print in "run this next" lines: `agent` when that is what the shell
finds, else the path this program was started by, such as `.venv/bin/agent` before the
virtual environment is activated, so a line copied from the screen works as it is."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

_NAMES = ("agent", "pinclaw")


def command_name() -> str:
    started = Path(sys.argv[0])
    if started.name not in _NAMES:  # python -m agent, or a test harness
        return "agent"
    found = shutil.which("agent")  # the same install's (also when started as `pinclaw`)
    if found is not None and Path(found).resolve().parent == started.resolve().parent:
        return "agent"
    try:
        shown = os.path.relpath(started)
    except ValueError:
        return str(started)
    return shown if not shown.startswith("..") else str(started.absolute())


def with_command(line: str) -> str:
    """`line` ("agent chat …") with its leading `agent` as this shell would need it."""
    return command_name() + line.removeprefix("agent") if line.startswith("agent") else line
