"""Two boards on the real firmware at once: two simavr rigs running StandardFirmata 2.5.9, one
on its pty ("bench"), one shared by the real ser2net over RFC 2217 ("garage"), as a board on a
Raspberry Pi in the garage would be. What each MCU's registers show is asserted, not what
Firmata says. And what happens to the outputs when the process holding a board dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.ser2net import Ser2Net
from fakes.telegram_server import FakeTelegram
from simavr.sim_board import SimBoard

pytestmark = pytest.mark.realboard
REPO = Path(__file__).resolve().parents[1]
PINS = {"led": {"pin": 13, "mode": "output"}, "fan": {"pin": 9, "mode": "pwm"}}
OWNER = 42


def _cannot(why: str) -> None:
    if os.environ.get("PINCLAW_REALBOARD") == "require":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def garage_sim(simboard: SimBoard) -> Iterator[SimBoard]:
    """A second rig (the first is conftest's `simboard`); both run for the module."""
    try:
        sim = SimBoard(max_lifetime=600).start()
    except (OSError, RuntimeError) as exc:
        _cannot(f"a second simavr rig cannot run here ({exc})")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def ser2net(garage_sim: SimBoard, tmp_path: Path) -> Iterator[Ser2Net]:
    if missing := Ser2Net.missing():
        _cannot(missing)
    with Ser2Net(garage_sim.port, tmp_path / "ser2net") as server:
        yield server


async def test_one_turn_switches_a_pin_on_each_board(
    telegram_model_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram,
    simboard: SimBoard, garage_sim: SimBoard, ser2net: Ser2Net,
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    boards = {"bench": {"port": simboard.port, "pins": PINS, "connect_timeout_s": 5},
              "garage": {"port": ser2net.url, "pins": PINS, "connect_timeout_s": 5}}  # fmt: skip
    monkeypatch.setenv("PINCLAW_BOARDS", json.dumps(boards))
    bench_led = ("gpio_write", {"pin": "bench.led", "value": 1})
    garage_fan = ("pwm_write", {"pin": "fan", "duty": 0.25, "board": "garage"})
    model.script(
        tool_calls(bench_led, garage_fan),
        text("The bench LED is on and the garage fan runs at a quarter."),
    )
    resets_before = garage_sim.stats()["resets"]
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "bench LED on, garage fan to a quarter")
        [reply] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=30)
        assert simboard.output(13) == 1  # PORTB5 of the bench's MCU
        assert garage_sim.pwm(9) == 64 and simboard.pwm(9) in (None, -1)  # OCR1A, garage only
    assert reply.plain == "The bench LED is on and the garage fan runs at a quarter."
    results = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert sorted(results) == ["fan (pin 9) on garage: PWM duty 25%.",
                               "led (pin 13) on bench is now high."]  # fmt: skip
    # ser2net opened the garage's port when pinclaw connected: DTR rose, the MCU reset.
    assert garage_sim.stats()["resets"] == resets_before + 1


HOLDER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from tools.board.board import Board
    from tools.config import HardwareSettings

    async def main():
        board = Board(HardwareSettings(enabled=True, port=sys.argv[1], allowed_pins=[13],
                                       connect_timeout_s=5))
        await board.digital_write(13, 1)
        os.kill(os.getpid(), signal.SIGKILL)  # the host process dies: nothing cleans up

    asyncio.run(main())
    """
)


def _die_holding(port: str) -> int:
    done = subprocess.run([sys.executable, "-c", HOLDER, port], cwd=REPO, timeout=60)
    return done.returncode


def test_a_killed_holder_leaves_the_outputs_until_the_next_open_resets_the_board(
    garage_sim: SimBoard, ser2net: Ser2Net
) -> None:
    """What docs/arduino.md says about a host that dies: nothing runs to set a safe state.
    Directly on the port, the output stays (closing does not reset an Uno; pinclaw clears
    HUPCL so the next open does not either, on real hardware). Through ser2net, it stays until
    ser2net opens the port again for the next client: DTR rises and the board resets."""
    assert _die_holding(garage_sim.port) == -signal.SIGKILL
    assert garage_sim.output(13) == 1  # the dead process's output holds
    resets = garage_sim.stats()["resets"]
    assert _die_holding(ser2net.url) == -signal.SIGKILL
    assert garage_sim.output(13) == 1  # ser2net closed the port; the board still holds it
    assert garage_sim.stats()["resets"] == resets + 1  # the one made by ser2net's open
    probe = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1]))).close()"
    subprocess.run([sys.executable, "-c", probe, str(ser2net.port)], check=True, timeout=10)
    assert garage_sim.wait_for(lambda: garage_sim.stats()["resets"] == resets + 2, 5)
    assert garage_sim.wait_for(lambda: garage_sim.output(13) == 0, 5)  # power-on state
