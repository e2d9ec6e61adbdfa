"""What the first call costs: a model at a server of one's own or at OpenAI itself never
imports LiteLLM (one at OpenAI is priced from LiteLLM's table all the same), every other
model still goes through LiteLLM, and a fallback through LiteLLM imports it only when it is
asked; through LiteLLM no MCP client is imported for our tools, and after the warm-up no
import is left for the first message. Each case runs in a fresh interpreter (this one has
imported everything already), against the fake LLM.

These lean on LiteLLM's internals (its `_skip_mcp_handler` switch, where its dry run
stops), so they are what fails loudly when an upgrade changes them: checked with
LiteLLM 1.106.2.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from daemon_process import agent, rows
from fakes.llm_server import FakeLLM, error

from agent.config import LLMSettings
from agent.daemon.warmup import warm_up
from agent.model.litellm_call import SKIP_MCP_PROBE
from agent.model.profiles.litellm_facts import count_tokens
from agent.model.stand_in_tokenizer import CL100K_CACHED, stand_in_counter

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
from agent.model.profiles.litellm_import import load_litellm

settings = LLMSettings(
    model="openai/primary", api_base=sys.argv[1], num_retries=0, client="litellm"
)
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
        f"pass {SKIP_MCP_PROBE}=True: find its new switch and update agent/model/litellm_call.py"
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


@pytest.mark.parametrize("via", ["auto", "litellm"])
def test_a_one_shot_to_a_server_of_ones_own_imports_neither_litellm_nor_the_openai_sdk(
    llm_env: dict[str, str], fake_llm: FakeLLM, via: str
) -> None:
    """The fake is at 127.0.0.1: its `openai/` model is served directly over httpx, unless
    llm.client says "litellm" (which shows that the count below sees LiteLLM and the SDK when
    they are imported)."""
    fake_llm.script("answered")
    done = agent(
        "run",
        "-m",
        "hi",
        "--no-daemon",
        env={**llm_env, "PINCLAW_LLM__CLIENT": via, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert (done.returncode, done.stdout) == (0, "answered\n"), done.stderr[-2000:]
    loaded = imported(done.stderr)
    litellm = [name for name in loaded if name.split(".")[0] == "litellm"]
    assert (not litellm) if via == "auto" else len(litellm) > 100, litellm[:5]
    sdk = [name for name in loaded if name.split(".")[0] == "openai"]
    assert (not sdk) if via == "auto" else "openai.resources.chat" in sdk, sdk[:5]


def imported(stderr: str) -> list[str]:
    """The modules PYTHONPROFILEIMPORTTIME listed on stderr."""
    return [line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if "|" in line]


def litellms_price(input_tokens: int, cached: int, output_tokens: int) -> float:
    """What gpt-4o-mini's call costs by the table LiteLLM ships, read here as it is."""
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(spec.submodule_search_locations[0])
    rates = json.loads((folder / "model_prices_and_context_window_backup.json").read_text())
    rate = rates["gpt-4o-mini"]
    return float(
        (input_tokens - cached) * rate["input_cost_per_token"]
        + cached * rate["cache_read_input_token_cost"]
        + output_tokens * rate["output_cost_per_token"]
    )


@pytest.mark.parametrize("via", ["auto", "litellm"])
def test_a_one_shot_to_openai_never_imports_litellm_and_is_priced_by_its_table(
    llm_env: dict[str, str], fake_llm: FakeLLM, home: Path, via: str
) -> None:
    """No api_base: the fake stands in for api.openai.com through OPENAI_BASE_URL. With
    llm.client = "litellm" the same one-shot goes through LiteLLM, at the same price."""
    fake_llm.script("answered")
    fake_llm.cached_tokens = 3
    env = {
        **llm_env,
        "PINCLAW_LLM__MODEL": "openai/gpt-4o-mini",
        "PINCLAW_LLM__API_BASE": "",
        "OPENAI_BASE_URL": fake_llm.base_url,
        "PINCLAW_LLM__CLIENT": via,
        "PYTHONPROFILEIMPORTTIME": "1",
    }
    done = agent("run", "-m", "hi", "--no-daemon", env=env)
    assert (done.returncode, done.stdout) == (0, "answered\n"), done.stderr[-2000:]
    litellm = [name for name in imported(done.stderr) if name.split(".")[0] == "litellm"]
    assert (not litellm) if via == "auto" else len(litellm) > 100, litellm[:5]
    [body] = fake_llm.requests
    assert body["model"] == "gpt-4o-mini"
    sql = "SELECT model, input_tokens, cached_tokens, output_tokens, cost_usd FROM usage"
    [(model, input_tokens, cached, output_tokens, cost)] = rows(home / "state.db", sql)
    assert (model, cached) == ("openai/gpt-4o-mini", 3) and input_tokens > 3
    assert cost == pytest.approx(litellms_price(input_tokens, cached, output_tokens))


def test_a_one_shot_to_anthropic_still_goes_through_litellm(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    env = {
        **llm_env,
        "PINCLAW_LLM__MODEL": "anthropic/claude-sonnet-4-5",
        "PINCLAW_LLM__API_BASE": fake_llm.base_url.removesuffix("/v1"),  # its Messages API
        "ANTHROPIC_API_KEY": "sk-ant-test-not-real",
        "PYTHONPROFILEIMPORTTIME": "1",
    }
    done = agent("run", "-m", "hi", "--no-daemon", env=env)
    assert (done.returncode, done.stdout) == (0, "echo: anthropic\n"), done.stderr[-2000:]
    assert len([name for name in imported(done.stderr) if name.startswith("litellm.")]) > 100


def test_a_dot_env_above_litellm_cannot_send_the_key_elsewhere(
    llm_env: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """README's install puts the venv inside the clone, and LiteLLM in its default mode loads
    the first .env above its own folder. Here LiteLLM sits in a folder whose parent holds a
    .env, as a model that can write there would leave it: it names another Anthropic base
    URL, which LiteLLM prefers to the one the user set (ANTHROPIC_BASE_URL). The one-shot still
    goes to the user's, and the stranger's server sees nothing."""
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "litellm").symlink_to(spec.submodule_search_locations[0])
    with FakeLLM() as stranger:
        (tmp_path / ".env").write_text(f"ANTHROPIC_API_BASE={stranger.base_url[:-3]}\n")
        env = {
            **llm_env,
            "PINCLAW_LLM__MODEL": "anthropic/claude-sonnet-4-5",
            "PINCLAW_LLM__API_BASE": "",
            "ANTHROPIC_BASE_URL": fake_llm.base_url.removesuffix("/v1"),
            "ANTHROPIC_API_KEY": "sk-ant-test-not-real",
            "PYTHONPATH": str(tmp_path / "site"),
        }
        done = agent("run", "-m", "hi", "--no-daemon", env=env)
        assert (done.returncode, done.stdout) == (0, "echo: anthropic\n"), done.stderr[-2000:]
        assert stranger.requests == [] and len(fake_llm.requests) == 1


FALLBACK = """
import asyncio, json, sys
from agent.config import LLMSettings
from agent.model.client import LLMClient

settings = LLMSettings(
    model="openai/gpt-4o-mini", fallback_models=["anthropic/claude-sonnet-4-5"], num_retries=0
)
client = LLMClient(settings)
said = []
for _ in range(2):
    reply = asyncio.run(client.complete([{"role": "user", "content": "hi"}]))
    said.append([reply.model, reply.content, "litellm" in sys.modules])
print(json.dumps(said))
"""


def test_a_fallback_through_litellm_imports_it_only_when_it_is_asked(fake_llm: FakeLLM) -> None:
    """The main model at OpenAI (the fake, through OPENAI_BASE_URL) answers, then fails; the
    fallback, an Anthropic model (the fake's Messages API), answers through LiteLLM."""
    fake_llm.script("from OpenAI", error(500))
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "OPENAI_API_KEY": "sk-test-key-not-real-0000",
            "OPENAI_BASE_URL": fake_llm.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-real",
            "ANTHROPIC_API_BASE": fake_llm.base_url.removesuffix("/v1"),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [
        ["openai/gpt-4o-mini", "from OpenAI", False],
        ["anthropic/claude-sonnet-4-5", "echo: anthropic", True],
    ]


def test_a_model_served_directly_is_counted_as_litellm_counts_it() -> None:
    """With LiteLLM's copy of cl100k_base, found without importing LiteLLM: when a release
    moves it, agent/model/stand_in_tokenizer.py must look where it went."""
    counter = stand_in_counter()
    assert counter is not None, f"LiteLLM {LITELLM} keeps no {CL100K_CACHED} where it did"
    schema = {"name": "shell", "parameters": {"type": "object", "properties": {"cmd": {}}}}
    for text in ["Hello there.", "東京 12345 <|endoftext|> `ls -la`", json.dumps(schema)]:
        assert counter(text) == count_tokens("openai/local-model", text)


async def test_a_warm_up_that_fails_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    await warm_up(LLMSettings(model="no-provider-knows-this-model"))
    assert "could not warm up the model's client" in caplog.text
