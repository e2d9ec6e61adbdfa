"""Pairing: the people and groups the owner let in from the chat, kept in state.db, so
config.toml is never rewritten.

- `pairing_codes`: a code per request (a stranger wrote privately; the owner approves or
  denies it) or per invite (the owner made it to hand out; the stranger who sends it is in).
  A code lives an hour.
- `paired`: who was let in, per channel, by platform id: a person, or a group where everyone
  may talk to the bot.
- `pairing_locks`: a sender's wrong codes (WRONG_LIMIT within an hour lock their pairing for
  an hour) and the lock a denial leaves (a day: no new code, no new line to the owner).
  Ended codes and locks long over are forgotten after KEPT_S (30 days).

The daemon uses them through StateDB; `agent pairing` opens state.db itself, as `agent
schedules` does (the daemon reads `paired` again on a stranger's message and every 30 s, and
its courier sweeps the outbox, where a decision's line to the stranger waits); `agent doctor`
reads them read-only (`paired_lines`, through agent/durable/store.py's read_state). What a
code looks like: agent/durable/owner/pairing_codes.py.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import astuple, dataclass

from agent.durable.file.state_db import StateDB
from agent.durable.outbox import Outbox
from agent.durable.owner.pairing_codes import new_code, normal, shown
from channels.base import ChatRef, IncomingMessage, OutgoingPart

SCHEMA = """
CREATE TABLE IF NOT EXISTS pairing_codes (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    kind TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    name TEXT NOT NULL,
    username TEXT NOT NULL,
    chat_key TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    decided_by TEXT NOT NULL DEFAULT '',
    decided_at REAL
);
CREATE INDEX IF NOT EXISTS pairing_codes_by_sender ON pairing_codes (channel, sender_id);
CREATE TABLE IF NOT EXISTS paired (
    channel TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    username TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_at REAL NOT NULL,
    PRIMARY KEY (channel, kind, id)
);
CREATE TABLE IF NOT EXISTS pairing_locks (
    channel TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    wrong INTEGER NOT NULL DEFAULT 0,
    first_wrong_at REAL NOT NULL DEFAULT 0,
    locked_until REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, sender_id)
);
"""

CODE_LIFE_S = 3600.0
WRONG_LIMIT = 5  # wrong codes within WRONG_WINDOW_S that lock a sender's pairing
WRONG_WINDOW_S = 3600.0
LOCK_S = 3600.0
DENIED_LOCK_S = 86_400.0
MAX_PENDING = 10  # open requests per channel: more strangers get no code (nor the owner a line)
KEPT_S = 30 * 86_400.0  # ended codes are forgotten after this
WELCOME = "The owner let you in: write to me any time."
DECLINED = "The owner did not let you in."

_CODE_COLUMNS = (
    "code, channel, kind, sender_id, name, username, chat_key, created_at, expires_at, status"
)


def wall_clock() -> float:
    """Now, in seconds since the epoch: codes and locks count from it (tests move it on)."""
    return time.time()


@dataclass(frozen=True)
class Code:
    """A request (`sender_*`: the stranger who asked) or an invite (`sender_*`: empty until
    someone sends it)."""

    code: str
    channel: str
    kind: str  # "request" or "invite"
    sender_id: str
    name: str
    username: str
    chat_key: str  # the stranger's private chat, where they are told the answer
    created_at: float
    expires_at: float
    status: str = "pending"  # or "approved", "denied"

    @property
    def who(self) -> str:
        """The person as the owner reads them: "Mallory (@mallory, telegram id 777)"."""
        if self.kind == "invite" and not self.sender_id:
            return "an invite, not used yet"
        handle = f"@{self.username}, " if self.username else ""
        return f"{self.name or 'someone'} ({handle}{self.channel} id {self.sender_id})"


@dataclass(frozen=True)
class Member:
    """A person or group let in."""

    channel: str
    kind: str  # "person" or "group"
    id: str
    name: str
    username: str
    approved_by: str
    approved_at: float

    def line(self) -> str:
        handle = f" @{self.username}" if self.username else ""
        name = f" {self.name}" if self.name else ""
        day = time.strftime("%Y-%m-%d", time.localtime(self.approved_at))
        return f"{self.channel} {self.kind} {self.id}{name}{handle}, {self.approved_by} {day}"


@dataclass(frozen=True)
class Outcome:
    """What a step did. ask: new, waiting, locked, full. redeem: in, own, wrong, locked_now,
    locked. decide: approved, denied, expired, unknown, decided (before), invite."""

    verdict: str
    code: Code | None = None
    left: int = 0  # wrong codes left before the lock


class Pairings:
    """The three tables, each step one transaction."""

    def __init__(self, db: StateDB) -> None:
        self._db = db
        self._outbox = Outbox(db)

    @staticmethod
    def now() -> float:
        return wall_clock()

    async def members(self, channel: str | None = None) -> list[Member]:
        return await self._db.read(lambda conn: read_members(conn, channel))

    async def codes(self, channel: str | None = None) -> list[Code]:
        """The codes still open (pending and not expired), oldest first."""
        now = self.now()
        return await self._db.read(lambda conn: open_codes(conn, now, channel))

    async def ask(self, msg: IncomingMessage) -> Outcome:
        """A stranger's private message: a new request, unless one is open (a code at most
        once an hour), their pairing is locked, or too many requests are open."""
        now, channel, sender = self.now(), msg.chat.channel, msg.sender_id

        def step(conn: sqlite3.Connection) -> Outcome:
            _forget_old(conn, now)
            if _locked_until(conn, channel, sender) > now:
                return Outcome("locked")
            row = conn.execute(
                f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE channel = ? AND kind ="
                " 'request' AND sender_id = ? AND status = 'pending' AND expires_at > ?",
                (channel, sender, now),
            ).fetchone()
            if row is not None:
                return Outcome("waiting", Code(*row))
            if len(open_codes(conn, now, channel, kind="request")) >= MAX_PENDING:
                return Outcome("full")
            who = (sender, msg.sender_name, msg.sender_username, msg.chat.key)
            code = Code(_unused_code(conn), channel, "request", *who, now, now + CODE_LIFE_S)
            _insert(conn, code)
            return Outcome("new", code)

        return await self._db.write(step)

    async def redeem(self, msg: IncomingMessage, typed: str) -> Outcome:
        """A stranger sent a code: an open invite of this channel lets them in; anything but
        their own request's code counts against them."""
        now, channel, sender = self.now(), msg.chat.channel, msg.sender_id

        def step(conn: sqlite3.Connection) -> Outcome:
            _forget_old(conn, now)
            if _locked_until(conn, channel, sender) > now:
                return Outcome("locked")
            found = _code(conn, typed)
            live = found is not None and found.status == "pending" and found.expires_at > now
            if found is not None and live and found.channel == channel:
                if found.kind == "invite":
                    conn.execute(
                        "UPDATE pairing_codes SET sender_id = ?, name = ?, username = ?,"
                        " chat_key = ?, status = 'approved', decided_by = 'invite',"
                        " decided_at = ? WHERE code = ?",
                        (sender, msg.sender_name, msg.sender_username, msg.chat.key, now, typed),
                    )
                    how = f"invite {shown(typed)}"
                    who = (msg.sender_name, msg.sender_username)
                    _admit(conn, Member(channel, "person", sender, *who, how, now))
                    return Outcome("in", _code(conn, typed))
                if found.sender_id == sender:
                    return Outcome("own", found)
            return _wrong(conn, channel, sender, now)

        return await self._db.write(step)

    async def decide(
        self, typed: str, approve: bool, by: str, channel: str | None = None
    ) -> Outcome:
        """The owner's answer to a request (by button, /pair or `agent pairing`; `channel`:
        only a code of that channel); the stranger's line waits in the outbox, written in the
        same transaction. Denying an invite withdraws it."""
        now, code = self.now(), normal(typed)

        def step(conn: sqlite3.Connection) -> Outcome:
            found = _code(conn, code)
            if found is None or (channel is not None and found.channel != channel):
                return Outcome("unknown")
            if found.status != "pending":
                return Outcome("decided", found)
            if found.expires_at <= now:
                return Outcome("expired", found)
            if found.kind == "invite" and approve:
                return Outcome("invite", found)
            status = "approved" if approve else "denied"
            conn.execute(
                "UPDATE pairing_codes SET status = ?, decided_by = ?, decided_at = ?"
                " WHERE code = ?",
                (status, by, now, code),
            )
            if found.kind == "request":
                if approve:
                    who = (found.sender_id, found.name, found.username)
                    _admit(conn, Member(found.channel, "person", *who, by, now))
                else:
                    _lock(conn, found.channel, found.sender_id, now + DENIED_LOCK_S)
                part = OutgoingPart(text=WELCOME if approve else DECLINED)
                chat = ChatRef.parse(found.chat_key)
                self._outbox.insert(conn, chat, [part], inbox_id=None, deliver_within_s=CODE_LIFE_S)
            return Outcome(status, found)

        return await self._db.write(step)

    async def invite(self, channel: str) -> Code:
        """A code the owner hands out: the first stranger who sends it within the hour is in."""
        now = self.now()

        def step(conn: sqlite3.Connection) -> Code:
            expires = now + CODE_LIFE_S
            code = Code(_unused_code(conn), channel, "invite", "", "", "", "", now, expires)
            _insert(conn, code)
            return code

        return await self._db.write(step)

    async def add_group(self, chat: ChatRef, by: str) -> None:
        """A group the owner added from inside it: everyone there may talk to the bot."""
        now = self.now()
        await self._db.write(
            lambda conn: _admit(conn, Member(chat.channel, "group", chat.chat_id, "", "", by, now))
        )

    async def revoke(self, channel: str, member_id: str) -> int:
        """Take a person or group out again; how many rows went."""
        return await self._db.write(
            lambda conn: (
                conn.execute(
                    "DELETE FROM paired WHERE channel = ? AND id = ?", (channel, member_id)
                ).rowcount
            )
        )


def read_members(conn: sqlite3.Connection, channel: str | None = None) -> list[Member]:
    rows = conn.execute(
        "SELECT channel, kind, id, name, username, approved_by, approved_at FROM paired"
        " WHERE channel = COALESCE(?, channel) ORDER BY approved_at",
        (channel,),
    ).fetchall()
    return [Member(*row) for row in rows]


def open_codes(
    conn: sqlite3.Connection, now: float, channel: str | None = None, kind: str | None = None
) -> list[Code]:
    rows = conn.execute(
        f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE status = 'pending' AND expires_at > ?"
        " AND channel = COALESCE(?, channel) AND kind = COALESCE(?, kind) ORDER BY created_at",
        (now, channel, kind),
    ).fetchall()
    return [Code(*row) for row in rows]


def paired_lines(conn: sqlite3.Connection) -> list[str]:
    """Who was let in, and the codes still open, as `agent pairing list` and `agent doctor`
    show them."""
    members, codes = read_members(conn), open_codes(conn, wall_clock())
    lines = [f"let in: {member.line()}" for member in members]
    return lines + [f"open code {shown(c.code)} ({c.channel}): {c.who}" for c in codes]


def _code(conn: sqlite3.Connection, code: str) -> Code | None:
    row = conn.execute(
        f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE code = ?", (code,)
    ).fetchone()
    return Code(*row) if row is not None else None


def _unused_code(conn: sqlite3.Connection) -> str:
    while True:
        code = new_code()
        if conn.execute("SELECT 1 FROM pairing_codes WHERE code = ?", (code,)).fetchone() is None:
            return code


def _insert(conn: sqlite3.Connection, code: Code) -> None:
    conn.execute(
        f"INSERT INTO pairing_codes ({_CODE_COLUMNS}) VALUES ({', '.join('?' * 10)})",
        astuple(code),
    )


def _admit(conn: sqlite3.Connection, member: Member) -> None:
    conn.execute(
        "INSERT INTO paired VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, kind, id) DO UPDATE"
        " SET name = excluded.name, username = excluded.username,"
        " approved_by = excluded.approved_by, approved_at = excluded.approved_at",
        astuple(member),
    )
    conn.execute(
        "DELETE FROM pairing_locks WHERE channel = ? AND sender_id = ?", (member.channel, member.id)
    )


def _forget_old(conn: sqlite3.Connection, now: float) -> None:
    """Codes ended, and strangers' wrong-code counts and locks over, KEPT_S ago: forgotten,
    or each stranger who ever wrote would keep a row for good. Run on both a request and a
    code, so that strangers who only guess codes are forgotten too."""
    long_ago = now - KEPT_S
    conn.execute("DELETE FROM pairing_codes WHERE expires_at < ?", (long_ago,))
    conn.execute(
        "DELETE FROM pairing_locks WHERE locked_until < ? AND first_wrong_at < ?",
        (long_ago, long_ago),
    )


def _locked_until(conn: sqlite3.Connection, channel: str, sender: str) -> float:
    row = conn.execute(
        "SELECT locked_until FROM pairing_locks WHERE channel = ? AND sender_id = ?",
        (channel, sender),
    ).fetchone()
    return float(row[0]) if row else 0.0


def _lock(conn: sqlite3.Connection, channel: str, sender: str, until: float) -> None:
    conn.execute(
        "INSERT INTO pairing_locks (channel, sender_id, locked_until) VALUES (?, ?, ?)"
        " ON CONFLICT (channel, sender_id) DO UPDATE SET wrong = 0, first_wrong_at = 0,"
        " locked_until = excluded.locked_until",
        (channel, sender, until),
    )


def _wrong(conn: sqlite3.Connection, channel: str, sender: str, now: float) -> Outcome:
    """One more wrong code; the WRONG_LIMIT-th within the window locks the sender."""
    row = conn.execute(
        "SELECT wrong, first_wrong_at FROM pairing_locks WHERE channel = ? AND sender_id = ?",
        (channel, sender),
    ).fetchone()
    wrong, since = (int(row[0]), float(row[1])) if row else (0, 0.0)
    if now - since > WRONG_WINDOW_S:
        wrong, since = 0, now
    wrong += 1
    if wrong >= WRONG_LIMIT:
        _lock(conn, channel, sender, now + LOCK_S)
        return Outcome("locked_now")
    conn.execute(
        "INSERT INTO pairing_locks (channel, sender_id, wrong, first_wrong_at) VALUES"
        " (?, ?, ?, ?) ON CONFLICT (channel, sender_id) DO UPDATE SET wrong = excluded.wrong,"
        " first_wrong_at = excluded.first_wrong_at",
        (channel, sender, wrong, since),
    )
    return Outcome("wrong", left=WRONG_LIMIT - wrong)
