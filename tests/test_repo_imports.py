"""Guard: the tests exercise this checkout, not a copy installed in site-packages."""

from pathlib import Path

import agent
import channels
import tools

REPO = Path(__file__).resolve().parent.parent


def test_packages_come_from_the_repo() -> None:
    for package in (agent, channels, tools):
        assert Path(package.__file__).resolve().parent.parent == REPO, package.__file__


def test_only_loopback_sockets_are_allowed(pytestconfig: object) -> None:
    """pytest-socket is on and allows loopback only (no test may reach the network)."""
    allowed = pytestconfig.getoption("allow_hosts")  # type: ignore[attr-defined]
    assert sorted(allowed.split(",")) == ["127.0.0.1", "::1"]
