"""OpenAI-compatible chat-completions server on 127.0.0.1, a test double for an LLM provider.

The real LiteLLM client reaches it through ``api_base=llm.base_url``, so tests exercise the
real wire format (JSON, SSE streaming, HTTP errors) instead of mocking our own code.
It runs in a daemon thread with its own event loop, so sync tests, async tests, subprocesses
and benchmarks can all share it. ``outage`` (from ``llm_faults``) makes it fail, hang or cut
connections for a time window. ``/v1/embeddings`` answers with the deterministic vectors of
``llm_embeddings`` (paraphrases close, unrelated texts apart).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from fakes.llm_embeddings import embeddings_reply
from fakes.llm_faults import Outage, OutageMode
from fakes.llm_requests import last_user_content, reads_ahead, tool_results
from fakes.llm_speech import Speech
from fakes.llm_usage import usage_block

__all__ = [
    "Error",
    "FakeLLM",
    "Outage",
    "Reply",
    "ToolCall",
    "cut",
    "delay",
    "echo",
    "error",
    "last_user_content",
    "no_choices",
    "text",
    "tool_calls",
    "tool_results",
]

SYSTEM_NOT_FIRST = "System message must be at the beginning."
TOOLS_UNSUPPORTED = "tools is not supported for this model"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True)
class ToolCall:
    """One function call; ``arguments`` is the raw JSON string (may be malformed on purpose)."""

    name: str
    arguments: str
    id: str | None = None  # None: the server assigns call_N


@dataclass(frozen=True)
class Reply:
    """A successful assistant turn: text, tool calls, or both."""

    content: str | None = None
    calls: tuple[ToolCall, ...] = ()
    delay_s: float = 0.0
    # "whole"; "no_choices": a 200 whose body (or stream) holds no choice; "cut": the stream's
    # connection drops after the content; "length": stopped at max_tokens, said so at the end.
    shape: str = "whole"
    piece_delay_s: float = 0.0  # streamed: the pause before each piece of the content

    @property
    def finish_reason(self) -> str:
        return "length" if self.shape == "length" else "tool_calls" if self.calls else "stop"


@dataclass(frozen=True)
class Error:
    """An HTTP error in OpenAI's body shape, to test retries, fallbacks and error surfacing."""

    status: int = 500
    message: str = "internal server error"
    type: str | None = None
    code: str | None = None
    delay_s: float = 0.0


Outcome = Reply | Error
Responder = Callable[[dict[str, Any]], "Outcome | str"]


def text(content: str, *, delay_s: float = 0.0) -> Reply:
    """A plain text reply."""
    return Reply(content=content, delay_s=delay_s)


def no_choices() -> Reply:
    """A 200 that answers nothing: `choices: []`."""
    return Reply(shape="no_choices")


def cut(content: str) -> Reply:
    """A stream that shows `content` and then loses its connection."""
    return Reply(content=content, shape="cut")


def tool_calls(
    *calls: tuple[str, Any] | tuple[str, Any, str] | ToolCall,
    content: str | None = None,
    delay_s: float = 0.0,
) -> Reply:
    """Tool calls from ``(name, args)`` or ``(name, args, id)``; dict args are JSON-encoded,
    str args are sent verbatim so a test can send malformed JSON."""
    built: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            built.append(call)
            continue
        name, args, *rest = call
        raw = args if isinstance(args, str) else json.dumps(args)
        built.append(ToolCall(name, raw, rest[0] if rest else None))
    return Reply(content=content, calls=tuple(built), delay_s=delay_s)


def error(
    status: int = 500,
    message: str = "internal server error",
    *,
    type: str | None = None,  # mirrors the OpenAI field name
    code: str | None = None,
    delay_s: float = 0.0,
) -> Error:
    """An error reply; 429 responses also carry ``retry-after: 0`` so client retries are fast."""
    return Error(status=status, message=message, type=type, code=code, delay_s=delay_s)


def delay(seconds: float, reply: Outcome) -> Outcome:
    """The same reply, served after ``seconds`` (without blocking other requests)."""
    return dataclasses.replace(reply, delay_s=seconds)


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # multimodal parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def echo(body: dict[str, Any]) -> Reply:
    """Default responder: ``echo: <last user message>``, so concurrent callers can tell replies
    apart."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return text("echo: " + (_content_text(users[-1].get("content")) if users else ""))


def _pieces(s: str, n: int = 3) -> list[str]:
    """Split into up to ``n`` parts so streaming clients must really reassemble deltas."""
    if not s:
        return [s]
    size = max(1, -(-len(s) // n))
    return [s[i : i + size] for i in range(0, len(s), size)]


class FakeLLM:
    """Scriptable OpenAI-compatible server. Set attributes any time; they are read per request."""

    def __init__(self, *, responder: Responder | None = None, latency_s: float = 0.0) -> None:
        self.responder: Responder = responder or echo
        self.latency_s = latency_s
        self.reject_non_leading_system = False
        self.reject_tools = False
        self.models: list[str] = ["test-model"]
        self.transcript = "transcribed words"  # what /audio/transcriptions answers
        self.transcriptions: list[tuple[str, bytes]] = []  # (model, audio bytes) received
        self.speech = Speech()  # /audio/speech: real OGG/Opus, or a scripted failure
        self.embedding_inputs: list[list[str]] = []  # the texts of each embeddings request
        self.embeddings_status: int | None = None  # set: /embeddings fails with this status
        self.cached_tokens = 0  # prompt tokens each answer says were read from the cache
        self._lock = threading.Lock()
        self._script: deque[Outcome | str] = deque()
        self._failing: dict[str, int] = {}
        self._outages: list[Outage] = []
        self._requests: list[dict[str, Any]] = []
        self._read_aheads: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ---- control API (any thread) ----

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of every chat request received, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def read_aheads(self) -> list[dict[str, Any]]:
        """A daemon's read-aheads (llm_requests.reads_ahead): not in `requests` nor scripted."""
        with self._lock:
            return list(self._read_aheads)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Lower-cased headers of every chat request, parallel to ``requests``."""
        with self._lock:
            return list(self._headers)

    def script(self, *replies: Outcome | str) -> None:
        """Queue replies, served in order before falling back to ``responder``."""
        with self._lock:
            self._script.extend(replies)

    def fail_model(self, name: str, status: int = 500) -> None:
        """Fail every request whose ``model`` is ``name`` (or ``openai/<model>``)."""
        with self._lock:
            self._failing[name] = status

    def heal_model(self, name: str) -> None:
        with self._lock:
            self._failing.pop(name, None)

    def outage(self, seconds: float, mode: OutageMode = "500") -> Outage:
        """For the next ``seconds``, every chat request fails: ``mode`` is an HTTP status
        ("500", "503", "429"...), "hang" (never answered; cut off when the window ends) or
        "drop" (cut off at once). Requests are still logged; script and responder resume after.
        The ``Outage`` counts the requests it took and can be ended early."""
        window = Outage(mode, time.monotonic() + seconds)
        with self._lock:
            self._outages = [o for o in self._outages if o.active] + [window]
        return window

    def reset(self) -> None:
        """Forget script, log, failures and outages, so one server can serve many tests."""
        with self._lock:
            self._script.clear()
            self._failing.clear()
            for outage in self._outages:
                outage.end()
            self._outages.clear()
            self._requests.clear()
            self._read_aheads.clear()
            self._headers.clear()
        self.responder, self.latency_s = echo, 0.0
        self.speech = Speech()
        self.embeddings_status, self.cached_tokens = None, 0
        self.embedding_inputs.clear()
        self.reject_non_leading_system = self.reject_tools = False

    def start(self) -> FakeLLM:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surfaced to the caller of start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="FakeLLM", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- server side (server thread) ----

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024**2)
        for path in ("/v1/chat/completions", "/chat/completions"):
            app.router.add_post(path, self._chat)
        for path in ("/v1/models", "/models"):
            app.router.add_get(path, self._list_models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self.speech.answer)
        app.router.add_post("/v1/messages", self._anthropic_messages)
        for path in ("/v1/embeddings", "/embeddings"):
            app.router.add_post(path, self._embeddings)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _anthropic_messages(self, request: web.Request) -> web.Response:
        """Anthropic's Messages API, enough for one text answer: the body is recorded as
        sent (cache_control and all) in `requests`."""
        body = await request.json()
        with self._lock:
            self._requests.append(body)
        answer = {"type": "text", "text": "echo: anthropic"}
        return web.json_response({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
            "content": [answer], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        })  # fmt: skip

    async def _transcribe(self, request: web.Request) -> web.Response:
        """Whisper-style speech to text: a multipart upload in, {"text": ...} out."""
        form = await request.post()
        upload = form.get("file")
        audio = upload.file.read() if isinstance(upload, web.FileField) else b""
        with self._lock:
            self.transcriptions.append((str(form.get("model", "")), audio))
        return web.json_response({"text": self.transcript})

    async def _embeddings(self, request: web.Request) -> web.Response:
        """OpenAI's embeddings: ``input`` a string or a list of them (llm_embeddings.py)."""
        body = await request.json()
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return self._error_response(Error(400, "input must be a string or a list of strings"))
        with self._lock:
            self.embedding_inputs.append(list(texts))
            status = self.embeddings_status
        if status is not None:
            return self._error_response(Error(status, "embeddings are unavailable"))
        return web.json_response(embeddings_reply(body, texts))

    async def _list_models(self, _: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    def _decide(self, body: dict[str, Any]) -> Outcome | str:
        """Pick the outcome: model failures and rejections first, then script, then responder."""
        model = str(body.get("model", ""))
        messages = body.get("messages") or []
        with self._lock:
            status = self._failing.get(model, self._failing.get(f"openai/{model}"))
            if status is not None:
                return Error(status, f"model {model} is failing")
            if self.reject_non_leading_system and any(
                m.get("role") == "system" for m in messages[1:]
            ):
                return Error(400, SYSTEM_NOT_FIRST)
            if self.reject_tools and body.get("tools"):
                return Error(400, TOOLS_UNSUPPORTED)
            if self._script:
                return self._script.popleft()
        return self.responder(body)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error_response(Error(400, "request body is not a JSON object"))
        ahead = reads_ahead(body)  # answered as any request, outside the tests' log and script
        with self._lock:
            if ahead:
                self._read_aheads.append(body)
            else:
                self._requests.append(body)
                self._headers.append({k.lower(): v for k, v in request.headers.items()})
            outage = None if ahead else next((o for o in self._outages if o.take()), None)
        if outage is not None:
            return await self._outage_response(request, outage)
        outcome = text("Hi") if ahead else self._decide(body)
        if isinstance(outcome, str):
            outcome = text(outcome)
        wait = self.latency_s + outcome.delay_s
        if wait > 0:
            await asyncio.sleep(wait)
        if isinstance(outcome, Error):
            return self._error_response(outcome)
        calls = [
            {
                "id": c.id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in outcome.calls
        ]
        completion_chars = len(outcome.content or "") + sum(len(c.arguments) for c in outcome.calls)
        usage = usage_block(body, completion_chars, self.cached_tokens)
        head = {
            "id": f"chatcmpl-{next(self._ids)}",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "system_fingerprint": "fp_fake",
        }
        if body.get("stream"):
            return await self._stream(request, body, head, outcome, calls, usage)
        message: dict[str, Any] = {"role": "assistant", "content": outcome.content}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "finish_reason": outcome.finish_reason}
        choices = [] if outcome.shape == "no_choices" else [choice]
        body_out = {**head, "object": "chat.completion", "choices": choices, "usage": usage}
        return web.json_response(body_out)

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        head: dict[str, Any],
        reply: Reply,
        calls: list[dict[str, Any]],
        usage: dict[str, Any],
    ) -> web.StreamResponse:
        """SSE like OpenAI: role, content pieces, tool-call pieces, finish, usage, [DONE]."""
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)

        async def send(delta: dict[str, Any] | None, finish: str | None = None) -> None:
            """One chunk; ``delta=None`` is the choice-less closing usage chunk."""
            chunk: dict[str, Any] = {**head, "object": "chat.completion.chunk", "choices": []}
            if delta is not None:
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            if want_usage:
                chunk["usage"] = usage if delta is None else None
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        if reply.shape != "no_choices":
            await send({"role": "assistant", "content": ""})
        if reply.content:
            for piece in _pieces(reply.content):
                await asyncio.sleep(reply.piece_delay_s)
                await send({"content": piece})
        if reply.shape == "cut" and request.transport is not None:
            request.transport.abort()
            return resp
        for index, call in enumerate(calls):
            fn = call["function"]
            named = {"name": fn["name"], "arguments": ""}
            first = {"index": index, "id": call["id"], "type": "function", "function": named}
            await send({"tool_calls": [first]})
            for piece in _pieces(fn["arguments"]):
                await send({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        if reply.shape != "no_choices":
            await send({}, reply.finish_reason)
        if want_usage:
            await send(None)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _outage_response(self, request: web.Request, outage: Outage) -> web.Response:
        """An outage's error, or (hang, drop) a connection closed without an answer."""
        if outage.status is not None:
            return self._error_response(Error(outage.status, "the service is unavailable"))
        if outage.mode == "hang":
            await outage.wait_out()
        if request.transport is not None:
            request.transport.abort()
        return web.Response()  # not sent: the connection is gone

    @staticmethod
    def _error_response(err: Error) -> web.Response:
        kind = err.type or _ERROR_TYPES.get(err.status, "server_error")
        payload = {
            "error": {"message": err.message, "type": kind, "param": None, "code": err.code or kind}
        }
        headers = {"retry-after": "0"} if err.status == 429 else None
        return web.json_response(payload, status=err.status, headers=headers)
