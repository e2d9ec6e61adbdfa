"""The thin side of the local daemon: a one-shot handed to the running `agent run` over
`<home>/agent.sock` (protocol in `agent/daemon/local_server.py`).

Standard library only — no asyncio, no pydantic, no LiteLLM, not even pathlib, typing or
json's regular expressions (the socket and JSON through their C modules): while a daemon
runs, this and Python's own start are the whole cost of `agent run -m` (on a terminal: a
stdlib spinner while the daemon works, tool lines coloured as a cold one-shot's, from
agent/cli/one_shot_screen.py). Without a daemon (no socket, or a stale one nobody listens
on), or when the daemon runs with other settings, the caller runs the one-shot in-process as
before.

A command line of only a one-shot's options (`plain_one_shot`) is read here by hand, so
`agent/__main__.py` can hand it over before click and the channel registry are imported:
they cost more than the rest of this path together.
"""

from __future__ import annotations

import _json
import _socket
import errno
import os
import select
import sys

from agent.cli.one_shot_screen import TextSpinner, on_terminal, paint, paint_note
from agent.home import (
    ENV_PREFIX,
    LOCK_NAME,
    SOCKET_NAME,
    config_file_path,
    home_folder,
    settings_fingerprint,
)

TYPE_CHECKING = False  # typing, pathlib and json's regular expressions cost more than a turn
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

    Folder = str | os.PathLike[str]

# connect() errors that mean "no daemon here": run in-process instead.
_NOBODY = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK, errno.ENOTDIR, errno.ENAMETOOLONG)
GONE = (
    "error: the pinclaw daemon went away before answering (it was stopped or crashed); "
    "the message may be unanswered: run it again, or with --no-daemon"
)
EXIT_GONE = 1  # like a turn that failed: the question is not answered
EXIT_REFUSED = 2  # like a config error: a setup problem, not a turn's
TICK_S = 0.08  # the spinner's frame, while nothing comes from the daemon


class Unreachable(Exception):
    """A socket is there but this user may not use it (another user's daemon)."""


def connect(home: Folder) -> _socket.socket | None:
    """A connection to the home's daemon; None when none runs. Unreachable on EACCES."""
    path = os.path.join(home, SOCKET_NAME)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise Unreachable(
                f"cannot use the pinclaw daemon at {path}: permission denied (it belongs to "
                "another user); use --no-daemon to answer here"
            ) from None
        if exc.errno in _NOBODY or isinstance(exc, ConnectionError):
            return None
        raise
    return sock


def token(home: Folder) -> str:
    """The running daemon's token, from its lock file ("" when it cannot be read)."""
    try:
        with open(os.path.join(home, LOCK_NAME), encoding="utf-8", errors="replace") as lock:
            written = lock.read()
    except OSError:
        return ""
    parts = written.split()
    return parts[1] if len(parts) > 1 else ""


class _JsonRules:
    """json.loads's defaults, as its C scanner reads them."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, float


def _not_json(value: object) -> object:
    raise TypeError(f"not JSON: {type(value).__name__}")


# json's own C scanner and encoder, without json.decoder's regular expressions (their import
# alone is a fifth of a one-shot through the daemon).
_scan = _json.make_scanner(_JsonRules())  # type: ignore[arg-type]  # typeshed: "context"
_write = _json.make_encoder(
    None, _not_json, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
)


def encode(value: object) -> bytes:
    """`value` as one JSON line, as json.dumps writes it: in ASCII, so that a terminal's
    bytes that were not UTF-8 (lone surrogates in argv) travel as escapes, for the daemon
    to repair as it repairs a chat message."""
    return "".join(_write(value, 0)).encode() + b"\n"


def decode(line: bytes) -> Any:
    """One JSON line, as json.loads reads it; ValueError when it is not one JSON value."""
    text = line.decode().strip()
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        raise ValueError(f"not a JSON line: {text[:80]!r}")
    return value


class JsonLines:
    """JSON lines from the socket, buffered by hand so `select` sees only unread data."""

    def __init__(self, sock: _socket.socket, token: str) -> None:
        self.sock = sock
        self.token = token
        self._buffer = b""

    def buffered(self) -> bool:
        return b"\n" in self._buffer

    def next(self, idle: Callable[[], None] | None = None) -> dict[str, Any] | None:
        """The next event; None when the daemon hung up first. `idle` is called every
        TICK_S while nothing comes (a spinner's frame)."""
        while b"\n" not in self._buffer:
            while idle is not None and not select.select([self.sock], [], [], TICK_S)[0]:
                idle()
            try:
                chunk = self.sock.recv(65536)
            except ConnectionError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        value = decode(line)
        return value if isinstance(value, dict) else {}

    def request(self, value: dict[str, Any]) -> None:
        self.send({**value, "token": self.token})

    def send(self, value: dict[str, Any]) -> None:
        self.sock.sendall(encode(value))


class PlainOneShot:
    """What a command line of only a one-shot's options asks for (by hand: a dataclass would
    import `inspect`, a NamedTuple `typing`, each more than this path's turn)."""

    __slots__ = ("config", "message", "session", "verbose")

    def __init__(
        self, message: str, session: str | None = None, config: str | None = None, verbose: int = 0
    ) -> None:
        self.message, self.session, self.config, self.verbose = message, session, config, verbose

    def _values(self) -> tuple[str, str | None, str | None, int]:
        return self.message, self.session, self.config, self.verbose

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainOneShot) and self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # compared by value, never a key

    def __repr__(self) -> str:
        return f"PlainOneShot{self._values()!r}"


def run_command(args: list[str]) -> tuple[str | None, int, int, list[str]] | None:
    """`args` read as `[global options] run ...`: the config file named, -v's and -q's
    counts, and the run command's own arguments; None for anything else."""
    config: str | None = None
    verbose = quiet = 0
    rest = list(args)
    while rest and rest[0] != "run":
        arg = rest.pop(0)
        if arg in ("-q", "--quiet"):
            quiet += 1
        elif arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            verbose += 1 if arg == "--verbose" else len(arg) - 1
        elif arg == "--config" and rest:
            config = rest.pop(0)
        elif arg.startswith("--config="):
            config = arg.partition("=")[2]
        else:
            return None
    return (config, verbose, quiet, rest[1:]) if rest else None


def plain_one_shot(args: list[str]) -> PlainOneShot | None:
    """The one-shot `args` ask for, or None when click must read them (anything unusual)."""
    found = run_command(args)
    if found is None:
        return None
    config, verbose, quiet, run_args = found
    if quiet and verbose:
        return None
    options = _run_options(run_args)
    if options is None or not options.get("message", "").strip() or options["message"] == "-":
        return None
    if not is_utf8(options.get("session", "")):
        return None  # a terminal's bytes that were not UTF-8: click says so, in one line
    return PlainOneShot(options["message"], options.get("session"), config, verbose)


def is_utf8(text: str) -> bool:
    """False for a terminal's bytes that were not UTF-8 (Python reads them as lone
    surrogates, which no JSON line, file or state.db can take)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _run_options(args: list[str]) -> dict[str, str] | None:
    """`-m`/`--message` and `--session` with their values, each once; None for anything else."""
    names = {"-m": "message", "--message": "message", "--session": "session"}
    found: dict[str, str] = {}
    while args:
        arg = args.pop(0)
        name, equals, value = arg.partition("=")
        if arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            name, equals, value = "-m", "=", arg[2:]
        if name not in names or names[name] in found:
            return None
        if not equals:
            if not args:
                return None
            value = args.pop(0)
        found[names[name]] = value
    return found


def through_daemon(
    message: str, session: str | None, config: Folder | None, *, verbose: bool
) -> int | None:
    """The one-shot answered by the local daemon (its exit status), or None when none takes
    it: no daemon, another user's, other settings, or a named config file that is missing
    (loading the settings reports that)."""
    env = os.environ
    config_file = config_file_path(config, env)
    named = config is not None or bool(env.get(f"{ENV_PREFIX}CONFIG"))
    if named and not os.path.exists(config_file):
        return None
    fingerprint = settings_fingerprint(config_file, env)
    return run_one_shot(home_folder(env), message, session, fingerprint, verbose=verbose)


def ping(home: Folder) -> int | None:
    """The daemon's pid when one answers, else None (for `agent doctor`)."""
    pid = pong(home).get("pid")
    return pid if isinstance(pid, int) else None


def pong(home: Folder) -> dict[str, Any]:
    """What the running daemon says of itself (its pid, the approval questions waiting for
    a person: "asking"); empty when none answers."""
    try:
        sock = connect(home)
    except (Unreachable, OSError):
        return {}
    if sock is None:
        return {}
    try:
        lines = JsonLines(sock, token(home))
        lines.request({"op": "ping"})
        event = lines.next()
    finally:
        sock.close()
    return event or {}


def run_one_shot(
    home: Folder,
    message: str,
    session: str | None,
    fingerprint: str,
    *,
    verbose: bool = False,
) -> int | None:
    """Ask the daemon; print what it answers as the in-process one-shot would. The exit
    status, or None when no daemon takes it (the caller then runs it here)."""
    request = {
        "op": "run",
        "message": message,
        "session": session,
        "settings": fingerprint,
        "tty": sys.stdin.isatty(),
    }
    return call(home, request, verbose=verbose, spin=True)


def call(
    home: Folder, request: dict[str, Any], *, verbose: bool = False, spin: bool = False
) -> int | None:
    """Send one request and print its events (notes on stderr, a reply on stdout; on a
    terminal tool lines in colour and, with `spin`, a spinner while it waits). The exit
    status, or None when no daemon takes it."""
    try:
        sock = connect(home)
    except Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if sock is None:
        return None
    try:
        lines = JsonLines(sock, token(home))
        taken = True
        try:
            lines.request(request)
        except ConnectionError:  # it hung up first; it may have said why (a refusal)
            taken = False
        spinner = TextSpinner(sys.stderr) if spin and on_terminal(sys.stderr) else None
        try:
            return _follow(lines, verbose, taken, spinner)
        except ConnectionError:
            pass  # it went away while a question was answered
        finally:
            if spinner is not None:
                spinner.clear()
    finally:
        sock.close()
    print(GONE, file=sys.stderr)
    return EXIT_GONE


def _follow(
    lines: JsonLines, verbose: bool, taken: bool, spinner: TextSpinner | None = None
) -> int | None:
    """Print the events until the last one. Exit status; None when the daemon declined, or
    hung up without a word before taking the request (then it is answered here)."""
    out, err = sys.stdout, sys.stderr
    while (event := lines.next(spinner.tick if spinner else None)) is not None:
        if spinner is not None:
            spinner.clear()
        kind = event.get("event")
        if kind in ("tool", "note"):
            _say(err, str(event.get("line", "")), tool=kind == "tool")
        elif kind == "reply":
            out.write(str(event.get("text", "")))
            out.flush()
        elif kind == "ask":
            _ask(event, lines, err)
        elif kind == "done":
            if event.get("stderr"):
                _say(err, str(event["stderr"]))
            return int(event.get("code", 0))
        elif kind == "error":
            _say(err, f"error: {event.get('message', '')}")
            return int(event.get("code", 1))
        elif kind == "declined":
            if verbose:
                print(f"the daemon declined: {event.get('reason')}; answering here", file=err)
            return None
    if not taken:
        return None
    print(GONE, file=err)
    return EXIT_GONE


def _say(err: TextIO, line: str, *, tool: bool = False) -> None:
    """A line on stderr, coloured on a terminal as a cold one-shot colours it."""
    if on_terminal(err):
        line = paint(line) if tool else paint_note(line)
    print(line, file=err, flush=True)


def _ask(event: dict[str, Any], lines: JsonLines, err: TextIO) -> None:
    """y/N/a on this terminal, as the in-process one-shot asks; when the daemon speaks first
    (the question timed out), it is given up."""
    print(f"{event.get('text', '')}\nAllow? [y/N/a(lways)] ", end="", file=err, flush=True)
    stdin = sys.stdin.fileno()
    while not lines.buffered():
        ready, _, _ = select.select([stdin, lines.sock], [], [])
        if lines.sock in ready:
            break
        if stdin in ready:
            typed = os.read(stdin, 1024).decode(errors="replace")
            lines.send({"id": event.get("id"), "answer": typed.strip()})
            return
    print(file=err)
