"""A real PostgreSQL for the tests: a throw-away cluster made by Debian's own initdb and
pg_ctl in a temporary folder, listening on 127.0.0.1 at a free port, gone at the end.

PostgreSQL refuses to run as root, so under root (CI) the cluster belongs to the `postgres`
user that Debian's package made, through runuser. Without the server's programs the tests
that need it are skipped, unless PINCLAW_POSTGRES=require (CI) makes that a failure.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

_names = itertools.count(1)


def server_bin() -> Path | None:
    """The folder of initdb and pg_ctl: Debian's newest, else whatever PATH has."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresCluster:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="pinclaw-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self, *settings: str) -> PostgresCluster:
        """`settings`: more NAME=VALUE for the server, after (so over) the tests' own: the
        bench turns fsync back on and loads pg_stat_statements."""
        if self._as:
            shutil.chown(self.root, "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "pinclaw",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        ) + "".join(f" -c {setting}" for setting in settings)
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://pinclaw@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A database of its own (for one test); its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return self.url(name)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [*self._as, str(self.bindir / program), *args],
            check=True,
            capture_output=True,
            timeout=60,
        )


def start_or_skip() -> PostgresCluster:
    bindir = server_bin()
    if bindir is None:
        if os.environ.get("PINCLAW_POSTGRES") == "require":
            pytest.fail("PINCLAW_POSTGRES=require, and no PostgreSQL server is installed")
        pytest.skip("no PostgreSQL server here (Debian: apt-get install postgresql-15)")
    return PostgresCluster(bindir).start()
