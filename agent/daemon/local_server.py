"""The local daemon's socket, `<home>/agent.sock`: how a one-shot (and later other commands)
reaches the running `agent run` instead of starting cold.

The protocol is newline-delimited JSON over a Unix stream socket, one request per
connection: the client writes `{"op": ..., ...}`, the daemon answers with events
(`{"event": ...}`) and closes; the client may send further lines while it waits (an
approval's answer). `daemon.py` fills the table of ops (op name -> handler); "ping" is
built in (`{"event": "pong", "pid": ...}`, for `agent doctor`).

Only the user who runs the daemon may use it: the socket is made 0600 under a umask (no
moment when it is open to others), and each peer's uid is checked where the system tells it
(SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS). A same-uid peer must also send the token
written in the lock file: a command the agent runs has that uid too, and Landlock does not
stop it connecting to a socket it can name (`../agent.sock`), but the OS sandbox keeps it
from reading the home's files. The lock file, held (flock) for the daemon's life, makes it
the only daemon of its home; a socket left by a crashed one is removed at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hmac
import json
import logging
import os
import secrets
import socket
import struct
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from agent import __version__
from agent.home import LOCK_NAME, socket_path

log = logging.getLogger(__name__)

MAX_LINE = 4 * 1024 * 1024  # a request or answer line; a message is at most 20,000 characters
Request = dict[str, Any]
Handler = Callable[[Request, "Connection"], Coroutine[Any, Any, None]]


class DaemonRunning(Exception):
    """Another daemon holds this home's lock (its pid, when it wrote one)."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(f"another pinclaw daemon runs for this home (pid {pid or '?'})")
        self.pid = pid


def lock_home(home: Path) -> int:
    """The home's daemon lock, taken (closing the returned fd lets it go): no daemon can
    start on the home meanwhile. DaemonRunning when one holds it."""
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.read(fd, 128).decode(errors="replace").split(" ")[0]
        os.close(fd)
        raise DaemonRunning(int(pid) if pid.isdigit() else None) from None
    return fd


class Connection:
    """One client: events are written back as they happen; lines it sends after its request
    (answers) wait in a queue until a handler asks for them."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._later: asyncio.Queue[Request] = asyncio.Queue()

    def send(self, event: Request) -> None:
        """Queue one event (no await, so plain callbacks can report too)."""
        if not self._writer.is_closing():
            self._writer.write(json.dumps(event, ensure_ascii=False).encode() + b"\n")

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def next_line(self) -> Request:
        """The next line the client sent after its request."""
        return await self._later.get()

    async def read(self) -> Request | None:
        """One JSON object line from the client; None at its end or on garbage."""
        try:
            line = await self._reader.readline()
        except (ValueError, ConnectionError):  # a line over MAX_LINE, or a reset
            return None
        if not line:
            return None
        try:
            value = json.loads(line)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    async def listen(self) -> None:
        """Queue the client's later lines; return when it hangs up."""
        while (line := await self.read()) is not None:
            await self._later.put(line)

    async def close(self) -> None:
        await self.drain()
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end, or None where the system cannot say."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return int(struct.unpack("3i", creds)[1])
        if sys.platform == "darwin":  # struct xucred {version, uid, ngroups, groups[16]}
            local_peercred = getattr(socket, "LOCAL_PEERCRED", 0x001)
            creds = sock.getsockopt(0, local_peercred, 76)  # 0: SOL_LOCAL
            return int(struct.unpack_from("=II", creds)[1])
    except OSError:
        return None
    return None


class LocalServer:
    """The socket and its lock, the clients being served, and the ops they may ask for."""

    def __init__(
        self,
        home: Path,
        ops: Mapping[str, Handler],
        about: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.home = home
        self._about = about  # counts "ping" reports too (for `agent doctor`)
        self.path = socket_path(home)
        self._ops: dict[str, Handler] = {"ping": self._ping, **ops}
        self._lock_fd: int | None = None
        self._token = secrets.token_hex(16)
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Take the home's lock (DaemonRunning when another daemon has it), clear a stale
        socket, listen. OSError when the socket cannot be made (a path too long)."""
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock()
        try:
            sock = self._bind()
            self._server = await asyncio.start_unix_server(self._client, sock=sock, limit=MAX_LINE)
        except BaseException:
            self._unlock()
            raise
        log.info("local socket ready on %s", self.path)

    def _lock(self) -> None:
        fd = lock_home(self.home)
        os.fchmod(fd, 0o600)  # the token in it is what a client proves itself with
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self._token}\n".encode())
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock; the file stays, empty of meaning
            self._lock_fd = None

    def _bind(self) -> socket.socket:
        """Holding the lock, any socket here is a dead daemon's: replace it. The umask makes
        the file 0600 from the moment it exists."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(previous)
        os.chmod(self.path, 0o600)
        return sock

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        conn = Connection(reader, writer)
        try:
            await self._serve(conn, writer.get_extra_info("socket"))
        finally:
            self._clients.discard(task)
            await conn.close()

    async def _serve(self, conn: Connection, sock: Any) -> None:
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            log.warning("local socket: refused a client of uid %d", uid)
            message = f"the pinclaw daemon serves only its own user (uid {os.getuid()})"
            conn.send({"event": "error", "message": message, "code": 2})
            return
        request = await conn.read()
        if request is None:
            conn.send({"event": "error", "message": "not a JSON request line", "code": 2})
            return
        if not hmac.compare_digest(str(request.get("token", "")), self._token):
            log.warning("local socket: refused a client without this daemon's token")
            message = "not a client of this daemon (no token from its lock file)"
            conn.send({"event": "error", "message": message, "code": 2})
            return
        handler = self._ops.get(str(request.get("op")))
        if handler is None:
            known = ", ".join(sorted(self._ops))
            message = f"unknown op {request.get('op')!r} (this daemon knows: {known})"
            conn.send({"event": "error", "message": message, "code": 2})
            return
        await self._run(handler, request, conn)

    async def _run(self, handler: Handler, request: Request, conn: Connection) -> None:
        """The handler, cancelled when the client hangs up (nobody is left to answer)."""
        work = asyncio.create_task(handler(request, conn))
        listening = asyncio.create_task(conn.listen())
        try:
            await asyncio.wait({work, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            listening.cancel()
            if not work.done():
                log.info("local socket: the client of %r went away; stopping", request["op"])
                work.cancel()
            await asyncio.gather(work, listening, return_exceptions=True)
        if not work.cancelled() and (exc := work.exception()) is not None:
            log.error("local socket: %r failed", request["op"], exc_info=exc)
            message = f"the daemon failed: {type(exc).__name__}: {exc}"
            conn.send({"event": "error", "message": message, "code": 1})

    async def _ping(self, request: Request, conn: Connection) -> None:
        about = self._about() if self._about is not None else {}
        conn.send({"event": "pong", "pid": os.getpid(), "version": __version__, **about})

    def stop_intake(self) -> None:
        """No new clients; those being served carry on."""
        if self._server is not None:
            self._server.close()

    async def drain(self, grace_s: float) -> None:
        """Let the clients being served finish within `grace_s`, then cancel the rest (a
        client told nothing more sees the daemon go away)."""
        if self._clients:
            _, late = await asyncio.wait(set(self._clients), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def close(self) -> None:
        self.stop_intake()
        await self.drain(0)
        if self._lock_fd is not None:  # only the lock's holder owns the socket file
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._unlock()
