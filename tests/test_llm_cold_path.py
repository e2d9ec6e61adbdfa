"""What the first call to LiteLLM costs: no MCP client imported for our tools, and after
the warm-up no import left for the first message. Each case runs in a fresh interpreter
(this one has imported everything already), against the fake LLM.

These lean on LiteLLM's internals (its `_skip_mcp_handler` switch, where its dry run
stops), so they are what fails loudly when an upgrade changes them: checked with
LiteLLM 1.106.2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLM

from agent.config import LLMSettings
from agent.daemon.warmup import warm_up
from agent.model.client import SKIP_MCP_PROBE

REPO = Path(__file__).resolve().parent.parent
LITELLM = version("litellm")
# What LiteLLM's probe for MCP gateway tools imports: its MCP handlers and the MCP client.
MCP_MODULES = (
    "mcp",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm.responses.mcp.litellm_proxy_mcp_handler",
)
FIRST_CALL = """
import asyncio, json, sys
from agent.config import LLMSettings
from agent.model.client import LLMClient
from agent.model.facts import load_litellm

settings = LLMSettings(model="openai/primary", api_base=sys.argv[1], num_retries=0)
load_litellm()
if sys.argv[2] == "warm":
    from agent.daemon.warmup import warm_up_now
    warm_up_now(settings)
before = set(sys.modules)
tools = [{"type": "function", "function": {"name": "shell", "description": "Run a command.",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
reply = asyncio.run(LLMClient(settings).complete(messages, tools=tools))
print(json.dumps({"reply": reply.content, "new": sorted(set(sys.modules) - before),
                  "loaded": sorted(sys.modules)}))
"""


def first_call(fake: FakeLLM, mode: str) -> dict[str, Any]:
    """One tools= call in a fresh interpreter, after a warm-up or not: the reply, the
    modules the call imported, and every module loaded at the end."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, fake.base_url, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"OPENAI_API_KEY": "sk-test-key-not-real-0000", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_call_with_tools_imports_no_mcp_client(fake_llm: FakeLLM) -> None:
    fake_llm.script("plain answer")
    result = first_call(fake_llm, "cold")
    assert result["reply"] == "plain answer"
    probed = [name for name in MCP_MODULES if name in result["loaded"]]
    assert not probed, (
        f"LiteLLM {LITELLM} probed our tools for MCP gateway tools ({probed}) although we "
        f"pass {SKIP_MCP_PROBE}=True: find its new switch and update agent/model/client.py"
    )
    [body] = fake_llm.requests
    assert body["tools"][0]["function"]["name"] == "shell"
    assert not [key for key in body if "mcp" in key], "LiteLLM sent its switch to the provider"


def test_after_the_warm_up_the_first_call_imports_next_to_nothing(fake_llm: FakeLLM) -> None:
    fake_llm.script("warm answer")
    result = first_call(fake_llm, "warm")
    assert result["reply"] == "warm answer"
    assert len(fake_llm.requests) == 1  # the warm-up sent nothing
    new = result["new"]
    # Cold, this call imports about 470 modules (24 of LiteLLM's, 450 of the OpenAI SDK's).
    assert not [name for name in new if name.startswith("openai")], new
    assert len([name for name in new if name.startswith("litellm")]) <= 5, (
        f"with LiteLLM {LITELLM} the first call still imports {new}: warm them in "
        "agent/daemon/warmup.py"
    )


async def test_a_warm_up_that_fails_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    await warm_up(LLMSettings(model="no-provider-knows-this-model"))
    assert "could not warm up LiteLLM" in caplog.text
