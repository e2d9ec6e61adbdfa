"""`agent run` as a real subprocess, for tests that kill it: start, wait, SIGTERM, kill -9;
and any `agent` command run to its end as the user runs it (`agent`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
READY = "local socket ready"  # logged (with -v) once one-shots can reach the daemon


class DaemonProcess:
    def __init__(self, env: dict[str, str], log: Path, flags: tuple[str, ...] = ("-v",)) -> None:
        """`flags`: the group's options (-v: the log `wait_ready` waits on)."""
        self._env = {**env, "PYTHONUNBUFFERED": "1"}
        self._log_path = log
        self._flags = flags
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DaemonProcess:
        log = self._log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", *self._flags, "run"],
            cwd=REPO,
            env=self._env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return self

    def wait_ready(self, timeout_s: float = 60) -> DaemonProcess:
        """Until its local socket is served; an `agent run` that ended first fails the test."""
        assert self.proc is not None
        proc = self.proc
        wait_until(lambda: READY in self.log or proc.poll() is not None, timeout_s, READY, self)
        if READY not in self.log:
            raise AssertionError(f"agent run ended with {proc.returncode}:\n{self.log[-4000:]}")
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def ensure_stopped(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def log(self) -> str:
        return self._log_path.read_text(errors="replace")


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    daemon: DaemonProcess | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    log = daemon.log[-6000:] if daemon is not None else ""
    raise AssertionError(f"not within {timeout_s} s: {what}\n--- daemon log ---\n{log}")


def rows(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """What the store holds: state.db at `db`, or the PostgreSQL database that
    PINCLAW_STATE__URL names when the test runs on that store (the same SQL for both)."""
    url = os.environ.get("PINCLAW_STATE__URL")
    if url:
        from agent.durable.postgres.pg_connection import PgConnection

        conn = PgConnection.connect(url)
        try:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()
    with sqlite3.connect(db) as conn:
        return list(conn.execute(sql, params).fetchall())


def without_pyserial(folder: Path) -> str:
    """A PYTHONPATH entry under `folder` where `import serial` fails as if pyserial were not
    installed: a feature's missing package, as a user meets it."""
    shadow = folder / "shadow" / "serial"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'serial'\", name='serial')\n"
    )
    return str(shadow.parent)


def without_system_programs(folder: Path) -> str:
    """A PYTHONPATH entry under `folder` where pinclaw finds none of the programs it takes from
    the system's folders (bwrap, setpriv, flock, prlimit): a machine without bubblewrap, as
    its user meets it (tools/sandbox/system_programs.py)."""
    shadow = folder / "no-system-programs"
    shadow.mkdir(parents=True)
    (shadow / "sitecustomize.py").write_text(
        f"import tools.sandbox.system_programs as found\nfound.SYSTEM_PATH = {str(shadow)!r}\n"
    )
    return str(shadow)


def env_of(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def agent(
    *args: str, env: dict[str, str] | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the user runs it, `env` over this process's environment; `options`
    are more of subprocess.run's (umask, input, timeout...)."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        **{"timeout": 120, **options},
    )
