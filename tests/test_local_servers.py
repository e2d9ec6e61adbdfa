"""Ollama, llama.cpp's llama-server, LM Studio and vLLM, each as a loopback double of its
own API (tests/fakes/ollama_server.py, tests/fakes/local_servers.py), reached by the real
LiteLLM client with the settings docs/models.md gives for it: a one-shot that runs a tool, what
the server said about its model learned by `agent doctor --check-model`, and slow models
served rather than timed out."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.llm_server import FakeLLM, delay, text, tool_calls
from fakes.local_servers import LocalOpenAIServer
from fakes.ollama_server import FakeOllama
from fakes.telegram_server import FakeTelegram
from pydantic import SecretStr

from agent.cli.one_shot import run_once
from agent.cli.prompt_show import prompt_stats
from agent.config import LLMSettings, load_settings
from agent.model.client import LLMClient
from agent.model.responses import LLMError

REPO = Path(__file__).resolve().parent.parent
OWNER = 42
WRITE = tool_calls(("file_write", {"path": "notes.txt", "content": "milk"}))


def use(monkeypatch: pytest.MonkeyPatch, model: str, api_base: str, key: bool = True) -> None:
    """The settings docs/models.md's "Local models" gives for this server."""
    monkeypatch.setenv("PINCLAW_LLM__MODEL", model)
    monkeypatch.setenv("PINCLAW_LLM__API_BASE", api_base)
    monkeypatch.setenv("PINCLAW_LLM__RETRY_BACKOFF_S", "0.01")
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", "x")  # any value: the server checks none


async def one_shot(capsys: pytest.CaptureFixture[str], message: str) -> tuple[int, str, str]:
    code = await run_once(load_settings(), message)
    out = capsys.readouterr()
    return code, out.out, out.err


def doctor() -> str:
    """`agent init`, then `agent doctor --check-model`, as a person runs them: its output."""
    for args in (["init"], ["doctor", "--check-model"]):
        done = subprocess.run(
            [sys.executable, "-m", "agent", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            cwd=REPO,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def quirks(home: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(home / "state.db") as db:
        return sorted(db.execute("SELECT model, quirk, value FROM provider_quirks"))


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama(("qwen2.5:1.5b", "gemma3:4b"), no_tools=("gemma3:4b",)) as server:
        yield server


def server(flavor: str, **options: object) -> Callable[[], LocalOpenAIServer]:
    def make() -> LocalOpenAIServer:
        return LocalOpenAIServer(flavor, **options)  # type: ignore[arg-type]

    return make


# -- Ollama ------------------------------------------------------------------------------


async def test_ollama_runs_a_tool_through_api_chat_with_a_compact_prompt(
    home: Path,
    ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use(monkeypatch, "ollama_chat/qwen2.5:1.5b", ollama.base_url, key=False)
    ollama.script(WRITE, text("Saved it."))
    code, out, err = await one_shot(capsys, "note milk in notes.txt")
    assert (code, out) == (0, "Saved it.\n"), err
    assert (home / "workspace" / "notes.txt").read_text() == "milk"
    first, second = ollama.chats()
    assert first["model"] == "qwen2.5:1.5b" and first["stream"] is False
    assert [t["function"]["name"] for t in first["tools"]][:2] == ["shell", "file_read"]
    system = first["messages"][0]["content"]
    assert "## Tools" in system and "## Runtime" not in system  # compact: served locally
    assert "e.g." not in json.dumps(first["tools"])  # compact schemas: no examples
    assert second["messages"][-1]["role"] == "tool"  # the result went back as Ollama takes it


async def test_ollama_streams_ndjson_and_the_first_token_is_timed(
    ollama: FakeOllama,
) -> None:
    ollama.first_token_delay_s = 0.4
    ollama.script(text("ready when you are"), tool_calls(("shell", {"command": "date"})))
    llm = LLMClient(LLMSettings(model="ollama_chat/qwen2.5:1.5b", api_base=ollama.base_url))
    pieces: list[str] = []
    reply = await llm.complete([{"role": "user", "content": "hi"}], on_text=pieces.append)
    assert "".join(pieces) == reply.content == "ready when you are" and len(pieces) == 3
    assert reply.first_token_s is not None and reply.first_token_s >= 0.4
    called = await llm.complete([{"role": "user", "content": "date?"}], on_text=pieces.append)
    [call] = called.tool_calls  # whole in one line, its arguments an object
    assert (call.name, json.loads(call.arguments)) == ("shell", {"command": "date"})


async def test_an_ollama_model_without_tools_starts_on_the_text_protocol(
    home: Path,
    ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use(monkeypatch, "ollama_chat/gemma3:4b", ollama.base_url, key=False)
    call = '<tool_call>{"name": "file_write", "arguments": {"path": "a.txt", "content": "x"}}'
    ollama.script(text(call + "</tool_call>"), text("Done."))
    code, out, err = await one_shot(capsys, "write x to a.txt")
    assert (code, out) == (0, "Done.\n"), err
    assert (home / "workspace" / "a.txt").read_text() == "x"
    first = ollama.chats()[0]
    assert "tools" not in first  # no refused request first: its profile says no tools
    assert "<tool_call>" in first["messages"][0]["content"]


async def test_doctor_learns_the_ollama_window_and_the_prompt_is_built_for_it(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeOllama(("qwen2.5:1.5b",), num_ctx=8192) as ollama:
        use(monkeypatch, "ollama_chat/qwen2.5:1.5b", ollama.base_url, key=False)
        ollama.script(text("ready"))
        out = doctor()
    assert "note model server: ollama, a window of 8,192 tokens, tool calls in its template" in (
        out
    )
    assert "ok  model call: 'ready'; first token after" in out
    facts = {quirk: value for _, quirk, value in quirks(home)}
    assert facts["server"] == "ollama" and facts["window"] == "8192"
    _, summary = prompt_stats(load_settings(), "cli", None)
    assert "window         8,192 tokens (its server said so" in summary


# -- llama-server ------------------------------------------------------------------------


async def test_llama_server_with_its_timings_field_runs_a_tool(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LocalOpenAIServer("llama-server") as llama:
        use(monkeypatch, "openai/qwen2.5-coder-1.5b", llama.base_url)
        llama.script(WRITE, text("Saved."))
        code, out, err = await one_shot(capsys, "note milk in notes.txt")
        assert (code, out) == (0, "Saved.\n"), err
        assert (home / "workspace" / "notes.txt").read_text() == "milk"
        llama.script(text("streamed, with timings on the last chunk"))
        llm = LLMClient(load_settings().llm)
        reply = await llm.complete([{"role": "user", "content": "hi"}], on_text=lambda _: None)
    assert reply.content == "streamed, with timings on the last chunk"


async def test_doctor_times_the_first_token_of_the_real_first_request(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LocalOpenAIServer("llama-server", n_ctx=16384) as llama:
        use(monkeypatch, "openai/qwen2.5-coder-1.5b", llama.base_url)
        llama.first_token_delay_s = 0.5
        llama.script(text("ready"))
        out = doctor()
        [asked] = llama.chats()
    assert "note model server: llama-server, a window of 16,384 tokens" in out
    timed = out.split("first token after ", 1)[1].split(" s", 1)[0]
    assert float(timed) >= 0.5
    assert "compact prompt: served locally (api_base on 127.0.0.1)" in out
    # what a one-shot sends first: the system prompt and the tools, streamed
    assert asked["stream"] is True and asked["tools"] and asked["messages"][0]["role"] == "system"
    facts = {quirk: value for _, quirk, value in quirks(home)}
    assert facts["window"] == "16384" and float(facts["first_token_s"]) >= 0.5


# -- LM Studio ---------------------------------------------------------------------------


async def test_lm_studio_is_asked_for_its_model_by_its_id(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_id = "qwen2.5-coder-1.5b-instruct"
    with LocalOpenAIServer("lm-studio", models=(model_id,), n_ctx=4096) as studio:
        use(monkeypatch, f"openai/{model_id}", studio.base_url)
        studio.script(WRITE, text("Saved."))
        code, out, err = await one_shot(capsys, "note milk in notes.txt")
        assert (code, out) == (0, "Saved.\n"), err
        assert {body["model"] for body in studio.chats()} == {model_id}
        studio.script(text("ready"))
        assert "note model server: lm-studio, a window of 4,096 tokens" in doctor()
        use(monkeypatch, "openai/qwen2.5-coder-1.5b", studio.base_url)  # not its id
        code, out, err = await one_shot(capsys, "hello")
    assert code == 1 and "was not found" in err and "check llm.model" in err


# -- vLLM --------------------------------------------------------------------------------


async def test_vllm_without_auto_tool_choice_gets_calls_as_text(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = "Qwen/Qwen2.5-1.5B-Instruct"
    with LocalOpenAIServer("vllm", models=(model,)) as vllm:
        use(monkeypatch, f"openai/{model}", vllm.base_url)
        call = '<tool_call>{"name": "file_write", "arguments": {"path": "notes.txt", '
        vllm.script(text(call + '"content": "milk"}}</tool_call>'), text("Saved."))
        code, out, err = await one_shot(capsys, "note milk in notes.txt")
        chats = vllm.chats()
    assert (code, out) == (0, "Saved.\n"), err
    assert (home / "workspace" / "notes.txt").read_text() == "milk"
    assert chats[0].get("tools") and not chats[1].get("tools")  # refused once, then as text
    assert "<tool_call>" in chats[1]["messages"][0]["content"]
    assert (f"openai/{model}", "tools", "xml") in quirks(home)


async def test_vllm_with_auto_tool_choice_takes_native_calls(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = "Qwen/Qwen2.5-1.5B-Instruct"
    with LocalOpenAIServer("vllm", models=(model,), auto_tool_choice=True) as vllm:
        use(monkeypatch, f"openai/{model}", vllm.base_url)
        vllm.script(WRITE, text("Saved."))
        code, out, err = await one_shot(capsys, "note milk in notes.txt")
        assert vllm.chats()[0]["tools"]
    assert (code, out) == (0, "Saved.\n"), err


# -- slow models: served, not timed out ----------------------------------------------------


def slow_llm(base_url: str, **limits: float) -> LLMClient:
    settings = LLMSettings(
        model="openai/qwen2.5-coder-1.5b", api_base=base_url, api_key=SecretStr("x"), num_retries=0
    )
    return LLMClient(settings.model_copy(update=limits))


@pytest.fixture
def llama() -> Iterator[LocalOpenAIServer]:
    with LocalOpenAIServer("llama-server") as found:
        yield found


HI = [{"role": "user", "content": "hi"}]


async def test_a_slow_first_token_is_waited_for_beyond_the_call_timeout(
    llama: LocalOpenAIServer,
) -> None:
    llama.first_token_delay_s = 1.2
    llama.script(text("at last"), text("at last, whole"))
    llm = slow_llm(llama.base_url, timeout_s=0.4, first_token_timeout_s=3.0)
    streamed = await llm.complete(HI, on_text=lambda _: None)
    assert streamed.content == "at last" and (streamed.first_token_s or 0) >= 1.2
    assert (await llm.complete(HI)).content == "at last, whole"  # not streamed: the longer limit


async def test_a_stream_that_keeps_coming_is_not_cut_for_its_length(
    llama: LocalOpenAIServer,
) -> None:
    llama.pieces, llama.chunk_gap_s = 8, 0.25  # two seconds of reply
    llama.script(text("a long answer, streamed slowly, piece by piece"))
    llm = slow_llm(llama.base_url, timeout_s=0.8, first_token_timeout_s=0.8)
    started = time.monotonic()
    reply = await llm.complete(HI, on_text=lambda _: None)
    assert reply.content == "a long answer, streamed slowly, piece by piece"
    assert time.monotonic() - started > 1.6  # twice llm.timeout_s


async def test_an_idle_stream_and_a_first_token_too_late_are_cut(
    llama: LocalOpenAIServer,
) -> None:
    llama.stall_s = 2.0
    llama.script(text("then nothing more comes"))
    llm = slow_llm(llama.base_url, timeout_s=0.5, first_token_timeout_s=5.0)
    with pytest.raises(LLMError, match="did not answer in time"):
        await llm.complete(HI, on_text=lambda _: None)
    llama.stall_s, llama.first_token_delay_s = 0.0, 2.0
    llama.script(text("too late"))
    started = time.monotonic()
    with pytest.raises(LLMError, match="did not answer in time"):
        await slow_llm(llama.base_url, first_token_timeout_s=0.5).complete(HI, on_text=print)
    assert time.monotonic() - started < 1.5


async def test_the_chat_shows_typing_while_a_slow_model_thinks(
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    fake_llm.script(delay(5.0, text("thought it over")))
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "think hard")
        await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=20)
    methods = [call.method for call in fake_telegram.calls if call.method != "getUpdates"]
    before = methods[: methods.index("sendMessage")]
    assert before.count("sendChatAction") >= 2  # renewed while the model thought
