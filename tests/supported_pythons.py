"""The CPythons pinclaw supports, and where this machine has each one. The oldest case is the
one a Raspberry Pi has: Debian 12's python3 (3.11.2), whose venv brings pip 23.0.1 (before pip
24 a hashed install refused a dependency's extra unless the lock named it). The newcomer
walk-through installs with that one; tests/test_install_pythons.py with the newest (3.12,
between them, has every locked package's wheel checked by .ci/run)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Supported:
    minor: str
    oldest_pip: bool  # the case must run with a pip older than 24 (Debian's 23.0.1)


OLDEST = Supported("3.11", oldest_pip=True)
NEWEST = Supported("3.13", oldest_pip=False)


def interpreter(supported: Supported) -> Path:
    """`find(supported)`; missing, the test is skipped, or fails when PINCLAW_PYTHONS=require
    (as .ci/run sets)."""
    found = find(supported)
    if found is not None:
        return found
    message = f"no CPython {supported.minor} on this machine"
    if os.environ.get("PINCLAW_PYTHONS") == "require":
        pytest.fail(message + " (PINCLAW_PYTHONS=require)")
    pytest.skip(message)


def find(supported: Supported) -> Path | None:
    """A CPython `supported.minor` on this machine: the system's first (Debian's, as on a Pi),
    else the newest of pyenv's."""
    minor = supported.minor
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [Path(f"/usr/bin/python{minor}")]
    candidates += sorted(pyenv.glob(f"{minor}.*/bin/python{minor}"), key=_patch, reverse=True)
    for candidate in candidates:
        if candidate.exists() and version_of(candidate) == minor:
            return candidate
    return None


def as_python3(python: Path, folder: Path) -> str:
    """A folder holding `python3` -> `python`, to put first on PATH: `python3` in README's
    command is then the interpreter under test."""
    folder.mkdir()
    (folder / "python3").symlink_to(python)
    return str(folder)


def check_pip(venv_bin: Path, supported: Supported) -> str:
    """The venv's Python is `supported`'s, and its pip the oldest when the case asks for it;
    the pip's version line."""
    assert version_of(venv_bin / "python") == supported.minor
    pip = subprocess.run([venv_bin / "pip", "--version"], capture_output=True, text=True).stdout
    if supported.oldest_pip:
        assert re.match(r"pip 2[0-3]\.", pip), f"not the oldest pip: {pip}"
    return pip.split(" from ")[0]


def _patch(path: Path) -> int:
    found = re.search(r"\d+\.\d+\.(\d+)", str(path))
    return int(found[1]) if found else -1


def version_of(python: Path) -> str:
    done = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()
