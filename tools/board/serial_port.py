"""The serial port under the Firmata link: opened so that closing it does not reset the board
next time, and counting what arrives, so a board that talks but not Firmata is told apart
from one that says nothing.

An Uno resets when DTR rises, and a port opened with HUPCL drops DTR when it closes, so the
next open raises it again: every `agent run -m` then reset the board and undid what the last
one set. Clearing HUPCL once keeps DTR up after close; the first open after plugging in still
resets (nothing can prevent that edge), later ones do not. Windows has no such flag.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from tools.board.firmata_types import SETUP_HELP, BoardError
from tools.board.pyfirmata_adapter import autodetect_port


class CountingPort:
    """A pyserial port that counts the bytes read from it; everything else passes through."""

    def __init__(self, sp: Any) -> None:
        self.sp = sp
        self.received = 0

    def read(self, size: int = 1) -> bytes:
        data: bytes = self.sp.read(size)
        self.received += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sp, name)


def open_port(port: str, *, baud: int, timeout: float) -> tuple[CountingPort, str]:
    """Open `port` ("auto" finds one) for the link: exclusive, HUPCL cleared, input flushed."""
    import serial

    path = autodetect_port() if port == "auto" else port
    try:
        exclusive = True if os.name == "posix" else None
        sp = serial.Serial(path, baud, timeout=None, write_timeout=timeout, exclusive=exclusive)
        keep_dtr_on_close(sp.fd if os.name == "posix" else None)
        sp.reset_input_buffer()  # whatever the board said before we listened is stale
    except (OSError, ValueError) as exc:
        if getattr(exc, "errno", None) in (errno.EBUSY, errno.EAGAIN):
            raise BoardError(busy_line(path)) from None
        raise BoardError(
            f"No Arduino board is connected (could not open {path}: {exc or type(exc).__name__})."
            f" {SETUP_HELP}"
        ) from None
    return CountingPort(sp), path


def busy_line(path: str) -> str:
    """The port is there but another program holds it (a serial monitor, a second daemon)."""
    holders = ", ".join(f"pid {pid} {name}" for pid, name in holders_of(path))
    return (
        f"The board's port {path} is in use by another program{f' ({holders})' if holders else ''};"
        " close it (the Arduino IDE's serial monitor, another `agent run`) and try again."
    )


def holders_of(path: str) -> list[tuple[int, str]]:
    """The processes (of those this user may see) with `path` open, from /proc."""
    target = os.path.realpath(path)
    found = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        if fd_dir.parent.name == str(os.getpid()):
            continue  # this process's own failed open is closed already
        with contextlib.suppress(OSError):
            if any(os.path.realpath(fd) == target for fd in fd_dir.iterdir()):
                comm = (fd_dir.parent / "comm").read_text().strip()
                found.append((int(fd_dir.parent.name), comm))
    return sorted(found)[:3]


def keep_dtr_on_close(fd: int | None) -> bool:
    """Clear HUPCL on a POSIX tty so closing it leaves DTR up; True when it was cleared."""
    if fd is None:
        return False
    import termios

    with contextlib.suppress(termios.error, OSError):
        attrs = termios.tcgetattr(fd)
        if attrs[2] & termios.HUPCL:
            attrs[2] &= ~termios.HUPCL
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
        return True
    return False
