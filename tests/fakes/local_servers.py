"""Loopback doubles of the OpenAI-compatible servers people run models on at home:
llama.cpp's llama-server, LM Studio and vLLM, each with the quirks pinclaw meets.

- llama-server: answers for whatever model name it is sent (it serves one, under its
  alias), adds a `timings` object to every reply and to the last streamed chunk, and says
  its context window at `/props` (`default_generation_settings.n_ctx`) and in `/v1/models`.
- LM Studio: knows its models by their ids ("qwen2.5-coder-1.5b-instruct"); another id is a
  404 `model_not_found`; `/api/v0/models/ID` tells the loaded context length and
  capabilities.
- vLLM: lists its model (a Hugging Face id) with `max_model_len`; started without
  `--enable-auto-tool-choice`, a request with `tools=` is refused with vLLM's 400, and the
  model writes its calls as text.

The real LiteLLM client reaches them through `api_base=server.base_url`. Replies are
scripted with fakes.llm_server's `text(...)` and `tool_calls(...)`; `first_token_delay_s`,
`chunk_gap_s` and `stall_s` make a model slow to start, slow to stream, or stop mid-way.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from aiohttp import web
from fakes.llm_server import Reply, echo

Flavor = Literal["llama-server", "lm-studio", "vllm"]
Responder = Callable[[dict[str, Any]], Reply]
VLLM_AUTO_TOOLS = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


class Loopback:
    """An aiohttp app on 127.0.0.1 in a thread of its own (sync and async tests alike)."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (path, JSON body) as received
        self._script: deque[Reply] = deque()
        self.responder: Responder = echo
        self.first_token_delay_s = 0.0  # before the first token (prompt processing)
        self.chunk_gap_s = 0.0  # between two streamed pieces
        self.stall_s = 0.0  # once, after the first piece: a stream that stops coming
        self.pieces = 3
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def chats(self) -> list[dict[str, Any]]:
        """The chat requests' bodies, oldest first."""
        with self._lock:
            return [body for path, body in self.requests if "chat" in path]

    def paths(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self.requests]

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def start(self) -> Loopback:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._serve())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=type(self).__name__, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        found = self.responder(body)
        return Reply(content=found) if isinstance(found, str) else found

    def split(self, content: str) -> list[str]:
        size = max(1, -(-len(content) // self.pieces))
        return [content[i : i + size] for i in range(0, len(content), size)] or [""]


class LocalOpenAIServer(Loopback):
    """llama-server, LM Studio or vLLM: `/v1/chat/completions` (JSON or SSE) and the
    endpoints each has for saying what it serves."""

    def __init__(
        self,
        flavor: Flavor,
        *,
        models: tuple[str, ...] = ("qwen2.5-coder-1.5b",),
        n_ctx: int = 4096,
        auto_tool_choice: bool = False,
    ) -> None:
        super().__init__()
        self.flavor = flavor
        self.models = models
        self.n_ctx = n_ctx
        self.auto_tool_choice = auto_tool_choice  # vLLM's --enable-auto-tool-choice
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        app.router.add_get("/health", self._health)
        app.router.add_get("/api/v0/models/{id:.+}", self._lm_model)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _props(self, request: web.Request) -> web.Response:
        if self.flavor != "llama-server":
            raise web.HTTPNotFound()
        self.record("/props", {})
        caps = {"supports_tools": True, "supports_tool_calls": True, "supports_system_role": True}
        return web.json_response(
            {
                "default_generation_settings": {
                    "n_ctx": self.n_ctx,
                    "params": {"temperature": 0.8},
                },
                "total_slots": 1,
                "model_alias": self.models[0],
                "chat_template_caps": caps,
                "build_info": "b0-fake",
            }
        )

    async def _lm_model(self, request: web.Request) -> web.Response:
        model = request.match_info["id"]
        if self.flavor != "lm-studio" or model not in self.models:
            raise web.HTTPNotFound()
        self.record(f"/api/v0/models/{model}", {})
        return web.json_response(
            {
                "id": model,
                "object": "model",
                "type": "llm",
                "publisher": "lmstudio-community",
                "arch": "qwen2",
                "state": "loaded",
                "max_context_length": 32768,
                "loaded_context_length": self.n_ctx,
                "capabilities": ["tool_use"],
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        self.record("/v1/models", {})
        data: list[dict[str, Any]] = []
        for model in self.models:
            entry: dict[str, Any] = {"id": model, "object": "model", "created": 0}
            if self.flavor == "llama-server":
                entry |= {
                    "owned_by": "llamacpp",
                    "meta": {"n_ctx": self.n_ctx, "n_ctx_train": 32768},
                }
            elif self.flavor == "vllm":
                entry |= {"owned_by": "vllm", "root": model, "max_model_len": self.n_ctx}
            else:
                entry["owned_by"] = "organization_owner"
            data.append(entry)
        return web.json_response({"object": "list", "data": data})

    def _refusal(self, body: dict[str, Any]) -> web.Response | None:
        """What the real server says instead of answering, if anything."""
        model = str(body.get("model", ""))
        if self.flavor == "lm-studio" and model not in self.models:
            error = {
                "message": f'Model "{model}" not found. Please specify a valid model.',
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
            return web.json_response({"error": error}, status=404)
        if self.flavor == "vllm" and model not in self.models:
            return self._vllm_error(404, "NotFoundError", f"The model `{model}` does not exist.")
        wants_auto = body.get("tool_choice", "auto") == "auto"
        if self.flavor == "vllm" and body.get("tools") and wants_auto and not self.auto_tool_choice:
            return self._vllm_error(400, "BadRequestError", VLLM_AUTO_TOOLS)
        return None

    @staticmethod
    def _vllm_error(status: int, kind: str, message: str) -> web.Response:
        body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        return web.json_response(body, status=status)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.record("/v1/chat/completions", body)
        refused = self._refusal(body)
        if refused is not None:
            return refused
        reply = self.next_reply(body)
        model = self.models[0] if self.flavor == "llama-server" else str(body["model"])
        head = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()), "model": model}
        if self.flavor == "lm-studio":
            head["system_fingerprint"] = model
        prompt = len(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", [])))
        usage = {"prompt_tokens": prompt // 4, "completion_tokens": len(reply.content or "") // 4}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        calls = [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in reply.calls
        ]
        if body.get("stream"):
            return await self._stream(request, body, head, reply, calls, usage)
        await asyncio.sleep(self.first_token_delay_s + reply.delay_s)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
        out = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        if self.flavor == "llama-server":
            out["timings"] = self._timings(usage)
        return web.json_response(out)

    def _timings(self, usage: dict[str, int]) -> dict[str, float]:
        """llama-server's own account of the call, on every reply."""
        prompt_ms = self.first_token_delay_s * 1000
        return {
            "prompt_n": usage["prompt_tokens"],
            "prompt_ms": prompt_ms,
            "predicted_n": usage["completion_tokens"],
            "predicted_ms": 1.0,
            "prompt_per_second": 0.0,
            "predicted_per_second": 0.0,
            "cache_n": 0,
        }

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        head: dict[str, Any],
        reply: Reply,
        calls: list[dict[str, Any]],
        usage: dict[str, int],
    ) -> web.StreamResponse:
        """SSE: the headers and the role at once, then (after the prompt is read) the
        pieces, the finish, usage when asked, `timings` on llama-server's last chunk."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(delta: dict[str, Any] | None, finish: str | None = None) -> None:
            chunk: dict[str, Any] = {**head, "object": "chat.completion.chunk", "choices": []}
            if delta is not None:
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            if finish and self.flavor == "llama-server":
                chunk["timings"] = self._timings(usage)
            if delta is None:
                chunk["usage"] = usage
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": None})
        await asyncio.sleep(self.first_token_delay_s + reply.delay_s)
        for number, piece in enumerate(self.split(reply.content or "") if reply.content else []):
            await send({"content": piece})
            await asyncio.sleep(self.stall_s if number == 0 else self.chunk_gap_s)
        for index, call in enumerate(calls):
            fn = call["function"]
            first = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": ""},
            }
            await send({"tool_calls": [first]})
            for piece in self.split(fn["arguments"]):
                await send({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                await asyncio.sleep(self.chunk_gap_s)
        await send({}, reply.finish_reason)
        if (body.get("stream_options") or {}).get("include_usage"):
            await send(None)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
