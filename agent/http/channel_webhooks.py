"""POST /channels/NAME/webhook: a chat platform's update posted to pinclaw (Telegram with
`[channels.telegram] mode = "webhook"`), handed to the running channel of that name, which
checks the platform's secret and stores the message before the status it returns is sent.
The channel is looked up at each request: one a reload restarted is the one asked."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from agent.http.config import HttpSettings
from agent.http.server import Refusal, read_body
from agent.runtime.channel_runtime import ChannelRuntime
from channels.base import TakesWebhooks

log = logging.getLogger(__name__)

WEBHOOK_ROUTE = "/channels/{name}/webhook"


def channel_webhooks(
    runtimes: Mapping[str, ChannelRuntime], settings: Callable[[], HttpSettings]
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def take(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        runtime = runtimes.get(name)
        channel = runtime.channel if runtime is not None else None
        if not isinstance(channel, TakesWebhooks) or not channel.takes_webhooks:
            log.warning("http: /channels/%s/webhook: 404 no channel takes webhooks there", name)
            return web.Response(status=404)
        try:
            body = await read_body(request, settings())
        except Refusal as refused:
            log.warning("http: /channels/%s/webhook: %d %s", name, refused.status, refused.why)
            return web.Response(status=refused.status)
        return web.Response(status=await channel.receive_webhook(request.headers, body))

    return take
