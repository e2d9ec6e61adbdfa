"""One run of one job: the sub-agent's turn. It gets the `minimal` prompt, a conversation
of its own (the task, nothing of the chat's history), the tools it was given (never
`delegate`: the depth limit is one), and runs as the person whose turn asked — their
audience, their forbidden paths, their approvals (asked of the chat's owner, the job
named) — under the job's time and token limits, its model calls metered as `job`. Its
effectful calls go through the job's journal, so a run after a crash repeats none."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from agent.conversation.recall import readable_scopes
from agent.conversation.scopes import Audience, audience_of, speaker_of
from agent.durable.always_allowed import AlwaysAllowed
from agent.durable.jobs import Job, JobJournal, Jobs, JobState
from agent.durable.sessions import SessionStore
from agent.model.responses import BudgetSpent, LLMError, Message
from agent.runtime.approvals import Parking, turn_approvers
from agent.runtime.jobs.job_model import JobModel, JobStopped
from agent.runtime.jobs.job_texts import short
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.owner.metering import MeteredModel, OwnerControls, Spender, spender_of
from agent.runtime.turn_setup import TurnSetup
from agent.security import Scrubber
from agent.turns.dispatch import NativeDispatcher, XmlDispatcher, configured_dispatcher
from agent.turns.loop import LoopOptions, run_tool_call_loop
from channels.base import Channel
from tools.base import ApprovalRequest, Approver, Tool, ToolCallContext, ToolRegistry
from tools.memory.store import MemoryStore
from tools.taint import Taint

log = logging.getLogger(__name__)

DELEGATE = "delegate"  # the tool a job never gets: sub-agents start no jobs (depth limit 1)
SUB_AGENT = (
    "(You are a sub-agent working for the conversation that asked: do the task with your "
    "tools and answer with its result only; your answer goes back to that conversation. "
    "Nobody will answer questions here.)"
)


@dataclass(frozen=True)
class JobKit:
    """What a channel's runtime lends its jobs: the same parts its turns use."""

    channel: Channel
    setup: TurnSetup
    jobs: Jobs
    controls: OwnerControls
    door: Doorkeeper
    always: AlwaysAllowed
    scrub: Scrubber
    memory: MemoryStore | None
    sessions: SessionStore  # the asking chat's history, which a result sent as a message joins


@dataclass(frozen=True)
class JobEnd:
    state: JobState
    text: str  # the result, or the line that says why it ended without one
    tokens: int
    tainted_by: str = ""  # what it read that the owner did not write


def job_tools(tools: Iterable[Tool], wanted: tuple[str, ...] | None) -> ToolRegistry:
    """The tools a job may use: those asked for among the asker's own, never delegate."""
    return ToolRegistry(
        t for t in tools if t.name != DELEGATE and (wanted is None or t.name in wanted)
    )


async def run_job(job: Job, kit: JobKit, *, parked: Parking) -> JobEnd:
    """Run the job to its end; only cancellation escapes. `parked`: around each wait for a
    person's answer (the job's slot given back meanwhile)."""
    setup, settings = kit.setup, kit.setup.settings
    share = settings.memory.share_group_memories
    audience = audience_of(job.origin, settings.people, share_group_memories=share)
    refusal = await kit.controls.budget.refusal("job")
    if refusal is not None:
        return JobEnd("stopped", refusal, 0)
    spender = spender_of(job.origin, None, audience, settings.people)
    metered = MeteredModel(
        setup.llm, job.model, Spender(spender.chat_key, spender.person, "job"), kit.controls
    )
    model = JobModel(metered, job.token_limit, lambda: kit.jobs.cancel_asked(job.id))
    xml = job.model in setup.runner.quirks.xml_tools
    dispatch = "xml" if xml else configured_dispatcher(settings, job.model)
    ctx = setup.source.context(
        kit.channel.name,
        kit.channel.capabilities,
        dispatcher=dispatch,
        mode="minimal",
        private=audience.owner_private,
    )
    history: list[Message] = [
        {"role": "system", "content": kit.scrub(setup.source.build(ctx).text)},
        {"role": "user", "content": _task_text(job)},
    ]
    taint = Taint()
    taint.read(job.tainted_by.removeprefix("after reading "))
    context = ToolCallContext(
        settings.workspace_dir,
        chat_key=job.chat_key,
        memory_scope=audience.scope,
        recall_scopes=await readable_scopes(kit.memory, audience.recall),
        speaker=speaker_of(job.origin),
        owner_private=audience.owner_private,
        journal=JobJournal(kit.jobs.db, job.id),
        approve=_approver(job, kit, audience, parked),
        taint=taint,
    )
    agent = settings.agent
    options = LoopOptions(
        agent.max_tool_iterations,
        agent.tool_timeout_s,
        agent.max_tool_calls_per_reply,
        agent.max_tool_calls_per_turn,
    )
    try:
        async with asyncio.timeout(job.time_limit_s):
            result = await run_tool_call_loop(
                history,
                job_tools(setup.source.tools, job.tools),
                model,
                context=context,
                options=options,
                dispatcher=NativeDispatcher() if dispatch == "native" else XmlDispatcher(),
                scrub=kit.scrub,
            )
    except TimeoutError:
        why = f"stopped: past its time limit ({job.time_limit_s:g} s)"
        return JobEnd("stopped", why, model.tokens, taint.why())
    except JobStopped as exc:
        return JobEnd(exc.state, str(exc), model.tokens, taint.why())  # type: ignore[arg-type]
    except BudgetSpent as exc:
        return JobEnd("stopped", f"stopped: {exc}", model.tokens, taint.why())
    except LLMError as exc:
        log.error("job #%d: %s", job.id, exc)
        return JobEnd("failed", f"failed: {exc}", model.tokens, taint.why())
    except Exception as exc:
        log.exception("job #%d failed", job.id)
        why = f"failed: an internal error ({type(exc).__name__})"
        return JobEnd("failed", why, model.tokens, taint.why())
    return JobEnd("done", kit.scrub(result.text), model.tokens, taint.why())


def _task_text(job: Job) -> str:
    who = job.origin.sender_name or job.origin.sender_id or "the owner"
    return f"[Job #{job.id}, asked by {who}]\n{job.task}\n\n{SUB_AGENT}"


def _approver(job: Job, kit: JobKit, audience: Audience, parked: Parking) -> Approver:
    """A job's questions go to the chat's owner (privately, unless the chat is the owner's
    own), each naming the job."""
    door = kit.door
    in_chat, privately = turn_approvers(
        kit.channel,
        job.origin.chat,
        door.allows,
        (door.owner_chat, door.is_owner) if door.owner_ids() else None,
        always=kit.always,
        timeout_s=kit.setup.settings.security.approval_timeout_s,
        parked=parked,
    )
    ask = in_chat if audience.owner_private or privately is None else privately
    named = f"[job #{job.id}: {short(job.task, 40)}]"

    async def approve(request: ApprovalRequest) -> bool:
        return await ask(dataclasses.replace(request, action=f"{named} {request.action}"))

    return approve
