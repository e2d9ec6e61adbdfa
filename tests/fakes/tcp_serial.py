"""A serial device served over TCP, as a Wi-Fi or Ethernet board serves its Firmata.

StandardFirmataWiFi and StandardFirmataEthernet listen on a TCP port (3030) and speak
Firmata to one client at a time; pyserial reaches them as `socket://host:3030`. This server
gives the Firmata emulator (`firmata_board.py`, on a pty) or the simavr rig the same face:
each client gets the device's bytes and the device gets the client's, unchanged. A new
client replaces the last one (as the firmware does), and closing the connection does not
reset the board. Bytes leave as the device sends them (TCP_NODELAY). When the device goes
away (`FirmataBoard.close()`) the client's connection drops; a later client is served again
once the device is back.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import tty
from pathlib import Path
from types import TracebackType

__all__ = ["TcpSerial"]


class TcpSerial:
    """The device at `path` on 127.0.0.1:`port`, one client at a time."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.clients = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._current: threading.Event | None = None  # set: the current client's relay stops
        self._relaying = threading.Thread()  # the current client's relay
        self._thread = threading.Thread(target=self._accept, name="tcp-serial", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() in the thread
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=2)
        if self._current is not None:
            self._current.set()

    def __enter__(self) -> TcpSerial:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self._current is not None:
                self._current.set()  # the firmware serves the newest client
                self._relaying.join(timeout=2)  # and only it: no byte goes to the last one
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a byte leaves at once
            stop = self._current = threading.Event()
            self.clients += 1
            self._relaying = threading.Thread(target=self._relay, args=(client, stop), daemon=True)
            self._relaying.start()

    def _relay(self, client: socket.socket, stop: threading.Event) -> None:
        try:
            device = os.open(self.path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            client.close()
            return
        try:
            tty.setraw(device)
            while not stop.is_set():
                ready, _, _ = select.select([client, device], [], [], 0.1)
                if client in ready:
                    data = client.recv(4096)
                    if not data:
                        return
                    _write_all(device, data)
                if device in ready:
                    data = os.read(device, 4096)
                    if not data:
                        return
                    client.sendall(data)
        except OSError:
            return  # the device vanished, or the client left
        finally:
            os.close(device)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            select.select([], [fd], [], 0.1)
