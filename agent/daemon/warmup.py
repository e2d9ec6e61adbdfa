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

A model at a server of one's own also reads the prompt ahead (`read_ahead`): a small model on
a CPU reads a first request for tens of seconds, and llama-server, Ollama and LM Studio keep
what they read and reuse a request's longest prefix they have. Each channel's first request
(its system prompt and tools) is sent once at start for one token, so a new chat's first
message reads only itself. A server with one slot keeps the last: the chat channels go last.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agent.config import LLMSettings
from agent.model.client import LLMClient
from agent.model.litellm_call import request
from agent.model.openai_wire_call import OpenAIWireCall
from agent.model.profiles.litellm_facts import price_of, supports_native_tools
from agent.model.profiles.litellm_import import load_litellm
from agent.model.profiles.routes import Road, load_first_call_modules, road_of
from agent.model.responses import Message, ModelClient
from agent.turns.turn import TurnRunner

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


async def read_ahead(llm: ModelClient, runners: list[tuple[str, TurnRunner]]) -> None:
    """Each runner's first request read by the model's server, in turn (llm.read_ahead: a
    server of one's own only). A failure ends it with a line: the first message then reads
    its whole prompt, as without."""
    if not isinstance(llm, LLMClient) or not llm.settings.read_ahead:
        return
    for channel, runner in runners:
        started = time.perf_counter()
        try:
            if not await llm.read_ahead(*runner.first_request()):
                return
        except Exception as exc:
            log.info("the model's server did not read the prompt ahead (%s)", exc)
            return
        took = time.perf_counter() - started
        log.info("the model's server read the %s prompt ahead in %.1f s", channel, took)
