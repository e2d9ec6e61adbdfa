"""OpenAI's chat-completions API, served by pinclaw: `GET /v1/models` and `POST
/v1/chat/completions` (a JSON answer, or with `"stream": true` server-sent events), for chat
front ends (Open WebUI, LibreChat) and scripts in any language.

A bearer key (api_keys.py) names the person the turn runs as: their memory scope, budget and
audience, as in their private chat (the owner's key: the owner's). A conversation is a
pinclaw session when the request names one (`X-Session-Id`, else the `user` field): pinclaw
keeps its history, so only the last user message is read. Without one it is stateless: the
client's earlier user and assistant messages are the history, as sent (its system messages
are not: pinclaw's prompt is the system prompt), stored for the turn and removed after it.
pinclaw's own tools run inside the turn; the answer is its final reply, with the turn's
usage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from agent.config import Settings
from agent.http.api_keys import person_for
from agent.http.openai_shapes import (
    RESULTS_IN,
    checked_messages,
    client_tools,
    completion,
    earlier,
    text_of,
    tool_calls_of,
    usage_of,
)
from agent.http.server import Refusal, json_of, read_body
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.intake import is_utf8_text
from agent.security import Scrubber
from agent.turns.client_tools import CLIENT_TOOLS, ClientTools
from agent.turns.turn_record import TurnRecord
from channels.base import ChatRef, IncomingMessage

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Session-Id"
_CODES = {401: "invalid_api_key", 429: "insufficient_quota"}


def _error(status: int, message: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "code": _CODES.get(status)}}
    return web.json_response(body, status=status)


def _session_named(request: web.Request, asked: dict[str, Any]) -> str:
    """The session the request names ("": none). A name that is not UTF-8 (aiohttp reads a
    header's bytes with surrogateescape) is refused, not repaired: repaired, two names
    would become one, and two conversations would share a history."""
    header = request.headers.get(SESSION_HEADER)
    field, named = (SESSION_HEADER, header) if header else ("user", str(asked.get("user") or ""))
    if not is_utf8_text(named):
        raise Refusal(400, f"{field}: the session's name is not UTF-8 text")
    return named


class ChatApi:
    def __init__(
        self,
        settings: Callable[[], Settings],
        runtime: ChannelRuntime,  # of the API's channel (headless_channels.py)
        scrub: Scrubber,
        *,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._settings, self._runtime, self._environ = settings, runtime, environ
        self._scrub = scrub
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _person(self, request: web.Request) -> str:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        person = person_for(token.strip(), self._environ) if scheme == "Bearer" else None
        if person is None:
            raise Refusal(401, "no valid API key (Authorization: Bearer pk-...)")
        if person not in self._settings().people:
            raise Refusal(401, f"this key's person {person!r} is not in [people]")
        return person

    async def models(self, request: web.Request) -> web.Response:
        try:
            self._person(request)
        except Refusal as refused:
            log.warning("http: /v1/models: %d %s", refused.status, refused.why)
            return _error(refused.status, refused.why)
        names = self._settings().llm.configured_models
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "pinclaw"} for n in names]
        return web.json_response({"object": "list", "data": data})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            person = self._person(request)
            asked = await self._asked(request)
            named = _session_named(request, asked)
        except Refusal as refused:
            log.warning("http: /v1/chat/completions: %d %s", refused.status, refused.why)
            return _error(refused.status, refused.why)
        messages: list[dict[str, Any]] = asked["messages"]
        theirs = ClientTools(asked["tools"]) if asked["tools"] else None
        if named and (theirs or messages[-1].get("role") == "tool"):
            why = "a client's tools need a stateless call (no session): the results are its own"
            log.warning("http: /v1/chat/completions: 400 %s", why)
            return _error(400, why)
        session = named[:100] or f"once-{uuid.uuid4().hex}"
        chat = ChatRef("api", f"{person}:{session}")
        last = messages[-1]
        text = text_of(last.get("content")) if last.get("role") == "user" else RESULTS_IN
        msg = IncomingMessage(chat, person, person, text, message_id=uuid.uuid4().hex)
        lock = self._locks.setdefault(chat.key, asyncio.Lock())
        token = CLIENT_TOOLS.set(theirs)  # the turn's task, made inside, inherits it
        try:
            async with lock:  # one turn at a time in a session, as in a chat
                try:
                    history = earlier(messages, self._scrub)
                    if not named and history:
                        await self._runtime.store.sessions.append_turn(chat.key, history)
                    if asked.get("stream"):
                        return await self._streamed(request, msg, asked)
                    reply, record = await self._answer(msg)
                finally:
                    if not named:
                        await self._forget(chat.key)
        finally:
            CLIENT_TOOLS.reset(token)
        if record is not None and record.stop_reason in ("error", "budget"):
            status = 429 if record.stop_reason == "budget" else 502
            return _error(status, record.error or reply)
        body = completion(self._model(), reply, record)
        return web.json_response(body)

    async def _forget(self, chat_key: str) -> None:
        """A stateless call's chat, once its turn has ended: nobody can name it again (the
        client sends the whole history each time), so its rows are removed, or a
        conversation of N calls would leave N*(N+1) of them in state.db."""
        try:
            await self._runtime.store.sessions.forget(chat_key)
        except Exception as exc:  # state.db busy, full or closing: the answer stands
            log.warning("http: %s: its history could not be removed: %s", chat_key, exc)

    async def _asked(self, request: web.Request) -> dict[str, Any]:
        if request.content_type != "application/json":
            raise Refusal(415, f"content type {request.content_type}; application/json only")
        asked = json_of(await read_body(request, self._settings().http))
        if not isinstance(asked, dict):
            raise Refusal(400, "the body: an object {model, messages, ...}")
        last = checked_messages(asked)[-1]
        if last.get("role") == "user" and not text_of(last.get("content")).strip():
            raise Refusal(400, "the last message must be the user's, with text")
        if last.get("role") not in ("user", "tool"):
            raise Refusal(400, "the last message must be the user's, or a tool's result")
        own = self._runtime.setup.source.tools.names()
        return {**asked, "tools": client_tools(asked, own)}

    def _model(self) -> str:
        return self._settings().llm.model

    async def _answer(
        self, msg: IncomingMessage, on_text: Callable[[str], None] | None = None
    ) -> tuple[str, TurnRecord | None]:
        runtime, key = self._runtime, msg.chat.key
        try:
            reply = await runtime.handle(msg, on_text=on_text)
        finally:
            record = runtime.last_turns.pop(key, None)
        return reply.text, record

    async def _streamed(
        self, request: web.Request, msg: IncomingMessage, asked: dict[str, Any]
    ) -> web.StreamResponse:
        """Server-sent events: the reply's text as the model writes it, then the end (and
        the usage, when `stream_options.include_usage` asks for it), then `[DONE]`.

        The turn runs as a task; this handler holds the session's lock until it ends. A
        client gone mid-stream does not stop it: the turn finishes and is stored whole, as a
        chat's turn is (cut, its tools' effects could be done with no record of them), and
        the session's next request, waiting on the lock, reads it in its history."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        deltas: asyncio.Queue[str] = asyncio.Queue()
        turn = asyncio.create_task(self._answer(msg, on_text=deltas.put_nowait))
        try:
            await self._send(response, turn, deltas, asked)
        except ConnectionError as exc:  # the client left: the turn goes on to its end
            log.info("http: /v1/chat/completions: the client left (%s); the turn ends", exc)
            await asyncio.wait({turn})
            if not turn.cancelled() and (failed := turn.exception()) is not None:
                log.error("http: /v1/chat/completions: the turn failed", exc_info=failed)
        except BaseException:  # cancelled (shutdown): the turn with it, as a JSON answer's
            turn.cancel()
            await asyncio.wait({turn})
            raise
        return response

    async def _send(
        self,
        response: web.StreamResponse,
        turn: asyncio.Task[tuple[str, TurnRecord | None]],
        deltas: asyncio.Queue[str],
        asked: dict[str, Any],
    ) -> None:
        """The turn's events written as they come, until its end and `[DONE]`."""
        made, model, cid = int(time.time()), self._model(), f"chatcmpl-{uuid.uuid4().hex}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": made,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

        await response.write(chunk({"role": "assistant", "content": ""}))
        sent = ""
        while not (turn.done() and deltas.empty()):
            waiting = asyncio.create_task(deltas.get())
            await asyncio.wait({turn, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                continue
            piece = waiting.result()
            sent += piece
            await response.write(chunk({"content": piece}))
        reply, record = turn.result()
        if record is not None and record.stop_reason in ("error", "budget"):
            reply = record.error or reply
        rest = reply[len(sent) :] if reply.startswith(sent) else f"\n\n{reply}"
        if rest:  # what the stream did not carry (a reply made after it, a correction)
            await response.write(chunk({"content": rest}))
        handed = tool_calls_of(record.handed_back) if record is not None else []
        if handed:  # the client's tools' calls, for it to run
            indexed = [{"index": n, **call} for n, call in enumerate(handed)]
            await response.write(chunk({"tool_calls": indexed}))
        await response.write(chunk({}, "tool_calls" if handed else "stop"))
        if (asked.get("stream_options") or {}).get("include_usage"):
            usage = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": made,
                "model": model,
                "choices": [],
                "usage": usage_of(record),
            }
            await response.write(f"data: {json.dumps(usage)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
