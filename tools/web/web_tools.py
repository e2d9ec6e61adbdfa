"""The web tools a configuration offers: web_fetch and web_search, or none when the owner
turned the web off (`[web] enabled = false`) or took the network from the agent
(`[security] sandbox_network = false`). web_search only once a provider is chosen: a tool
that could only answer "not configured" would cost every request its schema."""

from __future__ import annotations

from tools.base import Tool
from tools.config import WebSettings
from tools.web.fetch_tool import WebFetch
from tools.web.search_tool import WebSearch


def web_tools(settings: WebSettings, *, network: bool) -> list[Tool]:
    if not (settings.enabled and network):
        return []
    searching = WebSearch(settings).tools() if settings.search_provider else []
    return [*WebFetch(settings).tools(), *searching]
