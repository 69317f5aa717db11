"""The seam between the loop and its drivers: what drives a `Run` (`_run`) with I/O.

`adrive` is the async loop over a run (a model call answers each request, an `Execute` runs each
planned call: the tool itself under `achat`, an activity under the durable driver); `execute` and
`aexecute` run one planned call; `batches` groups a round's calls for concurrent execution.
`Run`, `Planned`, `RunOptions` and `conversation` are re-exported here: a driver outside the loop (`durable`)
imports this module only, never a name with an underscore."""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from .._records import ToolExecution, ToolExecutionResult, new_execution
from .._request import ChatRequest
from .._response import ChatResponse
from ..tools._outcomes import alinks_checked, describe_exception, links_checked, reraise_uncontained
from ._conversation import conversation
from ._events import ToolLoopEvent
from ._options import RunOptions
from ._progress import ProgressSink
from ._results import Outcome
from ._run import Planned, Run

logger = logging.getLogger("agentforge_typed")

if TYPE_CHECKING:
    import asyncio

    from ._persistence import StoredRun


__all__ = [
    "Execute",
    "Planned",
    "Run",
    "RunOptions",
    "adrive",
    "aexecute",
    "asettle",
    "asettle_at",
    "astream_calls",
    "batches",
    "cancel_unfinished",
    "conversation",
    "drive",
    "execute",
    "settle_batch",
]


_AsyncAnswer = Awaitable["ToolExecutionResult | str | None"]


Execute = Callable[[Planned], Awaitable[ToolExecution]]
"""Runs one planned call of a round (the tool itself, or a durable activity)."""


def batches(planned: Sequence[Planned], parallel: bool) -> Iterator[list[Planned]]:
    """Group a round's calls for concurrent execution: runs of independent calls together,
    each `sequential` call alone, in the model's order."""
    batch: list[Planned] = []
    for plan in planned:
        if parallel and not plan.sequential:
            batch.append(plan)
            continue
        if batch:
            yield batch
            batch = []
        yield [plan]
    if batch:
        yield batch


def drive(run: Run, request: Callable[[ChatRequest], ChatResponse]) -> Outcome[Any]:
    """The blocking loop over `run`, a run with nothing to resume and nothing stored (`chat`'s
    common case): `request` answers each model call, and the planned calls run in turn."""
    with run:
        while (planned := run.on_response(request(run.next_request()))) is not None:
            if run.finish_round(planned, [run.settle(plan, execute(plan)) for plan in planned]):
                break
        return run.result()


async def adrive(
    run: Run,
    request: Callable[[ChatRequest], Awaitable[ChatResponse]],
    execute: Execute,
    stored: StoredRun | None = None,
) -> Outcome[Any]:
    """The async loop over `run`: `request` answers each model call and `execute` runs each
    planned call. `achat` passes the model and the tools themselves; a durable driver passes
    activities. With `stored` (the run's hold on its stored conversation), the history is saved
    before each batch runs and after each round, and when the run ends."""
    async with run if stored is None else stored:
        while True:
            planned = run.resumed() or run.on_response(
                await run.answer(request, await run.anext_request())
            )
            if planned is None:
                return await run.aresult() if run.service.guardrails is not None else run.result()
            settled: list[ToolExecution] = []
            for batch in batches(planned, run.service.parallel):
                if stored is not None:
                    await stored.abefore(batch)
                settled += await settle_batch(run, batch, execute)
            if run.finish_round(planned, settled):
                return await run.aresult() if run.service.guardrails is not None else run.result()
            if stored is not None:
                await stored.aafter()


async def settle_batch(run: Run, batch: Sequence[Planned], execute: Execute) -> list[ToolExecution]:
    import asyncio  # loaded by then; not at import, for blocking programs

    tasks = [asyncio.ensure_future(asettle(run, plan, execute)) for plan in batch]
    gathered = asyncio.gather(*tasks)
    try:
        return await gathered
    except GeneratorExit:
        # The run's coroutine is being closed (a durable workflow torn down mid-round): it may
        # await nothing more. Cancelling the gathering cancels every call, and logs nothing.
        gathered.cancel()
        raise
    except BaseException:
        await cancel_unfinished(tasks)
        raise


async def astream_calls(
    run: Run,
    planned: Sequence[Planned],
    progress: ProgressSink,
    signal: asyncio.Event,
    settled: dict[int, ToolExecution],
    stored: StoredRun | None = None,
) -> AsyncGenerator[ToolLoopEvent, None]:
    """Settle a round's calls as `achat` does (`batches`), recording each execution in `settled`
    by its position in the round, and yield, as they happen, the progress the calls report and
    each call's result event as soon as it finishes (its progress first).

    `signal` wakes the stream: set when a call finishes and (from any thread, through the
    progress sink's `wake`) when one reports progress; nothing polls. With `stored`, the history
    is saved before each batch runs, naming its calls.
    """
    import asyncio  # loaded by then; not at import, for blocking programs

    finished: deque[asyncio.Future[tuple[int, ToolExecution]]] = deque()

    def done(task: asyncio.Future[tuple[int, ToolExecution]]) -> None:
        finished.append(task)
        signal.set()

    for batch in batches(planned, run.service.parallel):
        if stored is not None:
            await stored.abefore(batch)
        started = [asyncio.ensure_future(asettle_at(run, plan)) for plan in batch]
        for task in started:
            task.add_done_callback(done)
        try:
            for _ in started:
                while not finished:
                    await signal.wait()
                    signal.clear()
                    for event in progress.take():
                        yield event
                for event in progress.take():
                    yield event
                index, settled[index] = finished.popleft().result()
                yield run.result_event(planned[index], settled[index])
        finally:
            await cancel_unfinished(started)


async def cancel_unfinished(tasks: Sequence[asyncio.Future[Any]]) -> None:
    # When one call of a round raises (a policy or hook) or the run is cancelled, the others must
    # not keep running unobserved after the run has ended: cancel them and wait for their cleanup.
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        import asyncio

        await asyncio.wait(pending)
    # Only the first failure propagates; the others are retrieved here, or asyncio logs each
    # one as "Task exception was never retrieved".
    for task in tasks:
        if not task.cancelled():
            task.exception()


async def asettle(run: Run, plan: Planned, execute: Execute | None = None) -> ToolExecution:
    before, after = run.service.before_tool_call, run.service.after_tool_call
    if plan.tool is not None and run.deferred(plan.preset):
        held = await run.approval.ahold(plan.call, plan.context, plan.tool)
        if held is None:
            plan = run._plan(plan.index, plan.call, approved=True)
        else:
            plan = replace(plan, preset=held)
    guarded = run.service.guardrails is not None
    if guarded and run.guarding(plan):
        plan = await run.aadmit(plan)
    if run.async_before and before is not None and plan.tool is not None and plan.preset is None:
        answer = await cast(_AsyncAnswer, before(plan.call, plan.context))
        if answer is not None:
            run.answered(plan, answer)
    execution = await (execute or aexecute)(plan)
    if guarded:
        execution = await run.aguard_result(plan, execution)
    execution = run.settle(plan, execution)
    if run.async_after and after is not None:
        await cast(Awaitable[None], after(execution))
    return execution


async def asettle_at(run: Run, plan: Planned) -> tuple[int, ToolExecution]:
    return plan.index, await asettle(run, plan)


_now: Callable[[], datetime] = functools.partial(datetime.now, timezone.utc)
"""The time now, in UTC (a partial: no Python frame, as it is called twice per call)."""


def _crashed(exc: BaseException) -> ToolExecutionResult:
    # Executors report failures as results; this only catches a custom executor that raised.
    reraise_uncontained(exc)
    return ToolExecutionResult.error(describe_exception(exc), "execution", exception=exc)


def execute(plan: Planned) -> ToolExecution:
    started = _now()
    result = plan.preset
    if result is None:
        assert plan.tool is not None
        try:
            result = plan.tool.execute(plan.call, plan.context)
        except BaseException as exc:
            result = _crashed(exc)
    elif result.content:  # an external result's links, as its tool's `content_urls` allows
        result = links_checked(result, getattr(plan.tool, "content_urls", "https"))
    return new_execution(plan.call, result, started, _now())


async def aexecute(plan: Planned) -> ToolExecution:
    started = _now()
    result = plan.preset
    if result is None:
        assert plan.tool is not None
        try:
            result = await plan.tool.aexecute(plan.call, plan.context)
        except BaseException as exc:
            result = _crashed(exc)
    elif result.content:
        result = await alinks_checked(result, getattr(plan.tool, "content_urls", "https"))
    return new_execution(plan.call, result, started, _now())
