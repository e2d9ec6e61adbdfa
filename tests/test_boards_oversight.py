"""max_on_s, the actuation log and kept readings, against the emulated board and a real
state.db: an output switched off at its deadline with its chat told, the deadline kept or
cleared as the pin changes, every change logged with who asked and what the board
confirmed, and watched readings kept, thinned and charted as a PNG."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes.firmata_board import FirmataBoard
from hardware_calls import eventually
from PIL import Image

from agent.app import open_store
from agent.durable.hardware_records import StateRecords
from tools.base import Speaker, ToolCallContext
from tools.board.board import Board
from tools.board.board_tools import hardware_tools
from tools.board.fleet import Boards
from tools.board.oversight.chart import LINE, Frame
from tools.board.oversight.keeper import Keeper
from tools.board.oversight.log_tools import LogTools
from tools.board.pins import Pins
from tools.config import HardwareSettings

PINS = {
    "pump": {"pin": 8, "mode": "output", "max_on_s": 1.0},
    "fan": {"pin": 9, "mode": "pwm", "max_on_s": 30},
    "light": {"pin": "A0", "mode": "analog"},
}
pytestmark = pytest.mark.both_stores
ANN = ToolCallContext(Path.cwd(), chat_key="telegram:42:", speaker=Speaker("42", "Ann", "ann"))


@dataclass
class Rig:
    keeper: Keeper
    records: StateRecords
    workspace: Path
    told: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, name: str, **args: Any) -> str:
        tools = {t.name: t for t in hardware_tools(self.keeper)}
        tools |= {t.name: t for t in LogTools(self.keeper, "UTC").tools()}
        context = ToolCallContext(self.workspace, ANN.chat_key, speaker=ANN.speaker)
        result = await tools[name].run(args, context)
        return ("" if result.ok else "refused: ") + result.output


@pytest.fixture
async def rig(
    emulator: FirmataBoard, tmp_path: Path, state_store: str | None
) -> AsyncIterator[Rig]:
    store = await open_store(tmp_path / "state.db", url=state_store)
    records = StateRecords(store.db)
    settings = HardwareSettings(enabled=True, port=str(emulator.path), connect_timeout_s=1.0,
                                sampling_interval_ms=10, keep_readings_s=0.05,
                                pins=PINS)  # fmt: skip
    keeper = Keeper(Boards.single(Board(settings)), records)
    made = Rig(keeper, records, tmp_path / "workspace")
    made.workspace.mkdir()

    async def tell(chat: str, text: str) -> None:
        made.told.append((chat, text))

    keeper.tell = tell
    yield made
    await keeper.close()
    await store.close()


async def test_max_on_s_switches_the_pump_off_on_time_and_tells_the_chat(
    rig: Rig, emulator: FirmataBoard
) -> None:
    on_at = time.time()
    said = await rig("gpio_write", pin="pump", value=1)
    assert said == "pump (pin 8) is now high. pinclaw switches it off in 1 s (max_on_s 1 s)."
    [deadline] = await rig.records.deadlines()
    assert (deadline.board, deadline.pin, deadline.chat) == ("board", "8", "telegram:42:")
    assert deadline.due == pytest.approx(on_at + 1.0, abs=0.3)
    await eventually(lambda: emulator.level(8) == 0, within=3.0, what="the pump switched off")
    off_after = emulator.changed_at(8) - (time.monotonic() - (time.time() - on_at))
    assert 0.9 <= off_after <= 1.6
    await eventually(lambda: rig.told, what="the chat told")
    assert rig.told == [("telegram:42:", "pinclaw switched pump (pin 8) off: it had been on "
                         "for 1 s, its max_on_s. It is now low.")]  # fmt: skip
    assert await rig.records.deadlines() == []
    log = (await rig("hardware_log", pin="pump")).splitlines()
    assert log[0] == "Changes of pump (pin 8) in the last 24 h, newest first (UTC):"
    assert log[1].endswith(" pump (pin 8): off, confirmed low; max_on_s by pinclaw in telegram:42:")
    assert log[2].endswith(
        " pump (pin 8): high, confirmed high; gpio_write by Ann (@ann) in telegram:42:"
    )


async def test_a_pump_switched_on_by_a_call_cut_off_mid_write_still_goes_off_on_time(
    rig: Rig, emulator: FirmataBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn is stopped (or the tool's time runs out) while the board confirms the pump
    on: the write landed, so its deadline and its log line must too."""
    confirm = Pins._confirm

    def slow_confirm(pins: Pins, pin: int, mode: int) -> Any:
        time.sleep(0.4)  # the board's report, slow on a busy link
        return confirm(pins, pin, mode)

    monkeypatch.setattr(Pins, "_confirm", slow_confirm)
    writing = asyncio.create_task(rig("gpio_write", pin="pump", value=1))
    await eventually(lambda: emulator.level(8) == 1)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    monkeypatch.undo()
    await eventually(lambda: emulator.level(8) == 0, within=4.0, what="the pump off at max_on_s")
    on = " pump (pin 8): high, confirmed high; gpio_write by Ann (@ann) in telegram:42:"
    assert [line for line in (await rig("hardware_log", pin="pump")).splitlines()
            if line.endswith(on)]  # fmt: skip


async def test_the_first_deadline_holds_while_on_and_switching_off_clears_it(
    rig: Rig, emulator: FirmataBoard
) -> None:
    assert (await rig("pwm_write", pin="fan", duty=0.5)).endswith("(max_on_s 30 s).")
    [first] = await rig.records.deadlines()
    again = await rig("pwm_write", pin="fan", duty=0.8)
    assert again.startswith("fan (pin 9): PWM duty 80%. pinclaw switches it off in ")
    assert await rig.records.deadlines() == [first]  # still on: the same deadline
    assert await rig("pwm_write", pin="fan", duty=0) == "fan (pin 9): PWM duty 0%."
    assert await rig.records.deadlines() == []
    refused = await rig("gpio_pattern", pin="pump", pattern="blink", period_ms=4000)
    assert refused == (
        "refused: Not done: pump (pin 8) may stay on at most 1 s (max_on_s), and this pattern "
        "keeps it on 2 s at a time; give a shorter period_ms."
    )
    assert emulator.level(8) == 0


async def test_watched_readings_are_kept_thinned_and_charted_as_a_png(
    rig: Rig, emulator: FirmataBoard
) -> None:
    board = rig.keeper.boards["board"]
    for raw in (100, 900, 500):
        emulator.set_analog("A0", raw)
        if raw == 100:
            await board.subscribe("A0", "analog", lambda *_: None)
        await asyncio.sleep(0.15)  # several reports, 10 ms apart
    await rig.keeper.readings.flush()
    kept = await rig.records.readings("board", "A0", 0)
    values = [value for _, value in kept]
    assert {100.0, 900.0, 500.0} <= set(values)
    assert len(kept) < 20  # reported every 10 ms; kept at most every 50 ms
    said = await rig("plot_pin", pin="light", hours=1)
    assert said.startswith(f"Chart of light (A0): {len(kept)} readings from ")
    name = said.rpartition("[IMAGE:")[2].removesuffix("] in your reply.")
    assert said.endswith(f"To send it, put [IMAGE:{name}] in your reply.")
    png = (rig.workspace / name).read_bytes()
    image = Image.open(io.BytesIO(png))
    assert (image.format, image.size) == ("PNG", (640, 320))
    frame = Frame.around(kept)
    pixels = image.convert("RGB")
    for at, value in kept:  # every reading is on the line
        assert pixels.getpixel((frame.x(at), frame.y(value))) == LINE
    line = [(x, y) for x in range(640) for y in range(320) if pixels.getpixel((x, y)) == LINE]
    # The line spans the plot area, first reading to last, lowest to highest (2 px wide).
    assert frame.left - 1 <= min(x for x, _ in line) <= frame.left
    assert frame.right <= max(x for x, _ in line) <= frame.right + 1
    assert frame.top - 1 <= min(y for _, y in line) <= frame.top
    assert frame.bottom <= max(y for _, y in line) <= frame.bottom + 1
    nothing = await rig("plot_pin", pin="pump")
    assert nothing.startswith("refused: No readings of pump (pin 8) are kept for the last 24 h")


async def test_old_readings_are_forgotten(rig: Rig) -> None:
    now = time.time()
    await rig.records.keep_readings("board", "A0", [(now - 9 * 86_400, 1.0)], 0)
    await rig.records.keep_readings("board", "A0", [(now, 2.0)], now - 7 * 86_400)
    assert [v for _, v in await rig.records.readings("board", "A0", 0)] == [2.0]


async def test_what_pinclaw_sets_by_itself_is_logged_too(
    emulator: FirmataBoard, tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    records = StateRecords(store.db)
    pins = {"pump": {"pin": 8, "mode": "output", "safe": 0}}
    settings = HardwareSettings(enabled=True, port=str(emulator.path), pins=pins)
    keeper = Keeper(Boards.single(Board(settings)), records)
    try:
        tools = {t.name: t for t in hardware_tools(keeper)}
        assert (await tools["gpio_write"].run({"pin": "pump", "value": 1}, ANN)).ok
        await keeper.close()  # a clean stop: the pump goes to its safe state
        assert emulator.level(8) == 0
        log = [(a.value, a.state, a.source, a.who) for a in await records.actuations()]
        assert log == [
            ("low", "low", "safe state at stop", "pinclaw"),
            ("high", "high", "gpio_write", "Ann (@ann)"),
            ("low", "low", "safe state at start", "pinclaw"),
        ]
    finally:
        await store.close()
