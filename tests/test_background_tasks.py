"""tools/background.stop_tasks: a stopped task has ended when the call returns, a task that
failed does not make stopping fail, and a cancellation of the stopper itself still arrives
(the hand-written `suppress(CancelledError)` swallowed it)."""

from __future__ import annotations

import asyncio

import pytest

from tools.background import stop_tasks


async def test_every_task_has_ended_and_a_failed_one_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise RuntimeError("broke")

    sleeper = asyncio.create_task(asyncio.sleep(60))
    failed = asyncio.create_task(fail(), name="the failing one")
    await asyncio.sleep(0)
    await stop_tasks(sleeper, None, failed)
    assert sleeper.cancelled() and failed.done()
    assert "the failing one ended with an error: RuntimeError('broke')" in caplog.text


async def test_the_stoppers_own_cancellation_is_not_swallowed() -> None:
    async def stubborn() -> None:  # takes a while to end once cancelled
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.2)

    inner = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    stopper = asyncio.create_task(stop_tasks(inner))
    await asyncio.sleep(0.05)
    stopper.cancel()  # a shutdown cancels whoever was stopping the task
    with pytest.raises(asyncio.CancelledError):
        await stopper
    await asyncio.wait([inner])
