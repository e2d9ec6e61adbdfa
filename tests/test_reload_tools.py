"""What a reload replaces only while no turn runs, in the daemon of this process: the boards
(new pins and limits: the board on the emulator is closed and opened again with them) and the
MCP servers (a server added, its settings changed: started again, its tools offered)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.firmata_board import FirmataBoard
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.telegram_server import FakeTelegram
from mcp_world import TOY
from test_reload import plain, reloaded, write_config

OWNER = 42


@pytest.fixture(autouse=True)
def _status_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pinclaw")


async def ask(fake: FakeTelegram, model: ScriptedModel, *calls: tuple[str, object]) -> str:
    """A message whose turn makes `calls`; the tool results the model was given."""
    model.script(tool_calls(*calls), text("done"))
    answered = len(plain(fake, OWNER))
    fake.inject_message(OWNER, OWNER, "go")
    await fake.await_for(lambda m: m.chat_id == OWNER, count=answered + 1, timeout=15)
    results = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    return str(results[-1]["content"])


def board(emulator: FirmataBoard, more: str = "") -> str:
    port = json.dumps(str(emulator.path))
    return f"[hardware]\nenabled = true\nport = {port}\nconnect_timeout_s = 3\n{more}"


async def test_new_pins_and_limits_of_the_board_apply_to_the_next_turn(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    emulator: FirmataBoard,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = write_config(home, board(emulator, "allowed_pins = [13]\n"))
    async with daemon():
        refused = await ask(fake_telegram, model, ("gpio_write", {"pin": 12, "value": 1}))
        limited = "[hardware.pins.lamp]\npin = 12\nmax_on_s = 1\n"
        config.write_text(board(emulator, "allowed_pins = [13]\n" + limited))
        await reloaded(caplog, "applied: hardware.pins.lamp")
        done = await ask(fake_telegram, model, ("gpio_write", {"pin": "lamp", "value": 1}))
        assert emulator.level(12) == 1
        await fake_telegram.await_for(lambda m: "switched lamp" in (m.plain or ""), timeout=10)
        assert emulator.level(12) == 0  # its new max_on_s
    assert "Pin 12 is not allowed" in refused
    assert "lamp" in done and "is now" in done


async def test_an_mcp_server_added_then_changed_is_started_again_between_turns(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    home: Path,
    daemon: Callable[[], Daemon],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__TOOL_SCHEMA_BUDGET_TOKENS", "0")  # every schema sent
    # Trusted: its results do not taint the chat, so the next turn's call needs no question
    # (this test is about the reload; tests/test_injection_table.py about an untrusted one).
    server = (
        f"[mcp.servers.toy]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(TOY))}]\nread_paths = [{json.dumps(str(TOY.parent))}]\n"
        "trusted = true\n"
    )
    config = write_config(home, "")
    async with daemon():
        before = await ask(fake_telegram, model, ("toy__whoami", {}))
        offered_before = [t["function"]["name"] for t in model.requests[-1]["tools"]]
        config.write_text(server)
        await reloaded(caplog, "applied: mcp.servers.toy")
        first = await ask(fake_telegram, model, ("toy__whoami", {}))
        offered = [t["function"]["name"] for t in model.requests[-1]["tools"]]
        config.write_text(server + 'env = { TOY_SAYS = "hello" }\n')
        await reloaded(caplog, "applied: mcp.servers.toy", count=2)
        second = await ask(fake_telegram, model, ("toy__whoami", {}))
    assert "toy__whoami" not in offered_before and "unknown tool" in before.lower()
    assert "toy__whoami" in offered
    runs = [result.splitlines()[-1] for result in (first, second)]  # under the server's label
    assert runs[0].startswith("run ") and runs[1].startswith("run ") and runs[0] != runs[1]
