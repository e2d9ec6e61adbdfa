"""`[hardware] require_approval`: under supervised autonomy every pin write waits for the
owner; a no leaves the pin as it was and tells the model why. The tools are built the way
`agent run` builds them (agent/app.py) and drive an emulated Uno running StandardFirmata.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from attack_world import Owner
from conftest import Daemon
from fakes.firmata_board import FirmataBoard
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.telegram_server import FakeTelegram, buttons
from hardware_calls import board_env

from agent.app import build_tools
from agent.config import load_settings
from agent.proactive.hardware import make_boards
from tools.base import ToolCallContext, ToolRegistry
from tools.board.oversight.keeper import Keeper
from tools.policy import SecurityPolicy

PINS = {
    "led": {"pin": 13, "mode": "output"},
    "fan": {"pin": 9, "mode": "pwm", "description": "ceiling fan"},
    "door": {"pin": 10, "mode": "servo"},
    "light": {"pin": "A0", "mode": "analog"},
}
# Each write tool, its arguments, and the pin's (mode, Firmata state) once it ran; a blink
# twice ends low, after four level changes.
BLINK = {"pin": "led", "pattern": "blink", "period_ms": 40, "repeat": 2}
WRITES = {
    "gpio_write": ({"pin": "led", "value": 1}, 13, ("output", 1)),
    "pwm_write": ({"pin": "fan", "duty": 0.5}, 9, ("pwm", 128)),
    "servo_write": ({"pin": "door", "angle": 90}, 10, ("servo", 90)),
    "gpio_pattern": (BLINK, 13, ("output", 0)),
}


@pytest.fixture
def hardware_env(
    home: Path, emulator: FirmataBoard, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    return board_env(monkeypatch, emulator.path, PINS, sampling_interval_ms="10",
                     require_approval="true")  # fmt: skip


Built = Callable[[str], ToolRegistry]


@pytest.fixture
async def built(hardware_env: dict[str, str], home: Path) -> AsyncIterator[Built]:
    """The tools `agent run` would register at an autonomy level (the board shared)."""
    boards: list[Keeper] = []

    def build(autonomy: str) -> ToolRegistry:
        settings = load_settings(environ={"PINCLAW_HOME": str(home)})
        settings = settings.model_copy(
            update={"security": settings.security.model_copy(update={"autonomy": autonomy})}
        )
        (home / "workspace").mkdir(parents=True, exist_ok=True)
        policy = SecurityPolicy.from_settings(settings.security, settings.workspace_dir)
        board = make_boards(settings)
        assert board is not None
        boards.append(board)
        return build_tools(settings, policy, board)

    yield build
    for board in boards:
        await board.close()


def context(home: Path, owner: Owner) -> ToolCallContext:
    return ToolCallContext(home / "workspace", chat_key="telegram:42", approve=owner)


async def connected(tools: ToolRegistry, home: Path) -> None:
    """Talk to the board once (a read), so a refused write is seen on a live link."""
    info = tools.get("hardware_board_info")
    assert info is not None
    assert (await info.run({}, context(home, Owner(False)))).ok


@pytest.mark.parametrize("tool", sorted(WRITES))
async def test_a_denied_write_leaves_the_pin_and_tells_the_model(
    built: Built, emulator: FirmataBoard, home: Path, tool: str
) -> None:
    tools = built("supervised")
    await connected(tools, home)
    args, pin, _ = WRITES[tool]
    before = (emulator.mode(pin), emulator.state(pin))
    owner = Owner(False)
    writer = tools.get(tool)
    assert writer is not None

    result = await writer.run(args, context(home, owner))

    assert not result.ok
    assert result.output.startswith(f"Not done: the owner did not approve {tool} (")
    assert "the pin is unchanged" in result.output
    [request] = owner.asked
    assert request.tool == tool and request.rules == (f"{tool}:{pin}",)
    assert "require_approval" in request.reason
    assert (emulator.mode(pin), emulator.state(pin)) == before
    assert not [event for event in emulator.events() if event[1] == pin]


@pytest.mark.parametrize("tool", sorted(WRITES))
async def test_an_approved_write_reaches_the_pin(
    built: Built, emulator: FirmataBoard, home: Path, tool: str
) -> None:
    tools = built("supervised")
    args, pin, after = WRITES[tool]
    owner = Owner(True)
    writer = tools.get(tool)
    assert writer is not None
    result = await writer.run(args, context(home, owner))
    assert result.ok, result.output
    assert len(owner.asked) == 1
    if tool == "gpio_pattern":
        deadline = time.monotonic() + 3
        while emulator.transitions(pin) < 4:
            assert time.monotonic() < deadline, "the pattern never ran"
            await asyncio.sleep(0.01)
    assert (emulator.mode(pin), emulator.state(pin)) == after


async def test_reads_and_bad_arguments_ask_nobody(
    built: Built, emulator: FirmataBoard, home: Path
) -> None:
    tools = built("supervised")
    owner = Owner(True)
    call = context(home, owner)
    for name, args in [("gpio_read", {"pin": "led"}), ("analog_read", {"pin": "light"}),
                       ("hardware_capabilities", {})]:  # fmt: skip
        tool = tools.get(name)
        assert tool is not None
        assert (await tool.run(args, call)).ok
    pwm = tools.get("pwm_write")
    assert pwm is not None
    assert not (await pwm.run({"pin": "fan", "duty": 3.0}, call)).ok  # refused before asking
    assert owner.asked == []


async def test_full_autonomy_writes_without_asking(
    built: Built, emulator: FirmataBoard, home: Path
) -> None:
    owner = Owner(False)
    pwm = built("full").get("pwm_write")
    assert pwm is not None
    assert (await pwm.run({"pin": "fan", "duty": 0.5}, context(home, owner))).ok
    assert owner.asked == []
    assert (emulator.mode(9), emulator.state(9)) == ("pwm", 128)


async def test_read_only_refuses_every_write_without_asking(
    built: Built, emulator: FirmataBoard, home: Path
) -> None:
    tools = built("read_only")
    owner = Owner(True)
    for tool, (args, _, _) in WRITES.items():
        writer = tools.get(tool)
        assert writer is not None
        result = await writer.run(args, context(home, owner))
        assert not result.ok and "autonomy is read_only" in result.output
    assert owner.asked == []
    assert emulator.events() == []


# -- from the chat -----------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "state"), [("Approve", ("pwm", 128)), ("Deny", None)])
async def test_the_owner_decides_on_telegram_whether_the_fan_turns(
    telegram_model_env: dict[str, str],
    hardware_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    emulator: FirmataBoard,
    daemon: Callable[[], Daemon],
    label: str,
    state: tuple[str, int] | None,
) -> None:
    before = (emulator.mode(9), emulator.state(9))
    model.script(tool_calls(("pwm_write", {"pin": "fan", "duty": 0.5})), text("done"))
    async with daemon():
        fake_telegram.inject_message(42, 42, "fan to half speed")
        (question,) = await fake_telegram.await_for(lambda m: bool(buttons(m)), timeout=10)
        assert (question.plain or "").startswith(
            "Approve pwm_write: PWM duty 50% on fan (pin 9)\n(Why I ask: [hardware] "
        )
        assert (emulator.mode(9), emulator.state(9)) == before
        fake_telegram.inject_callback_query(42, question, buttons(question)[label])
        await fake_telegram.await_for(lambda m: m.plain == "done", timeout=10)
    assert (emulator.mode(9), emulator.state(9)) == (state or before)
    results: list[Any] = [m["content"] for m in model.requests[1]["messages"]
                          if m["role"] == "tool"]  # fmt: skip
    expected = "fan (pin 9): PWM duty 50%." if state else "Error: Not done: the owner did not"
    assert results[0].startswith(expected)
