"""Guard: the tests exercise this checkout, not a copy installed in site-packages."""

from pathlib import Path

import agent
import channels
import tools

REPO = Path(__file__).resolve().parent.parent


def test_packages_come_from_the_repo() -> None:
    for package in (agent, channels, tools):
        assert Path(package.__file__).resolve().parent.parent == REPO, package.__file__
