"""The world of the Discord double: guilds, channels, users, messages and what the bot did.

One ``World`` is shared by the REST routes, the interaction routes and ``FakeDiscord``'s
injection methods; it builds every message payload so user and bot messages look alike.
Callers hold ``World.lock`` (re-entrant) around anything that reads or writes it.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fakes.discord_cdn import Attachments, FilePart
from fakes.discord_delivery import NonceBook, SendGates
from fakes.discord_gateway import (
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    Gateway,
    Snowflakes,
    dm_channel_payload,
    guild_payload,
    iso,
    member_payload,
    message_payload,
    ready_payload,
    text_channel_payload,
    thread_payload,
    user_payload,
)
from fakes.discord_models import ApiError, Call, ChannelSpec, SentMessage, check_content

__all__ = ["World", "echo"]

_MENTION = re.compile(r"<@!?(\d+)>")


async def echo(gateway: Gateway, event: str, msg: dict[str, Any]) -> None:
    """Discord also tells the bot about its own messages over the gateway."""
    intent = INTENT_GUILD_MESSAGES if msg.get("guild_id") else INTENT_DIRECT_MESSAGES
    await gateway.dispatch(event, msg, intent=intent, required=False)


class World:
    """Everything the fake knows, plus the recordings tests read (``sent``, ``calls``...)."""

    def __init__(
        self, *, bot_id: str, bot_name: str, upload_limit: int, origin: Callable[[], str]
    ) -> None:
        self.bot_id = bot_id
        self.bot_user = user_payload(bot_id, bot_name, bot=True)
        self.upload_limit = upload_limit
        self.ids = Snowflakes()
        self.lock = threading.RLock()
        self.attachments = Attachments(self.ids, origin)
        self.guilds: dict[str, dict[str, Any]] = {}  # id -> {"name", "joined_at"}
        self.channels: dict[str, dict[str, Any]] = {}  # every channel payload by id
        self.dm_by_user: dict[str, str] = {}
        self.users: dict[str, dict[str, Any]] = {bot_id: self.bot_user}
        self.messages: dict[str, dict[str, Any]] = {}  # every message payload by id
        self.invoked: dict[str, dict[str, Any]] = {}  # interaction token -> where, original
        # recordings
        self.sent: list[SentMessage] = []
        self.typing: list[str] = []
        self.reactions: list[tuple[str, str, str]] = []  # (message id, "+" or "-", emoji)
        self.commands: dict[str, list[dict[str, Any]]] = {}
        self.interactions: list[dict[str, Any]] = []
        self.calls: list[Call] = []
        self.nonces = NonceBook()  # enforce_nonce, as Discord does it
        self.gates = SendGates()  # message sends held for a test to strike

    def reset_recordings(self) -> None:
        """Forget what the bot did, keep the world (guilds, channels, messages)."""
        self.sent.clear()
        self.typing.clear()
        self.reactions.clear()
        self.commands.clear()
        self.interactions.clear()
        self.calls.clear()

    # ---- lookups that fail like Discord ----

    def channel(self, cid: str) -> dict[str, Any]:
        channel = self.channels.get(cid)
        if channel is None:
            raise ApiError(404, "Unknown Channel", 10003)
        return channel

    def message(self, mid: str) -> dict[str, Any]:
        msg = self.messages.get(mid)
        if msg is None:
            raise ApiError(404, "Unknown Message", 10008)
        return msg

    def sent_index(self, mid: str) -> int:
        return next(i for i, m in enumerate(self.sent) if m.message_id == mid)

    # ---- guilds, channels, users ----

    def add_guild(self, gid: str, name: str, channels: Iterable[ChannelSpec]) -> dict[str, Any]:
        """Create the guild and its channels (see ``FakeDiscord.add_guild``); its payload."""
        self.guilds[gid] = {"name": name, "joined_at": iso()}
        first_text: str | None = None
        for position, spec in enumerate(channels):
            info = dict(spec) if isinstance(spec, Mapping) else {"id": spec}
            cid = str(info["id"])
            kind = info.get("type", "text")
            cname = str(info.get("name", f"channel-{cid}"))
            if kind in ("thread", 11):
                parent = str(info.get("parent_id") or first_text or "")
                if not parent:
                    raise ValueError(f"thread {cid} needs a parent_id")
                self.channels[cid] = thread_payload(cid, gid, parent, cname, self.bot_id)
            else:
                first_text = first_text or cid
                self.channels[cid] = text_channel_payload(cid, gid, cname, position)
        return self.guild_payload(gid)

    def guild_channel(self, gid: str, cid: str, uid: str, thread: bool) -> dict[str, Any] | None:
        """Check that ``cid`` is a channel (or thread) of ``gid``; an unknown thread is created
        under the guild's first text channel and returned, else None."""
        if gid not in self.guilds:
            raise ValueError(f"unknown guild {gid}: call add_guild first")
        new_thread: dict[str, Any] | None = None
        channel = self.channels.get(cid)
        if channel is None and thread:
            parent = next(
                (
                    c["id"]
                    for c in self.channels.values()
                    if c.get("guild_id") == gid and c["type"] == 0
                ),
                None,
            )
            if parent is None:
                raise ValueError(f"guild {gid} has no text channel to hold thread {cid}")
            new_thread = thread_payload(cid, gid, parent, f"thread-{cid}", uid)
            channel = self.channels[cid] = new_thread
        if channel is None or channel.get("guild_id") != gid:
            raise ValueError(f"unknown channel {cid} in guild {gid}: list it in add_guild")
        if thread != (channel["type"] == 11):
            raise ValueError(f"channel {cid} is {'not ' if thread else ''}a thread")
        return new_thread

    def dm_channel(self, uid: str, username: str | None, *, bot: bool = False) -> str:
        """The DM channel with ``uid`` (user and channel created on first use)."""
        user = self.users.get(uid)
        if user is None:
            user = self.users[uid] = user_payload(uid, username or f"user{uid}", bot=bot)
        cid = self.dm_by_user.get(uid)
        if cid is None:
            cid = self.dm_by_user[uid] = self.ids.next()
            self.channels[cid] = dm_channel_payload(cid, user)
        return cid

    def ready_data(self) -> dict[str, Any]:
        with self.lock:
            return ready_payload(self.bot_user, list(self.guilds))

    def guild_payloads(self) -> list[dict[str, Any]]:
        with self.lock:
            return [self.guild_payload(gid) for gid in self.guilds]

    def guild_payload(self, gid: str) -> dict[str, Any]:
        info = self.guilds[gid]
        mine = [c for c in self.channels.values() if c.get("guild_id") == gid]
        return guild_payload(gid, info["name"], info["joined_at"], mine, self.bot_user)

    # ---- messages ----

    def _mentions(self, content: str, guild_id: str | None) -> list[dict[str, Any]]:
        found = []
        for uid in dict.fromkeys(_MENTION.findall(content)):
            user = self.users.get(uid)
            if user is not None:
                found.append({**user, "member": member_payload(iso())} if guild_id else user)
        return found

    def reference(
        self, cid: str, gid: str | None, ref_id: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A ``message_reference`` to ``ref_id`` and the message it points at (if known)."""
        ref: dict[str, Any] = {"type": 0, "message_id": ref_id, "channel_id": cid}
        if gid:
            ref["guild_id"] = gid
        target = self.messages.get(ref_id)
        if target is not None:
            target = {k: v for k, v in target.items() if k != "referenced_message"}
        return ref, target

    def _base_message(
        self, cid: str, gid: str | None, author: dict[str, Any], content: str
    ) -> dict[str, Any]:
        joined = self.guilds[gid]["joined_at"] if gid else None
        mentions = self._mentions(content, gid)
        return message_payload(self.ids.next(), cid, gid, author, content, mentions, joined)

    def user_message(
        self,
        cid: str,
        gid: str | None,
        uid: str,
        content: str,
        attachments: Sequence[tuple[str, bytes]] | None,
        reply_to: str | int | None,
    ) -> dict[str, Any]:
        """A stored message by user ``uid``; a reply pings the replied-to author."""
        msg = self._base_message(cid, gid, self.users[uid], content)
        store = self.attachments.store
        msg["attachments"] = [store(cid, n, b, None) for n, b in attachments or ()]
        if reply_to is not None:
            ref, target = self.reference(cid, gid, str(reply_to))
            msg["type"], msg["message_reference"] = 19, ref
            if target is not None:
                msg["referenced_message"] = target
                replied = target["author"]
                if all(m["id"] != replied["id"] for m in msg["mentions"]):
                    extra = {**replied, "member": member_payload(iso())} if gid else replied
                    msg["mentions"].append(extra)
        self.messages[msg["id"]] = msg
        return msg

    def bot_message(
        self,
        cid: str,
        gid: str | None,
        payload: dict[str, Any],
        files: list[FilePart],
        also_counts: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Build (not yet keep) a bot message from a request body: text, files, embeds, flags.
        Empty is an error unless text, files, embeds or a field in ``also_counts`` is set."""
        content = check_content(payload.get("content"))
        if not (content or files or any(payload.get(k) for k in ("embeds", *also_counts))):
            raise ApiError(400, "Cannot send an empty message", 50006)
        msg = self._base_message(cid, gid, self.bot_user, content)
        msg["attachments"] = [self.attachments.store(cid, n, b, t) for n, b, t in files]
        msg["embeds"] = payload.get("embeds") or []
        msg["components"] = payload.get("components") or []
        msg["flags"] = int(payload.get("flags") or 0)
        return msg

    def keep_sent(
        self,
        msg: dict[str, Any],
        payload: dict[str, Any],
        files: list[FilePart],
        reply_to: str | None = None,
    ) -> dict[str, Any]:
        """Store the bot's message and record it in ``sent``; a snapshot to send out."""
        self.messages[msg["id"]] = msg
        self.sent.append(
            SentMessage(
                message_id=msg["id"],
                channel_id=msg["channel_id"],
                content=msg["content"],
                reply_to=reply_to,
                attachments=tuple((n, b) for n, b, _ in files),
                payload=copy.deepcopy(payload),
                components=tuple(copy.deepcopy(msg["components"])),
            )
        )
        return copy.deepcopy(msg)

    def keep_edit(
        self,
        msg: dict[str, Any],
        payload: dict[str, Any],
        attachments: tuple[tuple[str, bytes], ...] | None = None,
    ) -> dict[str, Any]:
        """Apply the components of an edit (an empty list removes them), stamp the edit of
        the bot's ``msg`` and its record (``attachments``: the files now kept, None for
        unchanged); a snapshot to send out."""
        if "components" in payload:
            msg["components"] = payload["components"] or []
        msg["edited_timestamp"] = iso()
        index = self.sent_index(msg["id"])
        record = self.sent[index]
        self.sent[index] = replace(
            record,
            content=msg["content"],
            attachments=record.attachments if attachments is None else attachments,
            edits=record.edits + 1,
            payload=copy.deepcopy(payload),
            components=tuple(copy.deepcopy(msg["components"])),
        )
        return copy.deepcopy(msg)
