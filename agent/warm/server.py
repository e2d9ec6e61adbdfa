"""The warm start process (`python -m agent.warm`): it imports what the cold one-shot that
started it had imported, then forks a copy of itself for each one-shot handed over, and ends
after `--idle` seconds without one.

A fork takes the one-shot's standard input, output and error (passed over the socket), its
environment, working folder and umask, and runs `agent/cli/main.py` on its command line, as
the cold path would in the one-shot's own process; this process sends back the fork's pid,
then its exit status. It takes a request only from this user (the peer's uid) with the token
it wrote in its folder (0600), and declines one — the one-shot then runs cold — once any
module of pinclaw it loaded has changed on disk (an upgrade, an edit), and then ends.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import json
import os
import secrets
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from agent.daemon.local_server import peer_uid
from agent.home import create_private_file
from agent.model.profiles.litellm_import import prepare_litellm_import
from agent.warm.place import PACKAGE_DIR, paths, start_env

MAX_REQUEST_BYTES = 4 << 20  # a command line and an environment; a message may be long
_OWN_PACKAGES = ("agent", "channels", "tools")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.warm")
    parser.add_argument("--idle", type=float, required=True, help="seconds to stay unused")
    parser.add_argument("--modules", help="a file of module names to import (then removed)")
    options = parser.parse_args(argv)
    names = _listed(options.modules)
    found = paths(os.environ)
    if found is None:
        return 1
    socket_path, token_path, lock_path = found
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another one runs for these one-shots
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()} {options.idle:g}\n".encode())  # for `agent doctor`
    _preload(names)
    if threading.active_count() > 1:
        return 1  # a fork would lack a thread some module started: no warm start here
    stamps = _stamps()
    token = secrets.token_hex(16)
    _write_private(token_path, token)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)  # left by one that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(16)
    try:
        Server(listener, token, stamps, lock).serve(options.idle)
    finally:
        for path in (socket_path, token_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return 0


def _listed(modules_file: str | None) -> list[str]:
    """The module names the cold one-shot wrote for this start; the file is removed."""
    if not modules_file:
        return []
    try:
        with open(modules_file, encoding="utf-8") as listed:
            names = listed.read().split()
        os.unlink(modules_file)
    except OSError:
        return []
    return names


def _preload(names: list[str]) -> None:
    """What the cold one-shot had imported (a module that fails is skipped: its one-shot
    imports it again), and at least the one-shot's own path."""
    # LiteLLM's import as load_litellm has it: never online for its price map (nor leaving a
    # thread retrying, which a fork would not have), no stray .env read.
    prepare_litellm_import()
    for name in ["agent.cli.main", "agent.cli.one_shot", *names]:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    # Caches each one-shot would fill on its way, filled once here for every fork: the TLS
    # context (the CA bundle read) and the tokenizer the prompt is counted with.
    from agent.model.openai_wire_call import tls_context
    from agent.model.stand_in_tokenizer import stand_in_counter

    with contextlib.suppress(Exception):
        tls_context()
        if (counter := stand_in_counter()) is not None:
            counter("warm")


def _stamps() -> dict[str, float]:
    """The modification time of each file of pinclaw's own packages loaded now."""
    root = os.path.dirname(PACKAGE_DIR)
    found: dict[str, float] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(root) and module.__name__.split(".")[0] in _OWN_PACKAGES:
            with contextlib.suppress(OSError):
                found[path] = os.stat(path).st_mtime
    return found


def _write_private(path: str, text: str) -> None:
    """`text` at `path`, 0600 from its first moment, replacing a former start's at once."""
    partial = Path(f"{path}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    create_private_file(partial, text)
    os.replace(partial, path)


class _Declined(Exception):
    """The request is for a warm start with other files or variables: run it cold."""


class Server:
    """The accept loop: a fork per one-shot, its exit status sent back when it ends."""

    def __init__(
        self, listener: socket.socket, token: str, stamps: dict[str, float], lock: int
    ) -> None:
        self._listener, self._token, self._stamps = listener, token, stamps
        # Held while this process runs: a fork's one-shot finds it held and starts no other;
        # the fork lets go of it, so a fork outliving this process does not hold it on.
        self._lock = lock
        self._children: dict[int, socket.socket] = {}
        self._start_env = start_env(os.environ)
        self._stopping = False

    def serve(self, idle_s: float) -> None:
        wake_read, wake_write = os.pipe()
        for end in (wake_read, wake_write):
            os.set_blocking(end, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select: a fork ended
        for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(stop, self._stop)
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        last = time.monotonic()
        while not (self._stopping and not self._children):
            left = last + idle_s - time.monotonic()
            if not self._children and left <= 0:
                break
            for key, _ in selector.select(None if self._children else left):
                if key.fileobj is self._listener and not self._stopping:
                    conn, _ = self._listener.accept()
                    self._take(conn)
                    last = time.monotonic()
                elif key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 512)
            self._reap()

    def _stop(self, *_: object) -> None:
        self._stopping = True

    def _take(self, conn: socket.socket) -> None:
        """One request: checked, then forked; the connection is kept to send the status."""
        fds: list[int] = []
        try:
            conn.settimeout(10)
            if peer_uid(conn) not in (None, os.getuid()):
                raise PermissionError("another user")
            request, fds = _receive(conn)
            if request.get("token") != self._token:
                raise PermissionError("no token of this warm start")
            if changed(self._stamps):
                self._stopping = True  # ends once its forks have
            if self._stopping or request.get("start") != self._start_env:
                _send(conn, {"declined": "this warm start began with other files or variables"})
                raise _Declined
            pid = os.fork()
        except (OSError, ValueError, _Declined) as exc:
            if not isinstance(exc, _Declined):
                with contextlib.suppress(OSError):
                    _send(conn, {"error": str(exc)})
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        if pid == 0:
            self._listener.close()
            conn.close()
            os.close(self._lock)
            _run_fork(request, fds)
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):  # a client gone: the fork still runs to its end
            _send(conn, {"pid": pid})
        self._children[pid] = conn

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self._children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                _send(conn, {"exit": 128 - code if code < 0 else code})
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request line and the three descriptors sent with it."""
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more or len(data) > MAX_REQUEST_BYTES:
            for fd in fds:
                os.close(fd)
            raise ValueError("the request was cut short")
        data += more
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("the request came without standard input, output and error")
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("the request is not an object")
    return request, fds


def _send(conn: socket.socket, value: dict[str, Any]) -> None:
    conn.sendall(json.dumps(value).encode() + b"\n")


def changed(stamps: dict[str, float]) -> bool:
    """Whether a file of `stamps` (path: modification time) changed or went away."""
    for path, mtime in stamps.items():
        try:
            if os.stat(path).st_mtime != mtime:
                return True
        except OSError:
            return True
    return False


def _run_fork(request: dict[str, Any], fds: list[int]) -> None:
    """In the fork: become the one-shot's process, run its command line, exit with its status."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for stop in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(stop, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=stream.isatty())  # type: ignore[union-attr]
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        argv = [str(arg) for arg in request["argv"]]
        sys.argv = ["agent", *argv]
        from agent.cli.main import main as with_click

        with_click(argv, daemon_tried=bool(request.get("daemon_tried")))
        code = 0
    except SystemExit as done:
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
