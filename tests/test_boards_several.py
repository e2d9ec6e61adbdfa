"""Several boards at once: `[hardware]` as the board named "board" beside `[boards.NAME]`,
pin names across boards (unique, or written board.pin), a `board` argument offered only
when there are several, a board that is down answering for itself while the others work,
and a pin watch on a network board that pauses and resumes with the chat told once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from fakes.fault_proxy import FaultProxy
from fakes.firmata_board import FirmataBoard
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.tcp_serial import TcpSerial
from fakes.telegram_server import FakeTelegram
from hardware_calls import eventually
from pydantic import ValidationError

from agent.config import ConfigError, load_settings
from tools.base import Tool, ToolCallContext
from tools.board.board import Board
from tools.board.board_tools import hardware_tools
from tools.board.fleet import Boards
from tools.board.oversight.keeper import Keeper
from tools.board.pin_names import PinNames
from tools.board.pin_policy import PinError
from tools.config import BoardSettings, HardwareSettings

BENCH = {"led": {"pin": 13}, "fan": {"pin": 9, "mode": "pwm"}}
GARAGE = {"led": {"pin": 13}, "door": {"pin": 7}, "light": {"pin": "A0", "mode": "analog"}}
OWNER = 42


def names() -> PinNames:
    return PinNames({
        "bench": BoardSettings(pins=BENCH, allowed_pins=[2]),
        "garage": BoardSettings(pins=GARAGE, allowed_pins=[2, 3]),
    })  # fmt: skip


def test_a_pin_is_found_on_its_only_board_or_written_board_dot_pin() -> None:
    found = names()
    door = found.resolve("door", "output")
    assert (door.board, door.ref.token, door.label) == ("garage", 7, "door (pin 7) on garage")
    assert found.resolve(3, "read").board == "garage"
    assert found.resolve("garage.led", "output").label == "led (pin 13) on garage"
    assert found.resolve("led", "output", board="Bench").board == "bench"
    refusals = {
        "led": "'led' is on bench, garage: write it as board.pin (bench.led) or give board.",
        2: "2 is on bench, garage: write it as board.pin (bench.2) or give board.",
        "pump": "Unknown pin 'pump' on every board. Allowed pins on bench:",
    }
    for pin, said in refusals.items():
        with pytest.raises(PinError) as refused:
            found.resolve(pin, "output")
        assert str(refused.value).startswith(said)
    with pytest.raises(PinError, match=r"No board is named 'shed'; the boards are bench, garage\."):
        found.resolve("led", "output", board="shed")
    with pytest.raises(PinError, match=r"'bench\.door' is on bench, not on garage"):
        found.resolve("bench.door", "output", board="garage")


def test_one_board_keeps_its_words_and_labels() -> None:
    alone = PinNames({"board": HardwareSettings(enabled=True, pins=BENCH)})
    assert alone.resolve("led", "output").label == "led (pin 13)"
    with pytest.raises(PinError) as refused:
        alone.resolve(5, "output")
    assert str(refused.value) == "Pin 5 is not allowed. Allowed pins: led (pin 13), fan (pin 9)."


def test_boards_come_from_hardware_and_boards_tables(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[hardware]\nenabled = true\nport = "/dev/ttyACM0"\n'
        '[boards.garage]\nport = "rfc2217://garage-pi.lan:2000"\nrequire_approval = true\n'
        "[boards.garage.pins.door]\npin = 7\n"
        '[boards.shed]\nenabled = false\nport = "socket://shed.lan:3030"\n'
    )
    from tools.config import configured_boards

    settings = load_settings(config)
    boards = configured_boards(settings.hardware, settings.boards)
    assert list(boards) == ["board", "garage"]
    assert boards["garage"].pins["door"].pin == 7 and boards["garage"].require_approval
    config.write_text('[hardware]\nenabled = true\n[boards.board]\nport = "auto"\n')
    with pytest.raises(ConfigError) as clash:
        load_settings(config)
    assert "[hardware] is already the board named 'board'" in " ".join(clash.value.problems)
    monkeypatch.setenv("PINCLAW_BOARDS", json.dumps({"Garage Door": {"port": "auto"}}))
    with pytest.raises(ConfigError) as named:
        load_settings(config)
    assert "board name 'Garage Door': use lowercase letters" in " ".join(named.value.problems)


def test_safe_values_limits_and_interlocks_are_checked_in_the_config() -> None:
    bad = [
        ({"pins": {"fan": {"pin": 9, "mode": "pwm", "safe": 2}}}, "safe = 2 does not fit a pwm"),
        ({"pins": {"b": {"pin": 2, "mode": "input", "safe": 0}}}, "has no safe value"),
        ({"pins": {"b": {"pin": 2, "mode": "servo", "max_on_s": 5}}}, "max_on_s: only an output"),
        ({"pins": BENCH, "interlocks": [["led", "pump"]]}, "'pump' is not a named pin"),
        ({"pins": BENCH, "interlocks": [["led"]]}, "needs two or more different pins"),
    ]
    for values, problem in bad:
        with pytest.raises(ValidationError, match=problem):
            BoardSettings.model_validate(values)


@pytest.fixture
def garage_link(tmp_path: Path) -> Iterator[tuple[FirmataBoard, FaultProxy]]:
    """A second emulated board, served over TCP (a Wi-Fi board) behind the fault proxy."""
    with (
        FirmataBoard(tmp_path / "garage") as garage,
        TcpSerial(garage.path) as served,
        FaultProxy(("127.0.0.1", served.port)) as proxy,
    ):
        yield garage, proxy


@pytest.fixture
async def two(
    emulator: FirmataBoard, garage_link: tuple[FirmataBoard, FaultProxy]
) -> AsyncIterator[dict[str, Tool]]:
    _, proxy = garage_link
    quick = {"connect_timeout_s": 1.0, "sampling_interval_ms": 10}
    keeper = Keeper(Boards({
        "bench": Board(BoardSettings(port=str(emulator.path), pins=BENCH, **quick), name="bench"),
        "garage": Board(BoardSettings(port=proxy.url(), pins=GARAGE, **quick), name="garage"),
    }))  # fmt: skip
    yield {tool.name: tool for tool in hardware_tools(keeper)}
    await keeper.close()


async def run(tools: dict[str, Tool], name: str, **args: Any) -> tuple[bool, str]:
    result = await tools[name].run(args, ToolCallContext(workspace=Path.cwd()))
    return result.ok, result.output


async def test_each_board_is_driven_by_name_and_one_down_does_not_stop_the_other(
    two: dict[str, Tool], emulator: FirmataBoard, garage_link: tuple[FirmataBoard, FaultProxy]
) -> None:
    garage, proxy = garage_link
    assert "board" in two["gpio_write"].parameters["properties"]
    assert await run(two, "gpio_write", pin="door", value=1) == (
        True, "door (pin 7) on garage is now high.")  # fmt: skip
    assert await run(two, "gpio_write", pin="led", value=1, board="bench") == (
        True, "led (pin 13) on bench is now high.")  # fmt: skip
    assert (garage.level(7), emulator.level(13), garage.level(13)) == (1, 1, 0)
    proxy.refuse()
    proxy.drop()  # the garage's Wi-Fi is gone
    ok, said = await run(two, "gpio_write", pin="garage.led", value=1)
    assert not ok and said.startswith("garage: ")
    ok, said = await run(two, "pwm_write", pin="fan", duty=0.5)
    assert (ok, said) == (True, "fan (pin 9) on bench: PWM duty 50%.")
    ok, info = await run(two, "hardware_board_info")
    assert ok  # one board answered
    assert info.startswith(f"## bench\nBoard on {emulator.path}: StandardFirmata.ino 2.5")
    assert f"## garage\ngarage ({proxy.url()}): not reachable: " in info
    proxy.heal()
    assert await run(two, "gpio_read", pin="garage.door") == (
        True, "door (pin 7) on garage: high, mode output.")  # fmt: skip


async def test_one_board_offers_no_board_argument(emulator: FirmataBoard) -> None:
    board = Board(HardwareSettings(enabled=True, port=str(emulator.path), pins=BENCH))
    tools = {tool.name: tool for tool in hardware_tools(board)}
    try:
        for tool in tools.values():
            assert "board" not in tool.parameters.get("properties", {}), tool.name
        refused = await tools["gpio_write"].run(
            {"pin": "led", "value": 1, "board": "board"}, ToolCallContext(workspace=Path.cwd())
        )
        assert refused.output == "Invalid arguments for gpio_write: board: unexpected argument"
    finally:
        await board.close()


async def test_a_watch_on_a_network_board_pauses_and_resumes_and_the_chat_is_told_once(
    telegram_model_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram,
    emulator: FirmataBoard, garage_link: tuple[FirmataBoard, FaultProxy],
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    garage, proxy = garage_link
    quick = {"connect_timeout_s": 1, "sampling_interval_ms": 20, "heartbeat_s": 0.5}
    boards = {"bench": {"port": str(emulator.path), "pins": BENCH, **quick},
              "garage": {"port": proxy.url(), "pins": GARAGE, **quick}}  # fmt: skip
    monkeypatch.setenv("PINCLAW_BOARDS", json.dumps(boards))
    monkeypatch.setenv("PINCLAW_WATCHES__MIN_INTERVAL_S", "0.2")
    garage.set_analog("A0", 100)
    model.script(
        tool_calls(("watch_pin", {"pin": "light", "above": 700, "task": "Say the light is on."})),
        text("Watching the garage light."),
        tool_calls(("gpio_write", {"pin": "bench.led", "value": 1})),
        text("The bench LED is on."),
    )
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "tell me when the garage light goes on")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        proxy.hang()  # the garage's link goes silent: the heartbeat notices
        to_owner = lambda m: m.chat_id == OWNER  # noqa: E731
        [_, paused] = await fake_telegram.await_for(to_owner, count=2, timeout=6)
        fake_telegram.inject_message(OWNER, OWNER, "switch the bench LED on")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=3, timeout=10)
        assert emulator.level(13) == 1  # the bench kept working
        proxy.heal()
        [*_, back] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=4, timeout=8)
    said = [m.plain or "" for m in fake_telegram.sent if m.chat_id == OWNER]
    assert len(said) == 4  # told once that it paused, once that it is back
    assert (paused.plain or "").startswith("I cannot reach garage (no answer to a sync request")
    assert (paused.plain or "").endswith(
        "so pin watch #1 (light (A0) on garage above 700) is paused; it resumes by itself when "
        "garage is back."
    )
    assert back.plain == (
        "Garage is back: pin watch #1 (light (A0) on garage above 700) is listening again."
    )
    system = str(model.requests[0]["messages"][0]["content"])
    assert (
        "- bench: led (pin 13), fan (pin 9)\n- garage: led (pin 13), door (pin 7), light (A0)"
    ) in system


def test_doctor_asks_each_board_and_leaves_its_outputs_alone(
    llm_env: dict[str, str], emulator: FirmataBoard, garage_link: tuple[FirmataBoard, FaultProxy]
) -> None:
    from daemon_process import agent

    garage, proxy = garage_link
    pins = {"door": {"pin": 7, "safe": 1}}  # doctor only looks: no safe state is set
    boards = {"bench": {"port": str(emulator.path), "connect_timeout_s": 2},
              "garage": {"port": proxy.url(), "pins": pins, "connect_timeout_s": 2}}  # fmt: skip
    lines = agent("doctor", env={"PINCLAW_BOARDS": json.dumps(boards)}).stdout.splitlines()
    found = [line for line in lines if line.startswith(("ok  board", "FAIL board"))]
    assert found == [
        f"ok  board bench: StandardFirmata.ino 2.5 on {emulator.path} (Firmata protocol 2.5), "
        "20 pins: digital 2–19, PWM 3, 5, 6, 9–11, analog A0, A1, A2, A3, A4, A5",
        f"ok  board garage: StandardFirmata.ino 2.5 on {proxy.url()} (Firmata protocol 2.5), "
        "20 pins: digital 2–19, PWM 3, 5, 6, 9–11, analog A0, A1, A2, A3, A4, A5",
    ]
    assert garage.level(7) == 0 and garage.transitions(7) == 0


async def test_the_actuation_log_names_the_board_once(
    home: Path, emulator: FirmataBoard, tmp_path: Path
) -> None:
    """A pump on bench switched on by Ann and off by its max_on_s: each line of the log (the
    hardware_log tool and `agent hardware log`) says the board once, in one phrase."""
    import re

    from daemon_process import agent

    from agent.app import open_store
    from agent.durable.hardware_records import StateRecords
    from tools.base import Speaker
    from tools.board.oversight.log_tools import LogTools

    pump = {"pump": {"pin": 8, "mode": "output", "max_on_s": 1.0}}
    with FirmataBoard(tmp_path / "garage") as garage:
        quick = {"connect_timeout_s": 1.0, "sampling_interval_ms": 10}
        boards = {"bench": {"port": str(emulator.path), "pins": pump, **quick},
                  "garage": {"port": str(garage.path), "pins": GARAGE, **quick}}  # fmt: skip
        store = await open_store(home / "state.db")
        keeper = Keeper(
            Boards({
                name: Board(BoardSettings.model_validate(values), name=name)
                for name, values in boards.items()
            }),
            StateRecords(store.db),
        )  # fmt: skip
        tools = {t.name: t for t in [*hardware_tools(keeper), *LogTools(keeper, "UTC").tools()]}
        ann = ToolCallContext(Path.cwd(), "telegram:42:", speaker=Speaker("42", "Ann", "ann"))
        try:
            said = await tools["gpio_write"].run({"pin": "pump", "value": 1}, ann)
            assert said.output == (
                "pump (pin 8) on bench is now high. pinclaw switches it off in 1 s (max_on_s 1 s)."
            )
            await eventually(lambda: emulator.level(8) == 0, within=3.0, what="the pump off")
            await eventually(lambda: not keeper.limits.armed, what="the deadline done")
            for _ in range(100):  # the off row is written just after the pin falls
                result = await tools["hardware_log"].run({"pin": "bench.pump"}, ann)
                if "max_on_s by pinclaw" in result.output:
                    break
                await asyncio.sleep(0.05)
        finally:
            await keeper.close()
            await store.db.close()
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", re.MULTILINE)
    assert stamp.sub("", result.output).splitlines() == [
        "Changes of pump (pin 8) on bench in the last 24 h, newest first (UTC):",
        "pump (pin 8) on bench: off, confirmed low; max_on_s by pinclaw in telegram:42:",
        "pump (pin 8) on bench: high, confirmed high; gpio_write by Ann (@ann) in telegram:42:",
    ]
    printed = agent("hardware", "log", env={"PINCLAW_BOARDS": json.dumps(boards)})
    assert stamp.sub("", printed.stdout).splitlines() == [
        "pump (pin 8) on bench: high, confirmed high; gpio_write by Ann (@ann) in telegram:42:",
        "pump (pin 8) on bench: off, confirmed low; max_on_s by pinclaw in telegram:42:",
    ]
