"""What people read of jobs: a job's line in /jobs and `agent jobs list`, its details, and
the message that brings a job's result to the chat that asked."""

from __future__ import annotations

from agent.durable.jobs import Job

ENDINGS = {
    "done": "finished",
    "failed": "failed",
    "stopped": "was stopped",
    "cancelled": "was cancelled",
}


def short(task: str, width: int = 60) -> str:
    """The task's first line, cut to `width` characters."""
    first = task.strip().splitlines()[0] if task.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


def job_line(job: Job) -> str:
    """One line: id, state, task, model, tokens, time."""
    return (
        f"#{job.id} {job.state} · {short(job.task, 48)} · {job.model} · "
        f"{job.tokens:,} tokens · {job.seconds:.0f} s"
    )


def jobs_text(jobs: list[Job]) -> str:
    if not jobs:
        return "No jobs."
    return "Jobs (running first, then the newest):\n" + "\n".join(job_line(j) for j in jobs)


def job_details(job: Job) -> str:
    tools = "all of the asker's" if job.tools is None else ", ".join(job.tools) or "none"
    lines = [
        job_line(job),
        f"chat: {job.chat_key}",
        f"asked by: {job.origin.sender_name or job.origin.sender_id}",
        f"tools: {tools}",
        f"limits: {job.time_limit_s:g} s, {job.token_limit:,} tokens",
        f"delivered: {job.delivered or 'not yet'}",
        "task:",
        job.task,
    ]
    if job.result:
        lines += ["result:", job.result]
    return "\n".join(lines)


def result_message(job_id: int, task: str, state: str, result: str) -> str:
    """The message a job's result reaches its chat with when no turn waits for it."""
    return f"Job #{job_id} ({short(task)}) {ENDINGS.get(state, state)}:\n{result}"
