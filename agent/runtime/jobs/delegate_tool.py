"""The `delegate` tool: a turn hands a task to a sub-agent, which runs as a durable job
(agent/durable/jobs.py) on the runner of the chat's channel. With `wait` the turn waits for
the result, bounded below the tool time limit (several delegate calls in one reply run side
by side: fan-out, and the reply's results come back together: join); without, or once the
wait is over, the result comes to the chat as a message. What the job may use is never more
than the asker has: a subset of the same tools, a model among the configured ones, limits
no higher than `agent.job_*`."""

from __future__ import annotations

from typing import Any

from agent.durable.jobs import Job, Jobs
from agent.runtime.jobs.job_run import DELEGATE
from agent.runtime.jobs.job_runner import JobRunner
from agent.runtime.jobs.job_texts import ENDINGS
from agent.runtime.queues.turn_slots import TurnSlots
from channels.base import ChatRef, IncomingMessage
from channels.registry import kind_named
from tools.base import ToolCallContext, ToolResult

WAIT_SHARE = 0.9  # of agent.tool_timeout_s: a waiting delegate call ends before the loop cuts it
NOWHERE = "delegate works only where pinclaw keeps chats (the daemon, `agent chat`)."


PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "All it needs: it sees nothing else"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "model": {"type": "string"},
        "wait": {"type": "boolean"},
        "time_limit_s": {"type": "number"},
        "token_limit": {"type": "integer"},
    },
    "required": ["task"],
    "additionalProperties": False,
}


class JobDesk:
    """Where a delegate call finds the job runner of its chat's channel, and the slots all
    channels' jobs share (`agent.max_jobs`): held as a turn's are, so a job waiting for a
    person's answer holds none (`Slot.asking`)."""

    def __init__(self, jobs: Jobs, max_jobs: int) -> None:
        self.jobs = jobs
        self.slots = TurnSlots(max_jobs)
        self._runners: dict[str, JobRunner] = {}

    def attach(self, runner: JobRunner) -> None:
        """The channel's runner (a restarted channel's new one replaces the old)."""
        self._runners[runner.channel_name] = runner

    def runner_for(self, chat_key: str) -> JobRunner | None:
        return self._runners.get(ChatRef.parse(chat_key).channel)


class DelegateTool:
    name = DELEGATE
    description = (
        "Hand a task to a sub-agent with your tools (default: all); its result comes to this "
        "chat, or here with wait (calls of one reply run at once)."
    )
    writes = False  # it changes nothing itself; its job's tools ask for themselves
    effects = True  # a turn run again after a crash does not start the job twice
    repeat_safe = False

    def __init__(self, desk: JobDesk | None) -> None:
        self._desk = desk
        self.parameters = PARAMETERS

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        runner = self._desk.runner_for(call.chat_key) if self._desk else None
        if runner is None:
            return ToolResult.error(NOWHERE)
        made = await self._job(runner, args, call)
        if isinstance(made, ToolResult):
            return made
        # The terminal and the API have no outbox anyone reads: their turns always wait.
        unread = kind_named(runner.channel_name) is None
        job = await runner.start(made)
        if not args.get("wait") and not unread:
            return ToolResult.success(
                f"Job #{job.id} started; its result will come to this chat as a message "
                "when it ends (/jobs lists it)."
            )
        bound = WAIT_SHARE * runner.kit.setup.settings.agent.tool_timeout_s
        end = (await runner.wait([job.id], min(bound, job.time_limit_s + 1.0)))[job.id]
        if end is None:
            where = f"`agent jobs show {job.id}`" if unread else "this chat, as a message"
            return ToolResult.success(
                f"Job #{job.id} is still running after {bound:g} s; its result will be in {where}."
            )
        if end.tainted_by:
            call.taint.read(f"job #{job.id}'s result ({end.tainted_by})")
        return ToolResult(end.state == "done", f"Job #{job.id} {ENDINGS[end.state]}:\n{end.text}")

    async def recheck(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult | None:
        """A delegate call a crash cut off: the job it started, found by its chat and task
        (its row is written before it runs), rather than a second one."""
        if self._desk is None:
            return None
        job = await self._desk.jobs.latest(call.chat_key, str(args.get("task", "")).strip())
        if job is None:
            return ToolResult.error("no job was started: delegate again if it is still wanted")
        if job.state in ("queued", "running"):
            return ToolResult.success(
                f"job #{job.id} was started and runs again now; its result will come to this "
                "chat as a message"
            )
        where = "was sent to this chat" if job.delivered == "message" else "is"
        return ToolResult(
            job.state == "done",
            f"job #{job.id} {ENDINGS[job.state]}; its result {where}:\n{job.result}",
        )

    async def _job(
        self, runner: JobRunner, args: dict[str, Any], call: ToolCallContext
    ) -> Job | ToolResult:
        """The job asked for, checked against what the asker has; else the refusal."""
        setup = runner.kit.setup
        settings = setup.settings
        task = str(args.get("task", "")).strip()
        if not task:
            return ToolResult.error("delegate needs a task: everything the sub-agent must know.")
        own = [name for name in setup.source.tools.names() if name != DELEGATE]
        wanted = args.get("tools")
        if wanted is not None:
            unknown = [name for name in wanted if name not in own]
            if unknown:
                return ToolResult.error(
                    f"Not among your tools: {', '.join(unknown)}. Yours: {', '.join(own)}."
                )
        model = args.get("model") or await runner.kit.controls.model_of(
            call.chat_key, setup.llm.model
        )
        configured = settings.llm.configured_models
        if model not in configured:
            return ToolResult.error(
                f"{model} is not a configured model; choose one of: {', '.join(configured)}."
            )
        agent = settings.agent
        asked_s = float(args.get("time_limit_s") or agent.job_time_limit_s)
        asked_tokens = int(args.get("token_limit") or agent.job_token_limit)
        speaker = call.speaker
        origin = IncomingMessage(
            ChatRef.parse(call.chat_key),
            speaker.id,
            speaker.name,
            "",
            is_group=speaker.in_group,
            sender_username=speaker.username,
        )
        return Job(
            0,
            call.chat_key,
            origin,
            task,
            None if wanted is None else tuple(wanted),
            model,
            max(0.1, min(asked_s, agent.job_time_limit_s)),  # a job may ask for less, not more
            max(1, min(asked_tokens, agent.job_token_limit)),
            tainted_by=call.taint.why(),
        )
