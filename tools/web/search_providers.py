"""The search APIs web_search asks: SearXNG (the owner's own instance, no key), Brave Search
and Tavily (keyed). Each turns a query into a list of hits, or raises SearchFailed with one
line the model can act on. Keys travel in headers only, never in a URL, a message or a log.

The providers' addresses are the owner's configuration, so they are not put through
web_fetch's guard: a SearXNG on this machine or the LAN is the usual case.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import SecretStr

from tools.config import WebSettings

if TYPE_CHECKING:
    import httpx

SNIPPET_CHARS = 300


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str


class SearchFailed(Exception):
    """The provider gave no results; the message is the one line the model gets."""


class Provider(Protocol):
    @property
    def name(self) -> str: ...

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[Hit]: ...


class _Text(HTMLParser):
    """The text of a snippet that carries markup (Brave marks matches with <strong>)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def plain(snippet: object) -> str:
    parser = _Text()
    parser.feed(snippet if isinstance(snippet, str) else "")
    parser.close()
    text = " ".join("".join(parser.parts).split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def _hits(rows: object, snippet_key: str, count: int) -> list[Hit]:
    found: list[Hit] = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("url"), str) and row["url"]:
            title = plain(row.get("title")) or row["url"]
            found.append(Hit(title, row["url"], plain(row.get(snippet_key))))
    return found[:count]


def _json(name: str, response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SearchFailed(f"{name} answered something that is not its JSON; check its URL")
    return data


def _code(response: httpx.Response) -> str:
    """The provider's own short error code, when its body has one ("RATE_LIMITED")."""
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("errors"), list) and data["errors"]:
        error = data["errors"][0]
    code = error.get("code") if isinstance(error, dict) else None
    return code[:60] if isinstance(code, str) and code.isascii() else ""


def failure(name: str, response: httpx.Response, key_variable: str = "") -> SearchFailed:
    """One line for an answer that is not a success, saying what to do about it."""
    status = response.status_code
    code = _code(response)
    said = f"HTTP {status}" + (f" {code}" if code else "")
    if status in (401, 403) or code.startswith("SUBSCRIPTION_TOKEN"):
        if key_variable:
            return SearchFailed(f"{name} refused the key ({said}); the owner checks {key_variable}")
        return SearchFailed(f"{name} refused the search ({said}); check the instance's settings")
    if status == 429 or code in ("RATE_LIMITED", "QUOTA_LIMITED"):
        return SearchFailed(f"{name}'s rate limit or quota is reached ({said}); try again later")
    if status >= 500:
        return SearchFailed(f"{name} failed ({said}); try again later")
    return SearchFailed(f"{name} did not take the search ({said})")


@dataclass(frozen=True)
class SearXNG:
    """GET {url}/search?q=…&format=json on the owner's instance (JSON must be enabled in
    its settings.yml, `search.formats`, or it answers 403)."""

    url: str
    name: str = "SearXNG"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[Hit]:
        endpoint = self.url.rstrip("/") + "/search"
        response = await client.get(endpoint, params={"q": query, "format": "json"})
        if response.status_code == 403:
            raise SearchFailed(
                "SearXNG refused JSON (HTTP 403); the owner enables json under "
                "search.formats in its settings.yml"
            )
        if not response.is_success:
            raise failure(self.name, response)
        return _hits(_json(self.name, response).get("results"), "content", count)


@dataclass(frozen=True)
class Brave:
    """GET {url}?q=…&count=N with the key in X-Subscription-Token; hits in web.results."""

    url: str
    key: SecretStr
    name: str = "Brave Search"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[Hit]:
        headers = {
            "X-Subscription-Token": self.key.get_secret_value(),
            "Accept": "application/json",
        }
        response = await client.get(self.url, params={"q": query, "count": count}, headers=headers)
        if not response.is_success:
            raise failure(self.name, response, "PINCLAW_WEB__BRAVE_API_KEY")
        web = _json(self.name, response).get("web")
        return _hits(web.get("results") if isinstance(web, dict) else [], "description", count)


@dataclass(frozen=True)
class Tavily:
    """POST {url} {"query", "max_results"} with the key as a bearer token; hits in results."""

    url: str
    key: SecretStr
    name: str = "Tavily"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[Hit]:
        headers = {"Authorization": f"Bearer {self.key.get_secret_value()}"}
        body = {"query": query, "max_results": count}
        response = await client.post(self.url, json=body, headers=headers)
        if not response.is_success:
            raise failure(self.name, response, "PINCLAW_WEB__TAVILY_API_KEY")
        return _hits(_json(self.name, response).get("results"), "content", count)


@dataclass(frozen=True)
class NoProvider:
    """Why web_search has no provider to ask: one line for the model."""

    reason: str


def configured_provider(settings: WebSettings) -> Provider | NoProvider:
    """The provider `[web]` names, or why there is none."""
    chosen = settings.search_provider
    if chosen == "searxng":
        if settings.searxng_url:
            return SearXNG(settings.searxng_url)
        return NoProvider("web_search has no SearXNG address; the owner sets [web] searxng_url")
    if chosen == "brave":
        if settings.brave_api_key is not None and settings.brave_api_key.get_secret_value():
            return Brave(settings.brave_url, settings.brave_api_key)
        return NoProvider("web_search needs a Brave key; the owner sets PINCLAW_WEB__BRAVE_API_KEY")
    if chosen == "tavily":
        if settings.tavily_api_key is not None and settings.tavily_api_key.get_secret_value():
            return Tavily(settings.tavily_url, settings.tavily_api_key)
        return NoProvider(
            "web_search needs a Tavily key; the owner sets PINCLAW_WEB__TAVILY_API_KEY"
        )
    return NoProvider(
        "web_search has no provider; the owner sets [web] search_provider "
        '("searxng", "brave" or "tavily"). Meanwhile use web_fetch on an address you know'
    )
