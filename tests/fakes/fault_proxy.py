"""A TCP proxy on 127.0.0.1 that makes a network board's link misbehave on demand.

Put it in front of a board served over TCP (`tcp_serial.py`, or ser2net) and point pinclaw
at `proxy.url("socket")`. Every byte passes through unchanged until a test says otherwise:

- `delay_s = 0.2`: each chunk reaches the other side 200 ms after it arrived, each way (a
  slow link: a request and its answer take 400 ms more), order kept;
- `drop()`: every open connection is closed at once (the link drops); new ones still work;
- `hang()`: every connection, open or new, stays up but nothing more passes either way (a
  half-open link: no FIN, no RST, just silence) until `heal()`;
- `refuse()`: nothing listens any more (a connection is refused: the host is up, its
  server is not) until `heal()` listens again on the same port.

`connections` counts the connections accepted.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from types import TracebackType

__all__ = ["FaultProxy"]
Pending = queue.Queue[tuple[float, bytes] | None]  # (when it is due, the bytes); None: ended


class _Pipe:
    """One connection: client <-> upstream, a reader and a writer thread each way."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.silenced = proxy.hanging  # a connection made while hanging never carries a byte
        self.closed = threading.Event()
        for source, target in ((client, upstream), (upstream, client)):
            pending: Pending = queue.Queue()
            threading.Thread(target=self._read, args=(source, pending), daemon=True).start()
            threading.Thread(target=self._write, args=(target, pending), daemon=True).start()

    def _read(self, source: socket.socket, pending: Pending) -> None:
        try:
            while data := source.recv(4096):
                if not (self.silenced or self.proxy.hanging):
                    pending.put((time.monotonic() + self.proxy.delay_s, data))
        except OSError:
            pass
        pending.put(None)

    def _write(self, target: socket.socket, pending: Pending) -> None:
        while (item := pending.get()) is not None:
            due, data = item
            time.sleep(max(0.0, due - time.monotonic()))
            if self.silenced or self.proxy.hanging:
                continue
            try:
                target.sendall(data)
            except OSError:
                break
        if not (self.silenced or self.proxy.hanging):
            self.close()  # one side ended: so does the other

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class FaultProxy:
    """127.0.0.1:`port` forwarding to `upstream`, with faults on demand (see the module)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.delay_s = 0.0
        self.hanging = False
        self.connections = 0
        self._pipes: list[_Pipe] = []
        self._listen(0)

    def _listen(self, port: int) -> None:
        self._server = socket.create_server(("127.0.0.1", port))
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._thread.start()

    def url(self, scheme: str = "socket") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def drop(self) -> None:
        for pipe in self._pipes:
            pipe.close()

    def hang(self) -> None:
        self.hanging = True

    def refuse(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() in the thread
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=2)

    def heal(self) -> None:
        """Forward again: new connections work (a hung one stays silent: pinclaw left it)."""
        for pipe in self._pipes:
            if self.hanging:
                pipe.silenced = True
        self.hanging = False
        if not self._thread.is_alive():
            self._listen(self.port)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() in the thread
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=2)
        self.drop()

    def __enter__(self) -> FaultProxy:
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
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.connections += 1
            self._pipes = [p for p in self._pipes if not p.closed.is_set()]
            self._pipes.append(_Pipe(self, client, upstream))
