"""JobRunner: one channel's jobs. Each runs as a task, at most `agent.max_jobs` across the
channels at once (the desk's slots); its end and its delivery are one transaction
(agent/durable/jobs.py): into the turn waiting for it, when one still waits, else into the
chat's outbox as a message; a job waiting for a person's answer holds no slot. At start it
takes up what an earlier run left: a job queued or running runs again (its journalled calls
are not repeated), one marked cancelled ends. With the store shared, a sweep every second
takes up a job whose process is gone (its claim free). /stop cancels the chat's jobs; a
shutdown leaves them to the next start (or, shared, to the other processes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Sequence

from agent.durable.file.state_db import Transaction
from agent.durable.jobs import Job
from agent.durable.store import Claims, OneProcess
from agent.model.responses import Message
from agent.runtime.jobs.job_model import CANCEL_ASKED
from agent.runtime.jobs.job_run import JobEnd, JobKit, run_job
from agent.runtime.jobs.job_texts import result_message
from agent.runtime.queues.chat_queues import SHARED_SWEEP_EVERY_S
from agent.runtime.queues.replies import ChatReplies
from agent.runtime.queues.turn_slots import TurnSlots
from channels.base import Reply
from tools.background import despite_a_cut

JOBS = "jobs"  # the claim on a job, when processes share the store
log = logging.getLogger(__name__)


class Ended(Exception):
    """The job had ended already: nothing of this end is written or delivered."""


class JobRunner:
    def __init__(
        self,
        kit: JobKit,
        replies: ChatReplies,
        slots: TurnSlots,
        claims: Claims | None = None,
    ) -> None:
        self.kit = kit
        self._claims = claims or OneProcess()  # processes sharing the store: one runs a job
        self._replies = replies
        self._slots = slots
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._jobs: dict[int, Job] = {}  # the jobs running here
        self._waiting: dict[int, asyncio.Future[JobEnd]] = {}  # a turn waits for the job
        self._stopped: set[int] = set()  # cancelled by /stop (not by a shutdown)
        self._ended: dict[int, Job] = {}  # handed to a waiting turn, until it reads them
        self._background: set[asyncio.Task[None]] = set()
        self._unclaimed: set[int] = set()  # unfinished elsewhere at the last sweep
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def channel_name(self) -> str:
        return self.kit.channel.name

    async def start(self, job: Job) -> Job:
        """The job's row written, then its task started; the job with its id. Both run as one
        task awaited shielded: a call cut off meanwhile (a stopped turn, its deadline) waits
        for them before the cut goes on, as the row commits anyway, and a row with no task
        would never run (until a restart) while the model was told its result will come."""
        return await despite_a_cut(self._add_and_spawn(job))

    async def _add_and_spawn(self, job: Job) -> Job:
        added = await self.kit.jobs.add(job)
        self._spawn(added)
        return added

    def _spawn(self, job: Job, why: str = "") -> None:
        """`why`: said in the log once the job is claimed here (taken over)."""
        self._jobs[job.id] = job
        self._tasks[job.id] = asyncio.create_task(self._run(job, why), name=f"job-{job.id}")

    async def wait(self, job_ids: Sequence[int], timeout_s: float) -> dict[int, JobEnd | None]:
        """Each job's end, for the turn that waits (None: still running after `timeout_s`;
        its result will come as a message). A job's end goes to one waiter only."""
        futures: dict[int, asyncio.Future[JobEnd]] = {}
        for job_id in job_ids:
            if job_id in self._tasks and job_id not in self._waiting:
                futures[job_id] = self._waiting[job_id] = asyncio.get_running_loop().create_future()
        try:
            if futures:
                await asyncio.wait(futures.values(), timeout=timeout_s)
        except asyncio.CancelledError:  # the turn stopped waiting: each result as a message
            for job_id, future in futures.items():
                if self._waiting.get(job_id) is future:
                    del self._waiting[job_id]
                elif future.done():  # handed to this turn, which will never read it
                    self._later(self._as_message(self._ended.pop(job_id), future.result()))
                else:
                    future.cancel()  # its end, being written, goes as a message
            raise
        ends: dict[int, JobEnd | None] = {}
        for job_id in job_ids:
            claimed = futures.get(job_id)
            if claimed is None:
                ends[job_id] = None
            elif self._waiting.get(job_id) is claimed:  # not taken: it goes as a message
                del self._waiting[job_id]
                ends[job_id] = None
            else:  # its end was claimed for this turn: the write is on its way, if not done
                ends[job_id] = await claimed
                self._ended.pop(job_id, None)
        return ends

    def running_in(self, chat_key: str) -> list[int]:
        return [job_id for job_id, job in self._jobs.items() if job.chat_key == chat_key]

    def stop_chat(self, chat_key: str) -> int:
        """/stop: cancel the chat's jobs; how many."""
        ids = self.running_in(chat_key)
        for job_id in ids:
            self._stopped.add(job_id)
            self._tasks[job_id].cancel()
        return len(ids)

    async def stop_elsewhere(self, chat_key: str) -> int:
        """/stop of the chat's jobs this process does not run (another process sharing the
        store does): each marked to be cancelled, which its runner reads before each model
        call; how many."""
        listed = await self.kit.jobs.listed(chat_key)
        others = [j for j in listed if j.state in ("queued", "running") and j.id not in self._jobs]
        for job in others:
            await self.kit.jobs.ask_cancel(job.id)
        return len(others)

    async def _run(self, job: Job, why: str = "") -> None:
        """The job run here — unless another process sharing the store runs it (one that
        started it, or took it up at its start or its sweep), or has just ended it."""
        if not await self._claims.take(JOBS, str(job.id)):
            self._forget(job.id)
            return
        try:
            if self._claims.shared and not await self._unfinished(job.id):
                self._forget(job.id)  # its process ended it and let go as we looked
                return
            if why:
                log.info("job #%d: %s", job.id, why)
            await self._run_claimed(job)
        finally:
            await self._claims.give_back(JOBS, str(job.id))

    async def _run_claimed(self, job: Job) -> None:
        kit = self.kit
        try:
            async with self._slots.hold() as slot:  # given back while a person is asked
                if await kit.jobs.cancel_asked(job.id):
                    end = JobEnd("cancelled", CANCEL_ASKED, 0)
                else:
                    await kit.jobs.started(job.id)
                    end = await run_job(job, kit, parked=slot.asking)
        except asyncio.CancelledError:
            if job.id not in self._stopped:  # a shutdown: the next start runs it again
                self._forget(job.id)
                raise
            end = JobEnd("cancelled", "cancelled (/stop)", 0)
        try:
            await self._end(job, end)
        except Exception:
            log.exception("job #%d: its end could not be written; it runs again at start", job.id)
        finally:
            self._forget(job.id)

    def _forget(self, job_id: int) -> None:
        self._tasks.pop(job_id, None)
        self._jobs.pop(job_id, None)
        self._stopped.discard(job_id)

    def _later(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _end(self, job: Job, end: JobEnd) -> None:
        """The end written and delivered once: to the waiting turn, or as a message."""
        jobs, job_id = self.kit.jobs, job.id
        waiter = self._waiting.pop(job_id, None)  # claimed now: the waiter will not give up
        if waiter is None or waiter.done():

            def ending(conn: Transaction) -> None:
                if not jobs.end_in(conn, job_id, end.state, end.text, end.tokens, "message"):
                    raise Ended
                self._remember(conn, job, end)

            with contextlib.suppress(Ended):
                await self._replies.queue(job.origin.chat, self._reply(job, end), alongside=ending)
            return
        await jobs.db.write(
            lambda conn: jobs.end_in(conn, job_id, end.state, end.text, end.tokens, "turn")
        )
        if waiter.cancelled():  # the turn stopped waiting while the end was written
            await self._as_message(job, end)
            return
        self._ended[job_id] = job
        waiter.set_result(end)

    async def _as_message(self, job: Job, end: JobEnd) -> None:
        """A result the turn it was handed to never read, sent to the chat after all."""
        jobs = self.kit.jobs

        def resent(conn: Transaction) -> None:
            jobs.redeliver_in(conn, job.id)
            self._remember(conn, job, end)

        await self._replies.queue(job.origin.chat, self._reply(job, end), alongside=resent)

    def _remember(self, conn: Transaction, job: Job, end: JobEnd) -> None:
        """The result sent as a message joins the chat's history, so its next turns know it
        (a line that says nobody wrote it, then the message as the assistant's)."""
        note = f"[Job #{job.id} ended; nobody wrote this. Its result, sent to this chat:]"
        said = self._reply(job, end).text
        messages: list[Message] = [
            {"role": "user", "content": note},
            {"role": "assistant", "content": said},
        ]
        taint = end.tainted_by or job.tainted_by
        self.kit.sessions.add_turn(conn, job.chat_key, messages, tainted_by=taint)

    @staticmethod
    def _reply(job: Job, end: JobEnd) -> Reply:
        text = result_message(job.id, job.task, end.state, end.text)
        return Reply(text, previews=not (end.tainted_by or job.tainted_by))

    async def _unfinished(self, job_id: int) -> bool:
        job = await self.kit.jobs.get(job_id)
        return job is not None and job.state in ("queued", "running")

    async def resume(self) -> None:
        """The jobs an earlier run of this channel left, started again; with the store
        shared, from now on those of a process that is gone too (`_take_over`)."""
        for job in await self.kit.jobs.unfinished(self.channel_name):
            if job.id not in self._tasks:
                log.info("job #%d: taken up again after a restart", job.id)
                self._spawn(job)
        if self._claims.shared and self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep(), name=f"{self.channel_name} jobs")

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SHARED_SWEEP_EVERY_S)
            try:
                await self._take_over()
            except Exception as exc:  # the store unreachable for now: next time
                log.warning("%s: the jobs' sweep failed: %s", self.channel_name, exc)

    async def _take_over(self) -> None:
        """The channel's unfinished jobs this process does not run, each tried (`_run` stays
        out while another process holds its claim) from the second sweep that finds it: by
        then a job just added elsewhere is claimed by the process that added it."""
        seen, self._unclaimed = self._unclaimed, set()
        for job in await self.kit.jobs.unfinished(self.channel_name):
            if job.id in self._tasks:
                continue
            if job.id in seen:
                self._spawn(job, "taken over: the process that ran it is gone")
            else:
                self._unclaimed.add(job.id)

    async def drain(self) -> None:
        """Shutdown: the jobs stop where they are, left to the next start."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
