"""Loopback doubles of the search APIs web_search speaks to, answering in their real shapes:

- SearXNG: GET /searxng/search?q=…&format=json → {query, number_of_results, results: [{url,
  title, content, engine, engines, parsed_url, template, positions, score, category}],
  answers, corrections, infoboxes, suggestions, unresponsive_engines}; an instance without
  JSON in its `search.formats` answers 403 (`json_enabled = False`).
- Brave Search: GET /brave/res/v1/web/search?q=…&count=N with X-Subscription-Token →
  {type: "search", query: {original, …}, mixed, web: {type: "search", results: [{title, url,
  description (with <strong> marks), age, page_age, profile, language, family_friendly,
  meta_url, type: "search_result", subtype}]}}; a wrong token is HTTP 422
  SUBSCRIPTION_TOKEN_INVALID, a limit HTTP 429 RATE_LIMITED, both as {type: "ErrorResponse",
  error: {id, status, code, detail, meta}, time}.
- Tavily: POST /tavily/search {query, max_results} with a bearer token → {query,
  follow_up_questions, answer, images, results: [{title, url, content, score, raw_content}],
  response_time}; a wrong token is HTTP 401 {detail: {error}}.

`fail_with = (status, code)` makes the next searches fail as the provider would (429, 500…);
`delay_s` makes each answer late.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from fakes.local_servers import Loopback

BRAVE_KEY = "BSA-test-key-not-real-4821"
TAVILY_KEY = "tvly-test-key-not-real-7730"

PAGES = (
    ("Growing basil indoors", "https://garden.example/basil", "Basil wants six hours of sun."),
    ("Basil - Wikipedia", "https://en.wikipedia.example/wiki/Basil", "Basil is a herb."),
    ("Pesto recipe", "https://food.example/pesto", "Blend basil, pine nuts and oil."),
    ("Basil pests", "https://garden.example/pests", "Aphids like basil too."),
    ("Seeds shop", "https://shop.example/basil-seeds", "Genovese basil seeds, 2 g."),
    ("Basil varieties", "https://garden.example/varieties", "Thai, lemon and purple basil."),
)


def _searxng(query: str) -> dict[str, Any]:
    results = [
        {
            "url": url,
            "title": title,
            "content": snippet,
            "engine": "duckduckgo",
            "engines": ["duckduckgo", "brave"],
            "parsed_url": ["https", url.split("/")[2], "/" + url.split("/", 3)[-1], "", "", ""],
            "template": "default.html",
            "positions": [n + 1],
            "score": round(2.0 / (n + 1), 3),
            "category": "general",
            "publishedDate": None,
            "thumbnail": "",
            "priority": "",
        }
        for n, (title, url, snippet) in enumerate(PAGES)
    ]
    return {
        "query": query,
        "number_of_results": 0,
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": ["basil care", "basil indoors winter"],
        "unresponsive_engines": [["google", "timeout"]],
    }


def _brave(query: str, count: int) -> dict[str, Any]:
    results = [
        {
            "title": title,
            "url": url,
            "is_source_local": False,
            "is_source_both": False,
            "description": snippet.replace("asil", "<strong>asil</strong>", 1) + " &amp; more",
            "page_age": "2024-05-01T10:00:00",
            "age": "May 1, 2024",
            "profile": {"name": url.split("/")[2], "url": url, "long_name": url.split("/")[2]},
            "language": "en",
            "family_friendly": True,
            "type": "search_result",
            "subtype": "generic",
            "meta_url": {"scheme": "https", "netloc": url.split("/")[2], "path": "› basil"},
        }
        for title, url, snippet in PAGES[:count]
    ]
    return {
        "type": "search",
        "query": {"original": query, "show_strict_warning": False, "spellcheck_off": True},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
        "web": {"type": "search", "results": results, "family_friendly": True},
    }


def _brave_error(status: int, code: str, detail: str) -> web.Response:
    body = {
        "type": "ErrorResponse",
        "error": {
            "id": "5d832250-9396-4f6e-b84a-2a1fe524cd7d",
            "status": status,
            "code": code,
            "detail": detail,
            "meta": {"component": "authentication" if status == 422 else "rate_limiter"},
        },
        "time": 1663072993,
    }
    return web.json_response(body, status=status)


def _tavily(query: str, count: int) -> dict[str, Any]:
    results = [
        {"title": title, "url": url, "content": snippet, "score": 0.9, "raw_content": None}
        for title, url, snippet in PAGES[:count]
    ]
    return {
        "query": query,
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": results,
        "response_time": 0.42,
    }


class SearchAPIs(Loopback):
    """SearXNG at {root}/searxng, Brave at {root}/brave/res/v1/web/search, Tavily at
    {root}/tavily/search."""

    def __init__(self) -> None:
        super().__init__()
        self.json_enabled = True  # SearXNG's search.formats includes json
        self.fail_with: tuple[int, str] | None = None
        self.delay_s = 0.0  # before each answer

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/searxng/search", self._searxng)
        app.router.add_get("/brave/res/v1/web/search", self._brave)
        app.router.add_post("/tavily/search", self._tavily)

    async def _failure(self) -> tuple[int, str] | None:
        await asyncio.sleep(self.delay_s)
        with self._lock:
            return self.fail_with

    async def _searxng(self, request: web.Request) -> web.Response:
        self.record("searxng", dict(request.query))
        if not self.json_enabled or request.query.get("format") != "json":
            return web.Response(status=403, text="Forbidden")
        if failure := await self._failure():
            return web.Response(status=failure[0], text="Too Many Requests")
        return web.json_response(_searxng(request.query["q"]))

    async def _brave(self, request: web.Request) -> web.Response:
        self.record("brave", dict(request.query))
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            detail = "The provided subscription token is invalid."
            return _brave_error(422, "SUBSCRIPTION_TOKEN_INVALID", detail)
        if failure := await self._failure():
            return _brave_error(failure[0], failure[1], "Request rate limit exceeded for plan.")
        count = int(request.query.get("count", "20"))
        return web.json_response(_brave(request.query["q"], count))

    async def _tavily(self, request: web.Request) -> web.Response:
        body = json.loads(await request.text())
        self.record("tavily", body)
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            error = {"error": "Unauthorized: missing or invalid API key."}
            return web.json_response({"detail": error}, status=401)
        if failure := await self._failure():
            return web.json_response({"detail": {"error": failure[1]}}, status=failure[0])
        return web.json_response(_tavily(body["query"], int(body.get("max_results", 5))))
