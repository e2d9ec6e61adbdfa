"""The model's call path warmed in the background, so a daemon's first message costs about
what later ones do.

`import litellm` is not the whole cold start: the first call imports about 450 more modules
(LiteLLM's request and logging helpers, the OpenAI SDK's resources) and builds LiteLLM's
per-model tables, about half a second on a small machine. The daemon calls `warm_up` once
its channels run; it does that work in a worker thread through LiteLLM's own dry run
(`mock_response`: the request is built, logged and priced, nothing is sent), so no token is
spent and nothing leaves the machine. A model on a direct road (a server of one's own, or
OpenAI itself: agent/model/profiles/routes.py) needs only httpx, its TLS context and the
prompt's tokenizer: neither LiteLLM nor the OpenAI SDK is loaded for it.

A model at a server of one's own also reads the prompt ahead (`keep_read_ahead`): a small
model on a CPU reads a first request for tens of seconds, and llama-server, Ollama and LM
Studio keep what they read and reuse a request's longest prefix they have. Each channel's
first request (its system prompt and tools) is sent at start for one token, so a new chat's
first message reads only itself; and again whenever what the prompt is built from changes —
MEMORY.md noted in, BOOTSTRAP.md emptied by the first turn, a skill added, a reload — which
else makes the next message read the prompt again from the change on (the tools come after
it). A server with one slot keeps the last: the chat channels go last.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from agent.config import LLMSettings
from agent.model.client import LLMClient
from agent.model.litellm_call import request
from agent.model.openai_wire_call import OpenAIWireCall
from agent.model.profiles.litellm_facts import price_of, supports_native_tools
from agent.model.profiles.litellm_import import load_litellm
from agent.model.profiles.routes import Road, load_first_call_modules, road_of
from agent.model.responses import Message
from agent.runtime.running_turns import RunningTurns
from agent.runtime.turn_setup import TurnSetup
from channels.base import Channel

log = logging.getLogger(__name__)

# The shape of a real turn: a system prompt, the user's message, one function tool.
_MESSAGES: list[Message] = [
    {"role": "system", "content": "You are warming up."},
    {"role": "user", "content": "hello"},
]
_TOOL = {
    "type": "function",
    "function": {
        "name": "warm_up",
        "description": "Not called.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}
# Not warmed: the tokenizer some providers' requests load (Anthropic's, about 0.15 s),
# 40 MiB that a daemon on an OpenAI model never needs.


def warm_up_now(settings: LLMSettings) -> float:
    """Import and prime what the first call to `settings.model` would, without sending a
    request; the seconds it took."""
    started = time.perf_counter()
    if road_of(settings) is not Road.LITELLM:
        OpenAIWireCall(settings).warm_up()
    else:
        litellm = load_litellm()
        kwargs = request(litellm, settings, settings.model, _MESSAGES, [_TOOL])
        response = litellm.completion(**kwargs, mock_response="ok")
        price_of(litellm, response, settings.model)
        supports_native_tools(settings, settings.model)
    load_first_call_modules(settings)
    return time.perf_counter() - started


async def warm_up(settings: LLMSettings) -> None:
    """`warm_up_now` in a worker thread, off the event loop. A failure is logged and
    forgotten: the first real call then simply pays the cold start."""
    try:
        took = await asyncio.to_thread(warm_up_now, settings)
    except Exception as exc:
        log.warning("could not warm up the model's client (%s); the first message is slower", exc)
        return
    log.info("model client warmed up for %s in %.2f s", settings.model, took)


READ_AGAIN_EVERY_S = 1.0  # how often the prompts' sources are looked at (a few stats)
AFTER_FAILURE_S = 60.0  # a server that did not answer a read-ahead is asked again after this


class Reading(Protocol):
    """A channel's runtime as far as reading ahead goes (agent/runtime/channel_runtime.py)."""

    @property
    def channel(self) -> Channel: ...
    @property
    def setup(self) -> TurnSetup: ...
    @property
    def turns(self) -> RunningTurns: ...


async def keep_read_ahead(
    runtimes: Callable[[], Sequence[Reading]], every_s: float = READ_AGAIN_EVERY_S
) -> None:
    """Each runtime's first request read by its model's server (llm.read_ahead: a server of
    one's own only), in order, at start and after each change of what it is built from. A
    change is read once it has held for a look and no turn runs anywhere: a read between a
    turn's requests would push that turn's own prompt out of a one-slot server. A failure is
    logged once and tried again after AFTER_FAILURE_S; the first message then reads its
    whole prompt, as without. Runs until cancelled."""
    read: dict[str, object] = {}  # what each channel's server last read
    seen: dict[str, object] = {}  # what each channel's prompt was built from at the last look
    retry_at, failing = 0.0, False
    while True:
        found = runtimes()
        for runtime in found:
            setup, channel = runtime.setup, runtime.channel.name
            llm = setup.llm
            if not (isinstance(llm, LLMClient) and llm.settings.read_ahead):
                continue
            if road_of(llm.settings) is not Road.OWN_SERVER:  # a hosted one keeps no prefix
                continue
            now = (llm.settings.model, llm.settings.api_base, setup.runner.source.fingerprint())
            held, seen[channel] = seen.get(channel, now) == now, now
            busy = any(r.turns.running for r in found)
            if read.get(channel) == now or not held or busy or time.monotonic() < retry_at:
                continue
            started = time.perf_counter()
            try:
                await llm.read_ahead(*setup.runner.first_request())
            except Exception as exc:
                if not failing:
                    log.info("the model's server did not read the prompt ahead (%s)", exc)
                retry_at, failing = time.monotonic() + AFTER_FAILURE_S, True
                continue
            read[channel], failing = now, False
            took = time.perf_counter() - started
            log.info("the model's server read the %s prompt ahead in %.1f s", channel, took)
        await asyncio.sleep(every_s)
