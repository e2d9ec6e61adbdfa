"""Sub-agents as durable jobs (the delegate tool), through the daemon in this event loop with
the toy channel (tests/toy_channel/) and the in-process model double. A job's requests are
told apart by their task line ("[Job #N, asked by ...]"); the tests assert what the chats
show, what the workspace holds and the jobs' rows in state.db."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.llm_requests import last_user_content, tool_results
from fakes.model_double import ScriptedModel, delay, text, tool_calls
from toy_channel.channel import ToyChannel
from toy_channel.kind import TOY

from agent.prompt.context import SILENT_REPLY
from channels import registry

OWNER, FRIEND = "alice", "bob"  # alice is the owner in [people]; bob is allowed
WAIT_S = 10.0
REPO = Path(__file__).resolve().parent.parent
Request = dict[str, Any]


@pytest.fixture(autouse=True)
def toy(model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "CHANNEL_KINDS", (*registry.CHANNEL_KINDS, TOY))
    for name, value in {
        "PINCLAW_CHANNELS__TOY__ENABLED": "true",
        "PINCLAW_CHANNELS__TOY__ALLOWED_USERS": f'["{OWNER}", "{FRIEND}"]',
        "PINCLAW_PEOPLE__ALICE__TOY": OWNER,
        "PINCLAW_PEOPLE__ALICE__OWNER": "true",
        "PINCLAW_AGENT__SHUTDOWN_GRACE_S": "1",
        "PINCLAW_AGENT__MAX_TOOL_CALLS_PER_REPLY": "20",
        "PINCLAW_AGENT__SUB_AGENTS": "true",
    }.items():
        monkeypatch.setenv(name, value)
    ToyChannel.built.clear()


def the_toy() -> ToyChannel:
    (channel,) = ToyChannel.built
    return channel


async def shown_in(toy: ToyChannel, chat_id: str, count: int) -> list[str]:
    await eventually(lambda: len(toy.said_in(chat_id)) >= count, WAIT_S, f"{count} in {chat_id}")
    return toy.said_in(chat_id)


def job_task(request: Request) -> str | None:
    """The task of a job's request; None for any other request."""
    lines = str(last_user_content(request)).splitlines()
    return lines[1] if lines and lines[0].startswith("[Job #") else None


def jobs_rows(home: Path) -> list[tuple[Any, ...]]:
    return rows(home / "state.db", "SELECT id, state, delivered, result FROM jobs ORDER BY id")


def the_job(said: list[str]) -> str:
    """The one job message among what a chat shows (the parent's reply may come after it)."""
    (found,) = [line for line in said if line.startswith("Job #")]
    return found


def delegate(task: str, **more: Any) -> tuple[str, dict[str, Any]]:
    return ("delegate", {"task": task, **more})


@pytest.mark.both_stores
async def test_a_parent_delegates_two_jobs_and_joins_them(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    def respond(request: Request) -> Any:
        task = job_task(request)
        if task is not None:
            return f"{task}: 12"
        if not tool_results(request):
            return tool_calls(
                delegate("count the apples", wait=True), delegate("count the pears", wait=True)
            )
        return "joined: " + " | ".join(tool_results(request))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "count the fruit, in parallel")
        (answer,) = await shown_in(toy, OWNER, 1)
    assert answer == (
        "joined: Job #1 finished:\ncount the apples: 12 | Job #2 finished:\ncount the pears: 12"
    )
    assert toy.said_in(OWNER) == [answer]  # no second copy as a message
    assert jobs_rows(home) == [
        (1, "done", "turn", "count the apples: 12"),
        (2, "done", "turn", "count the pears: 12"),
    ]
    jobs = [r for r in model.requests if job_task(r) is not None]
    assert len(jobs) == 2
    for request in jobs:  # the minimal prompt, its own conversation, no delegate of its own
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
        assert "delegate" not in [t["function"]["name"] for t in request["tools"]]
        assert "SOUL.md" not in request["messages"][0]["content"]
    parent = model.requests[0]
    assert "delegate" in [t["function"]["name"] for t in parent["tools"]]


@pytest.mark.both_stores
async def test_a_job_not_waited_for_comes_as_one_message_the_chat_remembers(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    def respond(request: Request) -> Any:
        task = job_task(request)
        if task is not None:
            return delay(0.2, text("the summary is ready"))
        if last_user_content(request).endswith("what did the helper say?"):
            return "It said the summary is ready."
        if not tool_results(request):
            return tool_calls(delegate("summarise notes.txt", tools=["file_read"]))
        return "I asked a helper; it will write here."

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "summarise my notes")
        said = await shown_in(toy, OWNER, 2)
        assert await toy.say(OWNER, OWNER, "what did the helper say?")
        await shown_in(toy, OWNER, 3)
    result = "Job #1 (summarise notes.txt) finished:\nthe summary is ready"
    assert said == ["I asked a helper; it will write here.", result]
    assert jobs_rows(home) == [(1, "done", "message", "the summary is ready")]
    (job,) = [r for r in model.requests if job_task(r) is not None]
    assert [t["function"]["name"] for t in job["tools"]] == ["file_read"]  # the subset asked
    history = model.requests[-1]["messages"]  # the next turn knows what the job said
    assert {"role": "assistant", "content": result} in history
    note = next(m for m in history if str(m["content"]).startswith("[Job #1 ended"))
    assert note["role"] == "user" and "nobody wrote this" in note["content"]


async def test_a_job_asks_no_more_than_its_asker_has(
    model: ScriptedModel, daemon: Callable[[], Daemon]
) -> None:
    model.script(
        tool_calls(delegate("x", tools=["launch_rockets"]), delegate("y", model="other/model")),
        text("ok"),
    )
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "try")
        await shown_in(toy, OWNER, 1)
    refused = tool_results(model.requests[1])
    assert refused[0].startswith("Error: Not among your tools: launch_rockets. Yours: shell,")
    assert refused[1].startswith("Error: other/model is not a configured model; choose one of: ")
    assert len(model.requests) == 2  # no job ran


async def test_a_job_past_its_time_limit_is_stopped_and_says_so(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    def respond(request: Request) -> Any:
        if job_task(request) is not None:
            return delay(30, text("too late"))
        return (
            "started" if tool_results(request) else tool_calls(delegate("slow", time_limit_s=0.3))
        )

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "go")
        said = await shown_in(toy, OWNER, 2)
    assert the_job(said) == "Job #1 (slow) was stopped:\nstopped: past its time limit (0.3 s)"
    assert jobs_rows(home)[0][:3] == (1, "stopped", "message")


async def test_a_job_past_its_token_limit_is_stopped_and_says_so(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    def respond(request: Request) -> Any:
        if job_task(request) is not None:
            return tool_calls(("file_list", {"path": "."}))  # on and on, until the limit
        return "started" if tool_results(request) else tool_calls(delegate("dig", token_limit=3000))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "go")
        said = await shown_in(toy, OWNER, 2)
    stopped = the_job(said)
    assert stopped.startswith("Job #1 (dig) was stopped:\nstopped: past its token limit (")
    assert stopped.endswith(" of 3,000 tokens)")
    ((_, state, _, _),) = jobs_rows(home)
    assert state == "stopped"


@pytest.mark.both_stores
async def test_stop_cancels_the_chats_jobs(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    def respond(request: Request) -> Any:
        if job_task(request) is not None:
            return delay(30, text("never"))
        return "on it" if tool_results(request) else tool_calls(delegate("a long haul"))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "go")
        await shown_in(toy, OWNER, 1)
        await eventually(lambda: jobs_rows(home)[0][1] == "running", WAIT_S, "running")
        await toy.say(OWNER, OWNER, "/jobs")
        listing = (await shown_in(toy, OWNER, 2))[1]
        await toy.say(OWNER, OWNER, "/stop")
        said = await shown_in(toy, OWNER, 4)
    assert listing.startswith("Jobs (running first, then the newest):\n#1 running · a long haul · ")
    assert said[2:] == ["Stopping.", "Job #1 (a long haul) was cancelled:\ncancelled (/stop)"]
    assert jobs_rows(home) == [(1, "cancelled", "message", "cancelled (/stop)")]


@pytest.mark.both_stores
async def test_twenty_jobs_run_three_at_a_time_and_each_result_comes_once(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    most = 0

    def respond(request: Request) -> Any:
        nonlocal most
        task = job_task(request)
        if task is not None:
            most = max(most, len(model.health.started))  # model calls in flight, this one too
            return delay(0.05, text(f"{task} done"))
        if tool_results(request):
            return "twenty started"
        return tool_calls(*(delegate(f"task {n}") for n in range(20)))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "twenty things")
        said = await shown_in(toy, OWNER, 21)
    assert most == 3  # agent.max_jobs
    results = sorted(said[1:])
    assert results == sorted(f"Job #{n + 1} (task {n}) finished:\ntask {n} done" for n in range(20))
    assert {row[1:3] for row in jobs_rows(home)} == {("done", "message")}


async def agent(*args: str) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the owner runs it in another terminal, off the event loop (the toy
    channel is registered in this process only: its settings stay here)."""
    env = {k: v for k, v in os.environ.items() if "TOY" not in k}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent", *args],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
    )  # fmt: skip


async def test_agent_jobs_lists_shows_and_cancels_a_running_job(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__MAX_TOOL_ITERATIONS", "100")
    monkeypatch.setenv("PINCLAW_AGENT__MAX_TOOL_CALLS_PER_TURN", "1000")
    monkeypatch.setenv("PINCLAW_AGENT__JOB_TOKEN_LIMIT", "100000000")

    looks = itertools.count()

    def respond(request: Request) -> Any:
        if job_task(request) is not None:  # a job that goes on looking until it is stopped
            return delay(0.1, tool_calls(("file_list", {"path": f"dir{next(looks)}"})))
        return "on it" if tool_results(request) else tool_calls(delegate("look around"))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "go")
        await shown_in(toy, OWNER, 1)
        listed = await agent("jobs", "list")
        cancelled = await agent("jobs", "cancel", "1")
        said = await shown_in(toy, OWNER, 2)
        shown = await agent("jobs", "show", "1")
    assert listed.stdout.startswith("#1 running · look around · openai/test-model · ")
    assert listed.stdout.rstrip().endswith(f"[toy:{OWNER}:]")
    assert cancelled.returncode == 0 and cancelled.stdout.startswith("Cancelling job #1")
    assert said[1] == "Job #1 (look around) was cancelled:\ncancelled (/stop or agent jobs cancel)"
    assert shown.stdout.startswith("#1 cancelled · look around")
    assert "\ntools: all of the asker's\n" in shown.stdout
    assert "\ndelivered: message\ntask:\nlook around\nresult:\ncancelled (/stop or agent jobs" in (
        shown.stdout
    )


async def test_a_jobs_approval_goes_to_the_owner_naming_the_job(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("old\n")

    def respond(request: Request) -> Any:
        said = tool_results(request)
        if job_task(request) is not None:
            return (
                f"done: {said[-1]}" if said else tool_calls(("shell", {"command": "rm keep.txt"}))
            )
        return "A helper will tidy up." if said else tool_calls(delegate("delete keep.txt"))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(FRIEND, FRIEND, "tidy up please")
        await eventually(lambda: any(s.buttons for s in toy.shown), WAIT_S, "the question")
        assert keep.exists()  # nothing runs before the answer
        toy.press("approve", by=OWNER)
        said = await shown_in(toy, FRIEND, 2)
    (asked,) = [shown for shown in toy.shown if shown.buttons]
    assert asked.chat.chat_id == OWNER  # bob's job asks the owner, privately
    assert asked.text.startswith(
        "Approve shell: [job #1: delete keep.txt] rm keep.txt (in toy:bob:)\n"
    )
    assert said == [
        "A helper will tidy up.",
        "Job #1 (delete keep.txt) finished:\ndone: exit code: 0 (no output)",
    ]
    assert not keep.exists()


async def test_a_jobs_unanswered_question_does_not_hold_up_another_chats_job(
    model: ScriptedModel,
    home: Path,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bob's job asks the owner before it deletes a file; the owner is away. Alice's own job
    (no question) runs meanwhile, as turns do (a turn waiting for a person holds no turn
    slot, issue 40): a job gives its job slot back while its question waits. Before, with
    `max_jobs` questions open every job of every chat waited for the question's whole
    timeout."""
    monkeypatch.setenv("PINCLAW_AGENT__MAX_JOBS", "1")
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "600")  # the owner is away
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text("old\n")

    def respond(request: Request) -> Any:
        said = tool_results(request)
        task = job_task(request)
        if task == "delete keep.txt":
            return (
                f"done: {said[-1]}" if said else tool_calls(("shell", {"command": "rm keep.txt"}))
            )
        if task == "count the pears":
            return "12 pears"
        if said:
            return "A helper is on it."
        asked = str(last_user_content(request))
        return tool_calls(delegate("delete keep.txt" if "tidy" in asked else "count the pears"))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(FRIEND, FRIEND, "tidy up please")
        await eventually(lambda: any(s.buttons for s in toy.shown), WAIT_S, "bob's job's question")
        assert await toy.say(OWNER, OWNER, "how many pears are there?")
        await eventually(lambda: "A helper is on it." in toy.said_in(OWNER), WAIT_S, "started")
        await eventually(
            lambda: any(line.startswith("Job #2") for line in toy.said_in(OWNER)),
            WAIT_S,
            "alice's job's result while bob's question waits",
        )
        said = toy.said_in(OWNER)
        assert keep.exists()  # nobody approved bob's job's deletion
    assert "Job #2 (count the pears) finished:\n12 pears" in said


async def test_a_non_owners_job_cannot_read_what_they_cannot(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    memory = home / "workspace" / "MEMORY.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("the owner's safe code is 4711\n")

    def respond(request: Request) -> Any:
        said = tool_results(request)
        if job_task(request) is not None:
            return f"read: {said[-1]}" if said else tool_calls(("file_read", {"path": "MEMORY.md"}))
        return "Asked." if said else tool_calls(delegate("read MEMORY.md", tools=["file_read"]))

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(FRIEND, FRIEND, "what does MEMORY.md say?")
        said = await shown_in(toy, FRIEND, 2)
    (result,) = [line for line in said if line != "Asked."]  # either may come first
    assert result.startswith("Job #1 (read MEMORY.md) finished:\nread: Error: ")
    assert "4711" not in "".join(toy.said_in(FRIEND))
    assert all("4711" not in str(r["messages"]) for r in model.requests)
    assert memory.read_text() == "the owner's safe code is 4711\n"


@pytest.mark.both_stores
async def test_a_spent_jobs_budget_stops_a_job_before_its_model_is_called(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINCLAW_BUDGET__JOBS_DAILY_USD", "0.5")
    model.script(tool_calls(delegate("an expensive search")), text("on it"))
    async with daemon():
        toy = the_toy()
        rows(  # jobs spent $0.75 today already
            home / "state.db",
            "INSERT INTO usage (at, chat_key, person, started_by, model, input_tokens, "
            "cached_tokens, output_tokens, cost_usd) VALUES (?, ?, ?, 'job', ?, 1, 0, 1, .75)",
            (time.time(), f"toy:{OWNER}:", "alice", "openai/test-model"),
        )
        assert await toy.say(OWNER, OWNER, "search")
        said = await shown_in(toy, OWNER, 2)
    (stopped,) = [line for line in said if line != "on it"]  # either may come first
    assert stopped.startswith(
        "Job #1 (an expensive search) was stopped:\nThe daily budget for jobs ($0.50) is spent;"
    )
    assert len(model.requests) == 2  # the parent's two calls; the job called no model


async def test_a_schedule_starts_a_job_whose_result_comes_to_the_chat(
    model: ScriptedModel, home: Path, daemon: Callable[[], Daemon]
) -> None:
    """A nightly summary as a job: the scheduled turn hands the work to a sub-agent and says
    nothing itself (the silent token); the job's result is what the chat gets."""
    task = "Summarise today's notes as a job."

    def respond(request: Request) -> Any:
        said = tool_results(request)
        if job_task(request) is not None:
            return "Today: three notes, all about tomatoes."
        if "| scheduled]" in str(last_user_content(request)).splitlines()[0]:
            delegated = request["messages"][-1]["role"] == "tool"  # this turn's own call
            return SILENT_REPLY if delegated else tool_calls(delegate("summarise today's notes"))
        later = tool_calls(("schedule_task", {"when": "in 1 second", "task": task}))
        return "Scheduled." if said else later

    model.responder = respond
    async with daemon():
        toy = the_toy()
        assert await toy.say(OWNER, OWNER, "summarise my notes tonight")
        said = await shown_in(toy, OWNER, 2)
        await asyncio.sleep(0.2)  # anything late would show now
    assert toy.said_in(OWNER) == [
        "Scheduled.",
        "Job #1 (summarise today's notes) finished:\nToday: three notes, all about tomatoes.",
    ]
    assert said[0] == "Scheduled."
    assert jobs_rows(home) == [(1, "done", "message", "Today: three notes, all about tomatoes.")]


async def test_a_one_shot_waits_for_its_job_even_unasked(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal has no outbox anyone reads: its delegate calls wait for the result."""
    from agent.app import build_app
    from agent.cli import one_shot
    from agent.config import load_settings

    monkeypatch.setattr(one_shot, "build_app", partial(build_app, model=model))

    def respond(request: Request) -> Any:
        if job_task(request) is not None:
            return "forty-two"
        if request["messages"][-1]["role"] == "tool":
            return f"the helper said: {tool_results(request)[-1]}"
        return tool_calls(delegate("compute the answer"))

    model.responder = respond
    assert await one_shot.run_once(load_settings(), "what is the answer?") == 0
    assert capsys.readouterr().out == "the helper said: Job #1 finished:\nforty-two\n"
