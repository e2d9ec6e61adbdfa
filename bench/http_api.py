"""The OpenAI-compatible API's added latency: the same turn asked in-process (the API
channel's runtime, `ChannelRuntime.handle`) and over HTTP (`POST /v1/chat/completions` on
127.0.0.1, a kept-alive httpx client), the model an in-process double that answers at once
(bench/turns.py's InstantModel). Requests alternate, so each pair sees the same machine;
added is each pair's HTTP minus in-process time, at p50 and p99. Goal (issue 41): at most
5 ms at p50, 20 ms at p99.

    .venv/bin/python bench/http_api.py [--requests 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from turns import InstantModel  # noqa: E402

KEY = "pk-owner-" + "0123456789abcdef" * 2


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(requests: int) -> tuple[list[float], list[float]]:
    import httpx
    from aiohttp import web

    from agent.app import build_app
    from agent.config import load_settings
    from agent.http.chat_api import ChatApi
    from agent.http.headless_channels import ApiChannel
    from agent.http.server import HttpServer
    from agent.runtime.turn_setup import Access
    from channels.base import ChatRef, IncomingMessage

    with tempfile.TemporaryDirectory() as home:
        os.environ.update(
            PINCLAW_HOME=home,
            PINCLAW_LLM__MODEL="openai/bench",
            PINCLAW_LLM__API_KEY="sk-bench",  # never used: the model is a double
            PINCLAW_PEOPLE__OWNER__OWNER="true",
            PINCLAW_HTTP__PORT="0",
            HTTP_KEY_BENCH=KEY,
        )
        app = await build_app(load_settings())
        app.llm = InstantModel(app.settings.llm)
        runtime = app.runtime(ApiChannel(), Access(open_to_all=True))
        api = ChatApi(lambda: app.settings, runtime, app.scrub)
        server = HttpServer(app.settings.http, [web.post("/v1/chat/completions", api.completions)])
        await server.start()
        direct: list[float] = []
        over_http: list[float] = []
        body = {"model": "any", "messages": [{"role": "user", "content": "How is the pump?"}]}
        headers = {"Authorization": f"Bearer {KEY}"}
        try:
            async with httpx.AsyncClient(base_url=server.address, headers=headers) as client:
                for n in range(requests + 20):  # the first 20: warm-up, not counted
                    chat = ChatRef("api", f"owner:once-{n}")
                    msg = IncomingMessage(chat, "owner", "owner", "How is the pump?")
                    started = time.perf_counter()
                    await runtime.handle(msg)
                    middle = time.perf_counter()
                    answer = await client.post("/v1/chat/completions", json=body)
                    ended = time.perf_counter()
                    assert answer.status_code == 200, answer.text
                    if n >= 20:
                        direct.append((middle - started) * 1000)
                        over_http.append((ended - middle) * 1000)
        finally:
            await server.stop()
            await app.close()
    return direct, over_http


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    direct, over_http = asyncio.run(measure(args.requests))
    print(f"{args.requests} turns each way, ms")
    print("            p50     p99    mean")
    for name, values in (("in-process", direct), ("over HTTP", over_http)):
        print(
            f"{name:10} {quantile(values, 0.5):6.2f} {quantile(values, 0.99):7.2f} "
            f"{statistics.mean(values):7.2f}"
        )
    added = [http - own for http, own in zip(over_http, direct, strict=True)]
    print(
        f"added      {quantile(added, 0.5):6.2f} {quantile(added, 0.99):7.2f} "
        f"{statistics.mean(added):7.2f}   (each pair's difference)"
    )


if __name__ == "__main__":
    main()
