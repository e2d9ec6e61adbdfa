"""A delegate call cut off while it starts its job (the turn's deadline, a /stop): the job's
row commits anyway, so the job must run and its result come, as the turn run again promises.
Through the daemon in this event loop with the toy channel and the model double, set up as
tests/test_jobs.py sets them up (its fixture); asserts what the chat shows and the job's row
in state.db."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.llm_requests import tool_results
from fakes.model_double import ScriptedModel, delay, text, tool_calls
from test_jobs import OWNER, WAIT_S, Request, job_task, toy  # noqa: F401 (toy: autouse)
from toy_channel.channel import ToyChannel

from agent.durable import jobs as jobs_table
from agent.durable.file.state_db import inserted_id


async def test_a_job_whose_delegate_call_was_cut_mid_write_still_runs_and_reports(
    model: ScriptedModel,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The turn's deadline passes while the delegate call writes the job's row (a slow disk;
    a /stop cuts the same way): the row commits and the turn is cut. The message runs again
    and its delegate call, found in the journal, is rechecked: "job #1 ... runs again now;
    its result will come to this chat as a message". It does: the job was started before
    the cut went on (before, its row stayed queued with no task to run it)."""
    monkeypatch.setenv("PINCLAW_AGENT__TURN_DEADLINE_S", "1")
    monkeypatch.setenv("PINCLAW_AGENT__TURN_RETRY_BACKOFF_S", "0.1")
    entered = threading.Event()

    def slow_insert(cursor: Any) -> int:
        if not entered.is_set():  # the first job's row only
            entered.set()
            time.sleep(1.5)
        return inserted_id(cursor)

    monkeypatch.setattr(jobs_table, "inserted_id", slow_insert)

    def respond(request: Request) -> Any:
        if job_task(request) is not None:  # after the turn run again has answered
            return delay(2, text("the plants are watered"))
        said = tool_results(request)
        return (
            f"noted: {said[-1]}" if said else tool_calls(("delegate", {"task": "water the plants"}))
        )

    model.responder = respond
    async with daemon():
        (toy,) = ToyChannel.built
        assert await toy.say(OWNER, OWNER, "water the plants")
        await eventually(lambda: len(toy.said_in(OWNER)) >= 2, WAIT_S, "the job's result")
        said = toy.said_in(OWNER)
    assert said[0].startswith("noted: ") and "its result will come to this chat" in said[0]
    assert said[1:] == ["Job #1 (water the plants) finished:\nthe plants are watered"]
    assert rows(home / "state.db", "SELECT id, state FROM jobs") == [(1, "done")]
