"""Application commands and interactions of the Discord double.

Slash command registration (global and per guild), the INTERACTION_CREATE a user's ``/name``
or button press sends, and the bot's answers to it: the callback (once per interaction),
followups and edits of ``@original`` through the interaction webhook. A visible answer is
also recorded in ``World.sent``; an UPDATE_MESSAGE edits the pressed message.
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web
from fakes.discord_cdn import FilePart, read_body
from fakes.discord_gateway import (
    EVERYONE_PERMISSIONS,
    Gateway,
    application_payload,
    member_payload,
    user_payload,
)
from fakes.discord_models import ApiError, Route, check_content, json_response
from fakes.discord_state import World, echo

__all__ = ["InteractionRoutes"]


class InteractionRoutes:
    """Handlers for ``/applications``, ``/interactions`` and ``/webhooks``; builds invocations."""

    def __init__(self, world: World, gateway: Gateway) -> None:
        self._world = world
        self._gateway = gateway

    def routes(self, api: str) -> list[Route]:
        """(method, path, handler) under ``api`` (the ``/api/v{version}`` prefix)."""
        app = api + "/applications/{app_id}"
        hook = api + "/webhooks/{app_id}/{token}"
        return [
            ("GET", api + "/oauth2/applications/@me", self._application),
            ("GET", api + "/applications/@me", self._application),
            ("GET", app + "/commands", self._get_commands),
            ("PUT", app + "/commands", self._put_commands),
            ("POST", app + "/commands", self._post_command),
            ("GET", app + "/guilds/{guild_id}/commands", self._get_commands),
            ("PUT", app + "/guilds/{guild_id}/commands", self._put_commands),
            ("POST", app + "/guilds/{guild_id}/commands", self._post_command),
            ("POST", api + "/interactions/{interaction_id}/{token}/callback", self._callback),
            ("POST", hook, self._followup),
            ("GET", hook + "/messages/{message_id}", self._hook_get),
            ("PATCH", hook + "/messages/{message_id}", self._hook_edit),
        ]

    def invoke(
        self, uid: str, name: str, guild_id: str | None, channel_id: str | None, username: str
    ) -> dict[str, Any]:
        """The INTERACTION_CREATE payload for ``uid`` running ``/name`` (caller holds the
        lock); its token is remembered so the answer can be checked and recorded."""
        world = self._world
        if guild_id is None:
            cid, gid = world.dm_channel(uid, username), None
        else:
            gid, cid = guild_id, str(channel_id)
            if world.channels.get(cid, {}).get("guild_id") != gid:
                raise ValueError(f"unknown channel {cid} in guild {gid}: list it in add_guild")
        data = {"id": world.ids.next(), "name": name, "type": 1}
        return self._interaction(2, data, uid, username, cid, gid)

    def press(self, uid: str, message_id: str, custom_id: str, username: str) -> dict[str, Any]:
        """The INTERACTION_CREATE (type 3, MESSAGE_COMPONENT) for ``uid`` pressing the button
        ``custom_id`` under the bot's message (caller holds the lock). Only a button the
        message shows now can be pressed, and in a DM only by its recipient."""
        world = self._world
        msg = world.messages.get(message_id)
        if msg is None:
            raise ValueError(f"no message {message_id} (deleted or never sent)")
        shown = [
            item.get("custom_id")
            for row in msg.get("components") or []
            for item in row.get("components") or []
            if item.get("type") == 2
        ]
        if custom_id not in shown:
            raise ValueError(f"message {message_id} shows no button {custom_id!r}: {shown}")
        cid, gid = msg["channel_id"], msg.get("guild_id")
        if gid is None and world.dm_by_user.get(uid) != cid:
            raise ValueError(f"user {uid} cannot see the DM channel {cid}")
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, data, uid, username, cid, gid)
        payload["message"] = copy.deepcopy(msg)
        world.invoked[payload["token"]]["message_id"] = message_id
        return payload

    def _interaction(
        self,
        kind: int,
        data: dict[str, Any],
        uid: str,
        username: str,
        cid: str,
        gid: str | None,
    ) -> dict[str, Any]:
        """An interaction of ``kind`` by ``uid`` in channel ``cid``; its token is remembered
        so the answer can be checked and recorded."""
        world = self._world
        user = world.users.setdefault(uid, user_payload(uid, username))
        iid, token = world.ids.next(), f"itoken-{world.ids.next()}"
        world.invoked[token] = {"channel_id": cid, "guild_id": gid, "original": None}
        payload: dict[str, Any] = {
            "id": iid,
            "application_id": world.bot_id,
            "type": kind,
            "token": token,
            "version": 1,
            "data": data,
            "channel_id": cid,
            "channel": copy.deepcopy(world.channels[cid]),
            "locale": "en-US",
            "app_permissions": EVERYONE_PERMISSIONS,
            "attachment_size_limit": world.upload_limit,
            "entitlements": [],
            "authorizing_integration_owners": {"0" if gid else "1": gid or uid},
            "context": 0 if gid else 1,
        }
        if gid:
            member = member_payload(world.guilds[gid]["joined_at"])
            payload.update(
                guild_id=gid,
                guild_locale="en-US",
                member={**member, "user": user, "permissions": EVERYONE_PERMISSIONS},
            )
        else:
            payload["user"] = user
        return payload

    async def _application(self, _: web.Request) -> web.Response:
        return json_response(application_payload(self._world.bot_user))

    # ---- commands ----

    def _command_key(self, request: web.Request) -> str:
        return request.match_info.get("guild_id", "global")

    def _command(self, key: str, data: dict[str, Any], old: list[dict[str, Any]]) -> dict[str, Any]:
        """Fill in what Discord adds; a name already registered keeps its id, like Discord."""
        same = next((c for c in old if c["name"] == data.get("name")), None)
        cmd = {
            "type": 1,
            "description": "",
            "options": [],
            "default_member_permissions": None,
            "dm_permission": True,
            "nsfw": False,
            **data,
            "id": same["id"] if same else self._world.ids.next(),
            "application_id": self._world.bot_id,
            "version": self._world.ids.next(),
        }
        if key != "global":
            cmd["guild_id"] = key
        return cmd

    async def _get_commands(self, request: web.Request) -> web.Response:
        with self._world.lock:
            return json_response(self._world.commands.get(self._command_key(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        key, body = self._command_key(request), await request.json()
        with self._world.lock:
            old = self._world.commands.get(key, [])
            self._world.commands[key] = [self._command(key, c, old) for c in body]
            return json_response(self._world.commands[key])

    async def _post_command(self, request: web.Request) -> web.Response:
        key, body = self._command_key(request), await request.json()
        with self._world.lock:
            old = self._world.commands.setdefault(key, [])
            cmd = self._command(key, body, old)
            existed = any(c["id"] == cmd["id"] for c in old)
            old[:] = [c for c in old if c["id"] != cmd["id"]] + [cmd]
        return json_response(cmd, status=200 if existed else 201)

    # ---- answers ----

    async def _callback(self, request: web.Request) -> web.Response:
        """The one response an interaction gets: 4 (a message; flags 64: only the presser
        sees it), 5 (thinking...), 6 (nothing visible) or 7 (edit the pressed message)."""
        world = self._world
        body, files = await read_body(request, world.upload_limit)
        kind = int(body.get("type", 0))
        data = body.get("data") or {}
        invoked = world.invoked.get(request.match_info["token"])
        with world.lock:
            if invoked is not None and invoked.get("responded"):
                raise ApiError(400, "Interaction has already been acknowledged.", 40060)
            if invoked is not None:
                invoked["responded"] = True
            world.interactions.append(
                {
                    "interaction_id": request.match_info["interaction_id"],
                    "token": request.match_info["token"],
                    "type": kind,
                    "data": data,
                    "files": [(n, b) for n, b, _ in files],
                }
            )
        if invoked is not None and kind == 4:  # CHANNEL_MESSAGE_WITH_SOURCE: the original
            await self._answer(invoked, data, files)
        if invoked is not None and kind == 7:  # UPDATE_MESSAGE: the pressed message
            await self._update_pressed(invoked, data)
        interaction = {
            "id": request.match_info["interaction_id"],
            "type": 3 if invoked is not None and "message_id" in invoked else 2,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
        }
        if "with_response" not in request.query:
            return web.Response(status=204)
        return json_response({"interaction": interaction, "resource": {"type": kind}})

    async def _update_pressed(self, invoked: dict[str, Any], payload: dict[str, Any]) -> None:
        """Type 7: the message whose button was pressed takes the new content, embeds and
        components (an empty list removes the buttons)."""
        mid = invoked.get("message_id")
        if mid is None:
            raise ApiError(400, "Interaction has no message to update", 50035)
        with self._world.lock:
            msg = self._world.message(mid)
            if "content" in payload:
                msg["content"] = check_content(payload["content"])
            if "embeds" in payload:
                msg["embeds"] = payload["embeds"] or []
            snapshot = self._world.keep_edit(msg, payload)
        await echo(self._gateway, "MESSAGE_UPDATE", snapshot)

    async def _answer(
        self,
        invoked: dict[str, Any],
        payload: dict[str, Any],
        files: list[FilePart],
        original: bool = True,
    ) -> dict[str, Any]:
        """Post the bot's answer (not a reply) and echo it; ``original``: it becomes
        ``@original``. Returns the message as sent."""
        with self._world.lock:
            cid, gid = invoked["channel_id"], invoked["guild_id"]
            msg = self._world.bot_message(cid, gid, payload, files)
            snapshot = self._world.keep_sent(msg, payload, files)
        if original:
            invoked["original"] = snapshot["id"]
        await echo(self._gateway, "MESSAGE_CREATE", snapshot)
        return snapshot

    def _invocation(self, request: web.Request) -> dict[str, Any]:
        invoked = self._world.invoked.get(request.match_info["token"])
        if invoked is None:
            raise ApiError(404, "Unknown Webhook", 10015)
        return invoked

    async def _followup(self, request: web.Request) -> web.Response:
        """A followup; the first one after a deferred response becomes the original."""
        payload, files = await read_body(request, self._world.upload_limit)
        invoked = self._invocation(request)
        msg = await self._answer(invoked, payload, files, invoked["original"] is None)
        if request.query.get("wait") in ("1", "true", "True"):
            return json_response(msg)
        return web.Response(status=204)

    def _hook_message_id(self, request: web.Request) -> str | None:
        mid = request.match_info["message_id"]
        return self._invocation(request)["original"] if mid == "@original" else mid

    async def _hook_get(self, request: web.Request) -> web.Response:
        with self._world.lock:
            return json_response(self._world.message(self._hook_message_id(request) or ""))

    async def _hook_edit(self, request: web.Request) -> web.Response:
        """Edit an interaction's message; editing a deferred ``@original`` creates it."""
        payload, files = await read_body(request, self._world.upload_limit)
        invoked = self._invocation(request)
        mid = self._hook_message_id(request)
        if mid is None:
            return json_response(await self._answer(invoked, payload, files))
        with self._world.lock:
            msg = self._world.message(mid)
            if "content" in payload:
                msg["content"] = check_content(payload["content"])
            snapshot = self._world.keep_edit(msg, payload)
        await echo(self._gateway, "MESSAGE_UPDATE", snapshot)
        return json_response(snapshot)
