"""REST routes of the Discord double for users, channels and messages.

Sending, fetching, editing and deleting messages, typing, DMs and reactions: as strict as
Discord where an adapter can go wrong (empty or too long content, unknown reply targets,
editing someone else's message), and each change is echoed over the gateway like Discord does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from fakes.discord_cdn import read_body
from fakes.discord_gateway import Gateway
from fakes.discord_models import ApiError, Route, check_content, form_error, json_response
from fakes.discord_state import World, echo

__all__ = ["MessageRoutes"]


class MessageRoutes:
    """Handlers for ``/users``, ``/channels`` and their messages; ``routes`` lists them."""

    def __init__(self, world: World, gateway: Gateway) -> None:
        self._world = world
        self._gateway = gateway

    def routes(self, api: str) -> list[Route]:
        """(method, path, handler) under ``api`` (the ``/api/v{version}`` prefix)."""
        message = api + "/channels/{channel_id}/messages/{message_id}"
        return [
            ("GET", api + "/users/@me", self._me),
            ("POST", api + "/users/@me/channels", self._create_dm),
            ("GET", api + "/users/{user_id}", self._get_user),
            ("GET", api + "/channels/{channel_id}", self._get_channel),
            ("POST", api + "/channels/{channel_id}/typing", self._typing),
            ("POST", api + "/channels/{channel_id}/messages", self._send),
            ("GET", message, self._get),
            ("PATCH", message, self._edit),
            ("DELETE", message, self._delete),
            ("PUT", message + "/reactions/{emoji}/@me", self._react),
            ("DELETE", message + "/reactions/{emoji}/@me", self._react),
        ]

    async def _react(self, request: web.Request) -> web.Response:
        """The bot's own reaction on a message, added (PUT) or taken off (DELETE)."""
        cid, mid = request.match_info["channel_id"], request.match_info["message_id"]
        emoji = unquote(request.match_info["emoji"])  # aiohttp decodes; a literal % stays
        with self._world.lock:
            msg = self._world.messages.get(mid)
            if msg is None or msg["channel_id"] != cid:
                raise ApiError(404, "Unknown Message", 10008)
            if not emoji or emoji.isascii():
                raise ApiError(400, "Unknown Emoji", 10014)
            self._world.reactions.append((mid, "+" if request.method == "PUT" else "-", emoji))
        return web.Response(status=204)

    async def _me(self, _: web.Request) -> web.Response:
        return json_response({**self._world.bot_user, "verified": True, "mfa_enabled": False})

    async def _get_user(self, request: web.Request) -> web.Response:
        with self._world.lock:
            user = self._world.users.get(request.match_info["user_id"])
        if user is None:
            raise ApiError(404, "Unknown User", 10013)
        return json_response(user)

    async def _create_dm(self, request: web.Request) -> web.Response:
        uid = str((await request.json()).get("recipient_id"))
        with self._world.lock:
            cid = self._world.dm_channel(uid, None)
            return json_response(self._world.channels[cid])

    async def _get_channel(self, request: web.Request) -> web.Response:
        with self._world.lock:
            return json_response(self._world.channel(request.match_info["channel_id"]))

    async def _typing(self, request: web.Request) -> web.Response:
        with self._world.lock:
            channel = self._world.channel(request.match_info["channel_id"])
            self._world.typing.append(channel["id"])
        return web.Response(status=204)

    async def _send(self, request: web.Request) -> web.Response:
        world = self._world
        payload, files = await read_body(request, world.upload_limit)
        if not await world.gates.before(request, payload):
            return web.Response(status=499)  # its client is gone: nothing was created
        with world.lock:
            channel = world.channel(request.match_info["channel_id"])
            cid, gid = channel["id"], channel.get("guild_id")
            earlier = world.nonces.earlier(world.bot_id, payload)
            if earlier is not None:  # sent again: Discord returns the first, creates nothing
                return json_response(earlier)
            also = ("sticker_ids", "components", "poll")
            msg = world.bot_message(cid, gid, payload, files, also_counts=also)
            msg["tts"] = bool(payload.get("tts"))
            if payload.get("nonce") is not None:
                msg["nonce"] = payload["nonce"]
            reply_to: str | None = None
            raw_ref = payload.get("message_reference")
            if raw_ref and raw_ref.get("message_id") is not None:
                reply_to = str(raw_ref["message_id"])
                ref, target = world.reference(cid, gid, reply_to)
                if target is None and raw_ref.get("fail_if_not_exists", True):
                    raise form_error(
                        "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
                    )
                msg["type"], msg["message_reference"] = 19, ref
                msg["referenced_message"] = target
            snapshot = world.keep_sent(msg, payload, files, reply_to)
            world.nonces.keep(world.bot_id, payload, snapshot)
        await echo(self._gateway, "MESSAGE_CREATE", snapshot)
        await world.gates.after(payload)
        return json_response(snapshot)

    def _own_message(self, request: web.Request, action: str) -> dict[str, Any]:
        """The bot's message at this URL; someone else's is 403, like on Discord."""
        cid, mid = request.match_info["channel_id"], request.match_info["message_id"]
        msg = self._world.messages.get(mid)
        if msg is None or msg["channel_id"] != cid:
            raise ApiError(404, "Unknown Message", 10008)
        if msg["author"]["id"] != self._world.bot_id and action == "edit":
            raise ApiError(403, "Cannot edit a message authored by another user", 50005)
        if msg["author"]["id"] != self._world.bot_id:
            raise ApiError(403, "Missing Permissions", 50013)
        return msg

    async def _get(self, request: web.Request) -> web.Response:
        with self._world.lock:
            self._world.channel(request.match_info["channel_id"])
            return json_response(self._world.message(request.match_info["message_id"]))

    async def _edit(self, request: web.Request) -> web.Response:
        """Content, embeds and attachments; ``attachments`` lists the old files to keep."""
        world = self._world
        payload, files = await read_body(request, world.upload_limit)
        with world.lock:
            msg = self._own_message(request, "edit")
            record = world.sent[world.sent_index(msg["id"])]
            cid = msg["channel_id"]
            if "content" in payload:
                msg["content"] = check_content(payload["content"])
            if "embeds" in payload:
                msg["embeds"] = payload["embeds"] or []
            kept_files = list(record.attachments)
            if "attachments" in payload or files:
                ids = [str(a.get("id")) for a in payload.get("attachments") or []]
                keep = (
                    set(ids) if "attachments" in payload else {a["id"] for a in msg["attachments"]}
                )
                pairs = [
                    (a, f)
                    for a, f in zip(msg["attachments"], record.attachments, strict=True)
                    if a["id"] in keep
                ]
                new = [world.attachments.store(cid, n, b, t) for n, b, t in files]
                msg["attachments"] = [a for a, _ in pairs] + new
                kept_files = [f for _, f in pairs] + [(n, b) for n, b, _ in files]
            snapshot = world.keep_edit(msg, payload, tuple(kept_files))
        await echo(self._gateway, "MESSAGE_UPDATE", snapshot)
        return json_response(snapshot)

    async def _delete(self, request: web.Request) -> web.Response:
        world = self._world
        with world.lock:
            msg = self._own_message(request, "delete")
            index = world.sent_index(msg["id"])
            world.sent[index] = replace(world.sent[index], deleted=True)
            del world.messages[msg["id"]]
        gone = {"id": msg["id"], "channel_id": msg["channel_id"]}
        if msg.get("guild_id"):
            gone["guild_id"] = msg["guild_id"]
        await echo(self._gateway, "MESSAGE_DELETE", gone)
        return web.Response(status=204)
