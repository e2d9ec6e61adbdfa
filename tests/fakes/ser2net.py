"""ser2net (the Debian package) sharing a serial device over RFC 2217, as on a Raspberry Pi in
the garage: `rfc2217://127.0.0.1:PORT` reaches the device through the real ser2net 4.

Its YAML config is written in the test's folder, the port is on 127.0.0.1 only, and the
process runs in the foreground for the test's length. ser2net opens the device when a client
connects (which resets a simavr rig, as DTR rising resets an Uno) and closes it, dropping
DTR, when the client leaves. A pty has no modem lines, so ser2net would never acknowledge
pyserial's "DTR on": tests/simavr/ptymodem.c, preloaded, gives it lines to set (compiled
here with gcc on first use). It runs with docs/arduino.md's settings for a board: TCP_NODELAY on
(`tcp(nodelay)`) and `chardelay: false`, so each byte of a reply leaves at once without
waiting on Nagle and a delayed ACK (about 40 ms a reply from a board that sends its reply a
byte at a time, as a real one at 57600 baud does); `tuned=False` keeps ser2net's defaults.
`Ser2Net.missing()` says why it cannot run here, or "".
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

__all__ = ["Ser2Net"]

SHIM_SOURCE = Path(__file__).resolve().parents[1] / "simavr" / "ptymodem.c"


def _shim(folder: Path) -> Path:
    """The preload library, built from its source when missing or older."""
    built = folder / "ptymodem.so"
    if not built.exists() or built.stat().st_mtime < SHIM_SOURCE.stat().st_mtime:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", "-o", str(built), str(SHIM_SOURCE), "-ldl"],
            check=True,
            capture_output=True,
        )
    return built


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    """Is something bound to 127.0.0.1:`port`? (Binding it tells, without connecting,
    which would make ser2net open the device.)"""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


class Ser2Net:
    """ser2net serving `device` at `baud` over RFC 2217 on 127.0.0.1:`port`."""

    def __init__(
        self,
        device: str | os.PathLike[str],
        folder: Path,
        *,
        baud: int = 57600,
        tuned: bool = True,
    ) -> None:
        self.device, self.folder, self.baud = str(device), folder, baud
        self.tuned = tuned  # docs/arduino.md's settings; False: ser2net's defaults
        self.port = _free_port()
        self.config = folder / "ser2net.yaml"
        self.log = folder / "ser2net.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def missing() -> str:
        if shutil.which("ser2net") is None:
            return "ser2net is not installed (apt-get install ser2net)"
        if shutil.which("gcc") is None:
            return "gcc is not installed (to build tests/simavr/ptymodem.c)"
        return ""

    @property
    def url(self) -> str:
        return f"rfc2217://127.0.0.1:{self.port}"

    def start(self) -> Ser2Net:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            "%YAML 1.1\n---\n"
            "connection: &board\n"
            f"  accepter: telnet(rfc2217),tcp{'(nodelay)' if self.tuned else ''},127.0.0.1,"
            f"{self.port}\n"
            f"  connector: serialdev,{self.device},{self.baud}n81,local\n"
            "  options:\n"
            "    kickolduser: true\n"
            f"    chardelay: {'false' if self.tuned else 'true'}\n"
        )
        env = {**os.environ, "LD_PRELOAD": str(_shim(self.folder))}
        with self.log.open("wb") as log:
            self._proc = subprocess.Popen(
                ["ser2net", "-n", "-c", str(self.config), "-P", str(self.folder / "ser2net.pid")],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 10
        while not _listening(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ser2net did not start: {self.log.read_text()[-500:]}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> Ser2Net:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
