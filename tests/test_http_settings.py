"""`[http]` as the owner writes it: what is refused, and when the server warns at start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, env_of, wait_until

from agent.config import ConfigError, load_settings
from agent.http.config import HttpSettings
from agent.http.payloads import at_path, render, unmatched
from agent.http.server import exposure_warning


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ('[http.hooks."a b"]', "http.hooks: Value error, 'a b': a hook's name is letters"),
        ('[http.hooks.gh]\nmatch = { ref = "x" }', "'ref': a JSON path starts with $"),
        ('[http.hooks.gh]\nsecret_env = "GH_HOOK"', "name it with SECRET, KEY or TOKEN"),
        ('[http.hooks.gh]\nscheme = "gitlab"', "http.hooks.gh.scheme: Input should be"),
        ("[http]\nport = 70000", "http.port: Input should be less than or equal to 65535"),
    ],
)
def test_a_bad_http_section_is_one_line(
    home: Path, tmp_path: Path, toml: str, problem: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(toml + "\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    ("host", "proxy", "warned"),
    [
        ("127.0.0.1", "", False),
        ("localhost", "", False),
        ("::1", "", False),
        ("0.0.0.0", "", True),
        ("192.168.1.5", "", True),
        ("0.0.0.0", "caddy", False),
    ],
)
def test_a_public_address_without_a_proxy_is_warned_of(host: str, proxy: str, warned: bool) -> None:
    line = exposure_warning(HttpSettings(host=host, tls_proxy=proxy))
    assert (line is not None) == warned
    if line is not None:
        assert line.startswith(f"[http] host = {host} is not a loopback address")


def test_payload_paths_filter_and_template() -> None:
    push = {"ref": "refs/heads/main", "commits": [{"id": "abc"}], "n": 3, "no": None}
    assert at_path(push, "$.commits[0].id") == "abc"
    assert at_path(push, "$.commits[1].id") is None and at_path(push, "$.ref.x") is None
    assert unmatched(push, {"$.ref": "refs/heads/main", "$.n": "3"}) is None
    assert unmatched(push, {"$.ref": "refs/heads/dev"}) == "$.ref"
    assert render("{$.ref} at {$.commits[0].id}{$.missing}", push) == "refs/heads/main at abc"
    assert render("", {"a": 1}) == '{\n "a": 1\n}'
    cut = render("{$.t}", {"t": "x" * 9000})
    assert cut.startswith("x" * 8000) and cut.endswith(
        "[cut: 9,000 characters, the first 8,000 kept]"
    )


@pytest.mark.parametrize("enabled", [False, True])
def test_aiohttp_is_imported_by_the_daemon_only_when_http_is_on(
    llm_env: dict[str, str], tmp_path: Path, enabled: bool
) -> None:
    """[http] is off unless the owner turns it on: a daemon without it (and without Discord)
    needs neither aiohttp nor the routes, which cost its start 11 MiB and 0.15 s of CPU here
    (more on a Pi)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = env_of(
        PYTHONPROFILEIMPORTTIME="1",
        PINCLAW_HTTP__ENABLED=str(enabled).lower(),
        PINCLAW_HTTP__PORT=str(port),
    )
    daemon = DaemonProcess(env, tmp_path / "daemon.log").start()
    serving = f"serving HTTP on http://127.0.0.1:{port}"
    try:
        daemon.wait_ready()
        if enabled:
            wait_until(lambda: serving in daemon.log, 30, serving, daemon)
    finally:
        daemon.terminate()
    imported = {line.rsplit("|", 1)[-1].strip() for line in daemon.log.splitlines() if "|" in line}
    assert ("aiohttp" in imported) is enabled and (serving in daemon.log) is enabled
