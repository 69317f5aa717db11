"""Once: a tool body runs at most once per decision (DESIGN §4), whatever repeats around it.

Each case is a way one decision could run a body twice: the model call after it failing and
being retried, the workflow code replayed, a decided history resumed with the decision again, a
second decision on the same call, a result too large to carry (Temporal refuses it and retries
the attempt). The one exception is an attempt that did not finish after its side effect (the
worker died, a timeout passed): its activity is retried, and the body may run again — with the
same `ctx.idempotency_key`, which is what this suite checks there.

Every body appends to a ledger file, so the runs are counted outside the driver. The durable
driver runs against Temporal's time-skipping test server (and its dev server, the one with
payload limits) from the installed wheels. A driver joins the axis with one test per case,
named `test_once_<case>_<driver>`, and its entry in `COVERED`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

import temporal_support as support
from conformance import DRIVERS
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from test_temporal import (
    _activities,
    _approving,
    _client,
    _model_attempts,
    _run,
    _waiting,
    on_module_loop,
)
from test_temporal import dev_env as dev_env  # the fixture
from test_temporal import env as env  # the fixture

CASES = {
    "model_retry": "the model call after the body ran fails once and is retried",
    "replay": "the workflow code is replayed over a history whose approved call ran",
    "resume": "the history whose approved call ran is resumed with the decision again",
    "decided_twice": "a call is decided twice, one decision after the other or both at once",
    "result_too_large": "the body's result is too large to carry (in bytes, not characters)",
    "attempt_lost": "an attempt did not finish after the body ran: the same idempotency key",
}
"""The ways one decision could run a body twice."""

COVERED: dict[str, dict[str, str]] = {
    "temporal": {case: f"test_once_{case}_temporal" for case in CASES},
}
"""For each driver on the axis, the test of each case."""


async def _once(env: WorkflowEnvironment, name: str, ledger: Path) -> tuple[Any, str]:
    """Run `OnceWorkflow` on the durable service `name`: its handle and its answer."""
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[support.OnceWorkflow],
        activities=[*support.flaky.activities, *support.charging.activities],
    ):
        handle = await client.start_workflow(
            support.OnceWorkflow.run,
            args=[name, support.Ledger(path=str(ledger))],
            id=f"once-{uuid.uuid4()}",
            task_queue=queue,
        )
        return handle, await asyncio.wait_for(handle.result(), 20)


@on_module_loop
async def test_once_model_retry_temporal(env: WorkflowEnvironment, tmp_path: Path) -> None:
    handle, text = await _once(env, "flaky", tmp_path / "ledger")
    assert text == "paid 12 EUR"
    assert support.entries(tmp_path / "ledger") == ["pay 12"]
    # The model call, the tool's, and the second model call on its second attempt: the retry
    # reads the recorded result, and schedules no tool again.
    assert [name for name, _ in await _activities(handle)] == [
        "flaky.model",
        "flaky.tool.pay",
        "flaky.model",
    ]
    assert await _model_attempts(handle) == [1, 1, 2]


@contextlib.asynccontextmanager
async def _transferred(
    env: WorkflowEnvironment, tmp_path: Path
) -> AsyncIterator[tuple[WorkflowHandle[Any, Any], Path, support.Outcome]]:
    """A transfer approved once, run to its end (its worker still up)."""
    async with _approving(env, tmp_path, "transfer") as (handle, ledger):
        await _waiting(handle)
        await support.approving.decide(handle, approvals={"c1": True})
        outcome = await asyncio.wait_for(handle.result(), 20)
        assert outcome.text == "transfer: sent 250 to bob"
        yield handle, ledger, outcome


@on_module_loop
async def test_once_replay_temporal(env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with _transferred(env, tmp_path) as (handle, ledger, _):
        history = await handle.fetch_history()
    for _ in range(2):
        replayer = Replayer(workflows=[support.ApprovalWorkflow], plugins=[support.PLUGIN])
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None
    assert support.entries(ledger) == ["transfer bob 250"]


@on_module_loop
async def test_once_resume_temporal(env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with _transferred(env, tmp_path) as (handle, ledger, outcome):
        queue = (await handle.describe()).task_queue
        resumed = await handle._client.start_workflow(
            support.ResumeWorkflow.run,
            args=[outcome.messages, {"c1": True}, support.Ledger(path=str(ledger))],
            id=f"resume-{uuid.uuid4()}",
            task_queue=queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(resumed.result(), 20)
    assert isinstance(failure.value.cause, ApplicationError)
    assert failure.value.cause.message == "no pending call has the id(s) 'c1'; pending: none"
    assert support.entries(ledger) == ["transfer bob 250"]


@on_module_loop
async def test_once_decided_twice_temporal(env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with _approving(env, tmp_path, "transfer") as (handle, ledger):
        await _waiting(handle)
        # Two approvers at once: one decision is taken, the other refused.
        both = await asyncio.gather(
            support.approving.decide(handle, approvals={"c1": True}),
            support.approving.decide(handle, approvals={"c1": True}),
            return_exceptions=True,
        )
        refused = [r for r in both if isinstance(r, WorkflowUpdateFailedError)]
        assert len(refused) == 1 and [] in both, both
        # And one after the other.
        with pytest.raises(WorkflowUpdateFailedError):
            await support.approving.decide(handle, approvals={"c1": True})
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == "transfer: sent 250 to bob"
    assert support.entries(ledger) == ["transfer bob 250"]


@on_module_loop
async def test_once_result_too_large_temporal(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    handle, text, failed, lines = await _run(dev_env, "euros", tmp_path)
    assert "over the 2,000,000-byte limit of a durable run's tool results" in text
    assert (lines, failed) == (["euros 900000"], "c1")
    assert await _model_attempts(handle) == [1, 1, 1]


@on_module_loop
async def test_once_attempt_lost_temporal(env: WorkflowEnvironment, tmp_path: Path) -> None:
    # The guide's promise: an activity retried after its body ran runs it again, at least once,
    # with the same idempotency key, so the API it calls performs the effect once.
    _, text = await _once(env, "charging", tmp_path / "ledger")
    assert text == "charged 30"
    first, second = (line.split() for line in support.entries(tmp_path / "ledger"))
    assert (first[3], second[3]) == ("attempt=1", "attempt=2")
    assert first[:3] == second[:3] and len(first[2]) == 32


def test_the_run_once_axis_covers_every_case() -> None:
    assert set(COVERED) <= DRIVERS
    for driver, tests in COVERED.items():
        assert set(tests) == set(CASES), f"{driver}: {sorted(set(CASES) - set(tests))} untested"
        missing = [name for name in tests.values() if name not in globals()]
        assert not missing, f"{driver}: no test named {', '.join(missing)}"
