"""POST /hooks/NAME: a signed webhook delivery made a message nobody typed, in the inbox of
the chat its hook names (or the hook's own silent chat), before it is answered 202.

In order, each refusal a status, a body and one log line, nothing stored: an unknown hook
404; not JSON 415; a body too big 413 or too slow 408 (server.py); its secret not set 503; a
signature missing, wrong or stale 401; a body that is not JSON 400; the target's chat not
known yet 503. An event the hook does not take, or a payload its `match` leaves out, is
answered 200 "ignored" and not run. A delivery seen before (the key signatures.py gives:
the generic scheme's signature, GitHub's delivery id) is answered 200 "duplicate" and not
run twice: the inbox keeps one row per message id. The payload is someone else's words:
the message is marked forwarded from the hook (the turn starts tainted) and the model reads
it fenced as untrusted content (agent/durable/triggers.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from agent.config import Settings
from agent.durable.file.state_db import Transaction
from agent.durable.file.state_errors import StateError
from agent.durable.triggers import Trigger
from agent.http.config import HookSettings
from agent.http.headless_channels import HOOK_CHANNEL
from agent.http.payloads import render, unmatched
from agent.http.server import Refusal, json_of, read_body
from agent.http.signatures import verify
from agent.proactive.schedule_book import private_chat
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.intake import repair_text
from agent.security import Scrubber
from channels.base import ChatRef, IncomingMessage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """Where a hook's turn runs and as whom."""

    runtime: ChannelRuntime
    chat: ChatRef
    sender_id: str
    sender_name: str


class Hooks:
    def __init__(
        self,
        settings: Callable[[], Settings],  # the daemon's, as a reload leaves them
        runtimes: Mapping[str, ChannelRuntime],  # the chat channels that started
        silent: ChannelRuntime,  # the hooks' own channel (headless_channels.py)
        scrub: Scrubber,
        *,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings, self._runtimes, self._silent = settings, runtimes, silent
        self._scrub, self._environ, self._clock = scrub, environ, clock

    async def handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            status, said = await self._take(name, request)
        except Refusal as refused:
            log.warning("http: hook %s: %d %s", name, refused.status, refused.why)
            response = web.json_response({"error": refused.why}, status=refused.status)
            response.force_close()  # a body left unread (too big, too slow) is not waited for
            return response
        return web.json_response({"status": said}, status=status)

    async def _take(self, name: str, request: web.Request) -> tuple[int, str]:
        settings = self._settings()
        hook = settings.http.hooks.get(name)
        if hook is None:
            raise Refusal(404, "no such hook")
        if request.content_type != "application/json":
            raise Refusal(415, f"content type {request.content_type}; application/json only")
        body = await read_body(request, settings.http)
        secret = self._environ.get(hook.secret_name(name), "")
        if not secret:
            raise Refusal(503, f"its secret {hook.secret_name(name)} is not set (agent.env)")
        now = self._clock()
        verdict = verify(
            hook.scheme, secret, request.headers, body, now=now, window_s=hook.window_s
        )
        if not verdict.ok:
            raise Refusal(401, verdict.why)
        event = request.headers.get("X-GitHub-Event" if hook.scheme == "github" else "X-Event", "")
        if hook.events and event not in hook.events:
            log.info("http: hook %s: event %r ignored", name, event)
            return 200, "ignored"
        payload = json_of(body)
        if (path := unmatched(payload, hook.match)) is not None:
            log.info("http: hook %s: %s does not match; ignored", name, path)
            return 200, "ignored"
        target = await self._target(name, hook)
        text = self._scrub(repair_text(render(hook.template, payload)))
        msg = IncomingMessage(
            target.chat,
            target.sender_id,
            target.sender_name,
            text,
            message_id=f"hook:{name}:{verdict.key}",
            forwarded_from=f"the webhook {name}",  # someone else's words: the turn is tainted
        )
        trigger = Trigger("webhook", 0, set_by=f"hook {name}", due_at=now, reading=event[:100])
        try:
            stored = await target.runtime.enqueue_triggered(msg, trigger, alongside=_nothing)
        except StateError as exc:
            raise Refusal(503, f"not stored: {exc}") from None
        if not stored:
            log.info("http: hook %s: delivery %s seen before; not run again", name, verdict.key)
            return 200, "duplicate"
        log.info("http: hook %s: delivery %s in %s", name, verdict.key, target.chat.key)
        return 202, "accepted"

    async def _target(self, name: str, hook: HookSettings) -> Target:
        """The silent chat, or the private chat of the person `to` names, as them."""
        if not hook.to:
            return Target(self._silent, ChatRef(HOOK_CHANNEL, name), f"hook:{name}", name)
        person = self._settings().people.get(hook.to)
        if person is None:
            raise Refusal(503, f"to = {hook.to!r} is not a [people] name")
        channels = [hook.channel] if hook.channel else list(self._runtimes)
        for channel in channels:
            runtime, user_id = self._runtimes.get(channel), person.id_on(channel)
            if runtime is None or not user_id or not runtime.is_allowed_sender(user_id):
                continue
            chat = await private_chat(runtime.store.db, channel, user_id)
            if chat is not None:
                return Target(runtime, chat, user_id, hook.to)
        raise Refusal(503, f"no private chat of {hook.to} is known on a running channel")


def _nothing(conn: Transaction) -> None:
    return None
