"""The port under the Firmata link, opened through pyserial's `serial_for_url`: a serial
device of this machine, a board shared over the network by ser2net (`rfc2217://host:port`),
or a board on the network itself (`socket://host:port`, StandardFirmataWiFi/Ethernet).

A device is opened so that closing it does not reset the board next time: an Uno resets
when DTR rises, and a port opened with HUPCL drops DTR when it closes, so the next open
raises it again: every `agent run -m` then reset the board and undid what the last one set.
Clearing HUPCL once keeps DTR up after close; the first open after plugging in still resets
(nothing can prevent that edge), later ones do not. Windows has no such flag. A network
port is read in short slices (its reads cannot be cancelled from another thread), with
Nagle's delay off so each request leaves at once. Every port counts what arrives, so a
board that talks but not Firmata is told apart from one that says nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path
from typing import Any

from tools.board.link.firmata_types import SETUP_HELP, BoardError
from tools.board.link.pyfirmata_adapter import autodetect_port
from tools.config import network_port

NETWORK_READ_S = 0.2  # a network read returns this often, so closing the link is seen


class CountingPort:
    """A pyserial port that counts the bytes read from it; everything else passes through.

    A read waits until data arrives or `cancel_read()` is called, on every kind of port."""

    def __init__(self, sp: Any) -> None:
        self.sp = sp
        self.received = 0
        self._cancelled = False

    def read(self, size: int = 1) -> bytes:
        while True:
            data: bytes = self.sp.read(size)
            if data or self._cancelled or self.sp.timeout is None:
                self.received += len(data)
                return data

    def cancel_read(self) -> None:
        self._cancelled = True
        cancel = getattr(self.sp, "cancel_read", None)
        if cancel is not None:
            cancel()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sp, name)


def open_port(port: str, *, baud: int, timeout: float) -> tuple[CountingPort, str]:
    """Open `port` ("auto" finds one) for the link: a device exclusive with HUPCL cleared,
    a network port with no Nagle delay; the input flushed."""
    if network_port(port):
        return _open_network(port, baud=baud, timeout=timeout), port
    import serial

    path = autodetect_port() if port == "auto" else port
    try:
        exclusive = True if os.name == "posix" else None
        sp = serial.serial_for_url(
            path, baud, timeout=None, write_timeout=timeout, exclusive=exclusive
        )
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


def _open_network(url: str, *, baud: int, timeout: float) -> CountingPort:
    """rfc2217:// (ser2net, which opens the board's port when we connect) or socket://."""
    import serial

    rfc2217 = url.startswith("rfc2217")
    address = f"{url}?timeout={timeout:g}" if rfc2217 else url  # its answers' deadline
    writes = {} if rfc2217 else {"write_timeout": timeout}  # RFC 2217 has none to set
    try:
        sp = serial.serial_for_url(address, baud, timeout=NETWORK_READ_S, **writes)
    except (OSError, ValueError) as exc:  # SerialException is an OSError
        raise BoardError(unreachable_line(url, exc)) from None
    with contextlib.suppress(AttributeError, OSError):
        sp._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return CountingPort(sp)


def unreachable_line(url: str, exc: BaseException) -> str:
    """Why a network board could not be reached, with what to check."""
    why = str(exc) or type(exc).__name__
    if url.startswith("rfc2217"):
        check = "Is ser2net running there with an RFC 2217 (telnet(rfc2217)) accepter on that port?"
    else:
        check = "Is the board powered and on the network, running StandardFirmataWiFi/Ethernet?"
    return f"Could not reach the board at {url} ({why}). {check}"


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
