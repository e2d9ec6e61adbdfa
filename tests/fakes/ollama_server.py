"""A loopback double of Ollama's own API, as LiteLLM's `ollama_chat/` provider and pinclaw's
doctor use it:

- `POST /api/chat`: NDJSON streaming (one JSON object per line, `done: false` pieces, then
  a `done: true` line with `done_reason` and the token counts), or one object with
  `"stream": false`; a tool call arrives whole in one line, its `arguments` an object, not
  a string; a model without tools in its template is refused with Ollama's 400;
- `POST /api/show`: the model's `model_info` (`<arch>.context_length`), `capabilities`,
  `parameters` and template;
- `GET /api/ps`, `/api/tags`, `/api/version`.

Models are named as Ollama names them ("qwen2.5:1.5b"); another name is Ollama's 404.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from fakes.local_servers import Loopback

STAMP = "2026-11-26T12:00:00.000000Z"


class FakeOllama(Loopback):
    def __init__(
        self,
        models: tuple[str, ...] = ("qwen2.5:1.5b",),
        *,
        no_tools: tuple[str, ...] = (),
        num_ctx: int | None = None,
        loaded_context: int | None = None,
    ) -> None:
        super().__init__()
        self.models = models
        self.no_tools = no_tools  # models whose template has no tools (gemma3, deepseek-r1)
        self.num_ctx = num_ctx  # a `num_ctx` parameter in the Modelfile
        self.loaded_context = loaded_context  # the window /api/ps reports for a loaded model

    @property
    def base_url(self) -> str:
        return self.root  # Ollama's api_base has no /v1

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/chat", self._chat)
        app.router.add_post("/api/show", self._show)
        app.router.add_get("/api/ps", self._ps)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_get("/api/version", self._version)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.12.6"})

    def _known(self, name: str) -> bool:
        return name in self.models or f"{name}:latest" in self.models

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        return web.json_response({"error": message}, status=status)

    async def _show(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.record("/api/show", body)
        name = str(body.get("model") or body.get("name") or "")
        if not self._known(name):
            return self._error(404, f"model '{name}' not found")
        tools = name not in self.no_tools
        template = (
            "{{- if .Tools }}<tools>{{ .Tools }}</tools>{{ end }}" if tools else "{{ .Prompt }}"
        )
        parameters = f"num_ctx                        {self.num_ctx}" if self.num_ctx else ""
        return web.json_response(
            {
                "modelfile": f"FROM {name}",
                "parameters": parameters,
                "template": template,
                "details": {
                    "format": "gguf",
                    "family": "qwen2",
                    "parameter_size": "1.5B",
                    "quantization_level": "Q4_K_M",
                },
                "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
                "capabilities": ["completion", "tools"] if tools else ["completion"],
            }
        )

    async def _ps(self, request: web.Request) -> web.Response:
        self.record("/api/ps", {})
        if self.loaded_context is None:
            return web.json_response({"models": []})
        loaded = [
            {"name": m, "model": m, "context_length": self.loaded_context} for m in self.models
        ]
        return web.json_response({"models": loaded})

    async def _tags(self, request: web.Request) -> web.Response:
        self.record("/api/tags", {})
        return web.json_response({"models": [{"name": m, "model": m} for m in self.models]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.record("/api/chat", body)
        name = str(body.get("model", ""))
        if not self._known(name):
            return self._error(404, f"model '{name}' not found")
        if body.get("tools") and name in self.no_tools:
            return self._error(400, f"registry.ollama.ai/library/{name} does not support tools")
        reply = self.next_reply(body)
        calls = [
            {"function": {"name": c.name, "arguments": json.loads(c.arguments or "{}")}}
            for c in reply.calls
        ]
        counts = {
            "prompt_eval_count": len(json.dumps(body.get("messages", []))) // 4,
            "eval_count": max(1, len(reply.content or "") // 4),
            "total_duration": 1_000_000,
            "load_duration": 1_000,
            "prompt_eval_duration": int(self.first_token_delay_s * 1e9),
            "eval_duration": 1_000,
        }
        last = {"model": name, "created_at": STAMP, "done": True, "done_reason": "stop", **counts}
        if body.get("stream", True) is False:
            await asyncio.sleep(self.first_token_delay_s + reply.delay_s)
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            return web.json_response({**last, "message": message})
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        await asyncio.sleep(self.first_token_delay_s + reply.delay_s)

        async def line(message: dict[str, Any], done: dict[str, Any] | None = None) -> None:
            out = done or {"model": name, "created_at": STAMP, "done": False}
            await resp.write((json.dumps({**out, "message": message}) + "\n").encode())

        for number, piece in enumerate(self.split(reply.content) if reply.content else []):
            await line({"role": "assistant", "content": piece})
            await asyncio.sleep(self.stall_s if number == 0 else self.chunk_gap_s)
        if calls:
            await line({"role": "assistant", "content": "", "tool_calls": calls})
        await line({"role": "assistant", "content": ""}, last)
        await resp.write_eof()
        return resp
