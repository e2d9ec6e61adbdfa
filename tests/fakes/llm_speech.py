"""The LLM double's text to speech (OpenAI's POST /v1/audio/speech, as LiteLLM's speech API
calls it): a JSON body in, real OGG/Opus out (tests/fakes/ogg_opus.py), one second of
silence per 15 characters read (at least one); `error` makes it answer that HTTP status."""

from __future__ import annotations

import threading
from typing import Any

from aiohttp import web
from fakes.ogg_opus import ogg_opus_silence


class Speech:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # the bodies received, in order
        self.error: int | None = None
        self._lock = threading.Lock()  # read by the test's thread

    @property
    def read(self) -> list[str]:
        """What was read aloud, request by request."""
        with self._lock:
            return [str(body.get("input", "")) for body in self.requests]

    async def answer(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        if self.error is not None:
            problem = {"message": "speech failed", "type": "server_error", "code": None}
            return web.json_response({"error": problem}, status=self.error)
        audio = ogg_opus_silence(max(1.0, len(str(body.get("input", ""))) / 15))
        return web.Response(body=audio, content_type="audio/ogg")
