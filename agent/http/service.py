"""`[http]` in the daemon: the server started after the chat channels (a hook's target is
a chat of theirs) with its routes (the webhooks, OpenAI's API), and stopped first at
shutdown (no new requests, then the runtimes drain). A port that cannot be bound is said and
the rest runs on."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.app import App
from agent.runtime.channel_runtime import ChannelRuntime
from channels.base import TakesWebhooks

if TYPE_CHECKING:
    from agent.http.server import HttpServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpIn:
    server: HttpServer
    runtimes: tuple[
        ChannelRuntime, ...
    ]  # the silent hooks' and the API's, drained with the channels'


async def start_http(app: App, runtimes: Mapping[str, ChannelRuntime]) -> HttpIn | None:
    """The server serving, or None when `[http]` is off or its address cannot be bound."""
    settings = app.settings.http
    if not settings.enabled:
        for name, runtime in runtimes.items():
            if isinstance(runtime.channel, TakesWebhooks) and runtime.channel.takes_webhooks:
                log.error("%s takes its updates by webhook, but [http] is off: enable it", name)
        return None
    # Imported only now: aiohttp and the routes cost a daemon without [http] its start.
    from aiohttp import web

    from agent.http.channel_webhooks import WEBHOOK_ROUTE, channel_webhooks
    from agent.http.chat_api import ChatApi
    from agent.http.headless_channels import ApiChannel, HookChannel
    from agent.http.hooks import Hooks
    from agent.http.server import HttpServer
    from agent.runtime.turn_setup import Access

    silent = app.runtime(HookChannel(), Access(open_to_all=True))
    await silent.resume()  # silent turns an earlier run left pending
    api = app.runtime(ApiChannel(), Access(open_to_all=True))  # the key says who: ChatApi
    hooks = Hooks(lambda: app.settings, runtimes, silent, app.scrub)
    chat = ChatApi(lambda: app.settings, api, app.scrub)
    routes = [
        web.post("/hooks/{name}", hooks.handle),
        web.get("/v1/models", chat.models),
        web.post("/v1/chat/completions", chat.completions),
        web.post(WEBHOOK_ROUTE, channel_webhooks(runtimes, lambda: app.settings.http)),
    ]
    server = HttpServer(settings, routes)
    try:
        await server.start()
    except OSError as exc:
        log.error("[http]: cannot serve on %s:%d: %s", settings.host, settings.port, exc)
        await silent.drain(0)
        return None
    return HttpIn(server, (silent, api))
