"""The failures of state.db that the rest of pinclaw tells apart, as the durable layer's own
exceptions: busy (another process holds the lock), full (no space to write), broken (the file
is damaged or not a database). Callers catch these and never need sqlite3.

`translated` makes one from SQLite's error where the durable layer meets it (StateDB's reads
and writes, the copies, the checks); any other SQLite error is a bug and keeps its own type.
Each is also the sqlite3 exception it stands for, with the same code and message, so the
durable layer's own code, which speaks sqlite3, still catches it as before.
"""

from __future__ import annotations

import sqlite3

_BUSY, _LOCKED, _CORRUPT, _FULL, _NOTADB = 5, 6, 11, 13, 26


class StateError(Exception):
    """state.db could not do what was asked: `str()` is SQLite's own words."""


class StateBusy(StateError, sqlite3.OperationalError):
    """Another process (or connection) held the lock for longer than we wait."""


class StateFull(StateError, sqlite3.OperationalError):
    """The disk (or the user's quota) has no room for the write."""


class StateBroken(StateError, sqlite3.DatabaseError):
    """The file is damaged, or is not a SQLite database at all."""


def translated(exc: BaseException) -> StateError | None:
    """The StateError that SQLite's `exc` is, or None when it is none of them."""
    if isinstance(exc, StateError) or not isinstance(exc, sqlite3.Error):
        return None
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    kind: type[StateError] | None = None
    if code in (_BUSY, _LOCKED):
        kind = StateBusy
    elif code == _FULL or "disk is full" in str(exc):
        kind = StateFull
    elif code in (_CORRUPT, _NOTADB):
        kind = StateBroken
    return None if kind is None else _like(kind(*exc.args), exc)


def state_error(exc: sqlite3.Error) -> StateError:
    """`exc` as a StateError: its kind when it has one, else the plain StateError."""
    return translated(exc) or _like(StateError(*exc.args), exc)


def _like(made: StateError, exc: BaseException) -> StateError:
    made.sqlite_errorcode = getattr(exc, "sqlite_errorcode", None)  # type: ignore[attr-defined]
    made.sqlite_errorname = getattr(exc, "sqlite_errorname", None)  # type: ignore[attr-defined]
    return made
