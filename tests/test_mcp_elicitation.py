"""MCP elicitation as a pause of the run: a server's question appears in `result.pending` with
its requested schema; the run resumes with an `ElicitationAnswer` (validated against that schema)
or a refusal, after a JSON round trip of its history; with no way to answer (a call outside a run)
the server gets the protocol's decline at once. Both ways a server asks are tested: mid-call on a
handshake revision (2025-11-25), in an `input_required` result on the stateless one (2026-07-28),
where a keyed question can also be answered by another process. The server is
tests/mcp_fixture_server.py over stdio (its `ask` tool asks through the SDK's resolvers).

Run against Temporal, see test_temporal_mcp.py."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from pydantic import TypeAdapter
from test_mcp import CONTEXT, FIXTURE_SERVER, by_name, call
from test_mcp import errlog as errlog  # the fixture
from test_mcp import http_url as http_url  # the fixture

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ElicitationAnswer,
    FunctionModel,
    MCPServer,
    PendingCall,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed.tools._mcp_session import Revision

HISTORY = TypeAdapter(list[ChatMessage])
NAME = {"properties": {"name": {"title": "Name", "type": "string"}}, "required": ["name"]}
SCHEMAS = {
    "newest": {**NAME, "type": "object"},
    "handshake": {**NAME, "title": "Name", "type": "object"},
}
"""The requested schema as each revision's server sends it (the handshake's keeps the title)."""
REVISIONS = pytest.mark.parametrize("revision", ["newest", "handshake"])


def asks(arguments: str = "{}", tool: str = "ask") -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return AiMessage(text=f"the tool said: {results[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=tool, arguments=arguments)])

    return FunctionModel(reply)


def server(errlog: TextIO, revision: Revision = "newest", **options: Any) -> MCPServer:
    return MCPServer.stdio(
        sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision, **options
    )


def round_trip(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return HISTORY.validate_json(HISTORY.dump_json(list(messages)))


@REVISIONS
def test_a_question_pauses_the_run_and_an_answer_resumes_it(
    errlog: TextIO, revision: Revision
) -> None:
    with server(errlog, revision) as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(), "who am I?")
        (pending,) = paused.pending
        assert (pending.call.id, pending.reason) == ("c1", "elicitation")
        question = pending.elicitation
        assert question is not None
        assert (question.message, question.schema) == ("What is your name?", SCHEMAS[revision])
        if revision == "newest":  # asked in a result: keyed, with the server's state
            assert question.key == "__main__:_first"
            assert question.state is not None and question.state.startswith("v1.")
        else:  # asked mid-call: the call waits open
            assert (question.key, question.state) == (None, None)
        history = round_trip(paused.messages)
        answer = ElicitationAnswer({"name": "Ada"})
        done = service.chat(asks(), history, approvals={"c1": answer})
    assert done.final_response.ai_message.text == "the tool said: answer: accept Ada"
    assert done.pending == ()


@REVISIONS
async def test_a_refusal_and_a_second_question_under_achat(
    errlog: TextIO, revision: Revision
) -> None:
    async with server(errlog, revision) as mcp:
        service = ToolService([mcp])
        paused = await service.achat(asks('{"twice": true}'), "who am I?")
        again = await service.achat(
            asks(), round_trip(paused.messages), approvals={"c1": ElicitationAnswer({"name": "A"})}
        )
        assert [p.reason for p in again.pending] == ["elicitation"]  # the server asks again
        refused = ElicitationAnswer(action="decline")
        done = await service.achat(asks(), round_trip(again.messages), approvals={"c1": refused})
    assert done.final_response.ai_message.text == "the tool said: answer: accept A, decline"


@REVISIONS
def test_an_answer_the_schema_refuses_is_a_tool_arguments_error(
    errlog: TextIO, revision: Revision
) -> None:
    with server(errlog, revision) as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(), "who am I?")
        with pytest.raises(ToolArgumentsError) as refused:
            service.chat(asks(), paused.messages, approvals={"c1": ElicitationAnswer({"name": 5})})
        assert str(refused.value) == (
            "invalid arguments for tool 'ask': $.name: Input should be of type string"
        )
        assert refused.value.errors[0].input == 5
        with pytest.raises(ValueError, match="a 'decline' answer carries no content"):
            decline = ElicitationAnswer({"name": "x"}, action="decline")
            service.chat(asks(), paused.messages, approvals={"c1": decline})
        # The question is still open: a valid answer goes through.
        ok = ElicitationAnswer({"name": "Bo"})
        done = service.chat(asks(), paused.messages, approvals={"c1": ok})
    assert done.final_response.ai_message.text == "the tool said: answer: accept Bo"


@REVISIONS
def test_without_a_way_to_answer_the_server_is_declined_at_once(
    errlog: TextIO, revision: Revision
) -> None:
    with server(errlog, revision, timeout=5) as mcp:
        started = time.monotonic()
        result = by_name(mcp)["ask"].execute(call("ask", {}), CONTEXT)  # no run to pause
    assert time.monotonic() - started < 4
    assert result.text == "answer: decline"


@REVISIONS
def test_an_answer_after_the_question_closed_is_an_error_the_model_reads(
    errlog: TextIO, revision: Revision
) -> None:
    with server(errlog, revision) as mcp:
        paused = ToolService([mcp]).chat(asks(), "who am I?")
    with server(errlog, revision) as restarted:  # a new process: nothing remembers the question
        service = ToolService([restarted])
        done = service.chat(
            asks(), round_trip(paused.messages), approvals={"c1": ElicitationAnswer({"name": "X"})}
        )
    assert done.tool_executions[0].result.text == (
        "Tool `ask` failed: the server's question is no longer open (its session ended, or the "
        "program restarted); call the tool again"
    )


def test_a_keyed_question_is_answered_from_another_client(http_url: str) -> None:
    # One server over HTTP, two clients: the second is a program that restarted, with the
    # history and the question it kept as JSON.
    with MCPServer.http(http_url) as mcp:
        paused = ToolService([mcp]).chat(asks(), "who am I?")
    (pending,) = paused.pending
    kept = TypeAdapter(PendingCall).dump_json(pending)
    question = TypeAdapter(PendingCall).validate_json(kept).elicitation
    assert question is not None and question == pending.elicitation
    with MCPServer.http(http_url) as restarted:
        service = ToolService([restarted])
        with pytest.raises(ToolArgumentsError, match=r"\$\.name: Input should be of type string"):
            service.chat(asks(), paused.messages, approvals={"c1": question.answer({"name": 1})})
        answer = question.answer({"name": "Cy"})
        done = service.chat(asks(), round_trip(paused.messages), approvals={"c1": answer})
    assert done.final_response.ai_message.text == "the tool said: answer: accept Cy"


def test_a_state_the_server_no_longer_takes_is_an_error_the_model_reads(errlog: TextIO) -> None:
    # A stdio server is a new process each time: its state was sealed by the one that exited.
    with server(errlog) as mcp:
        paused = ToolService([mcp]).chat(asks(), "who am I?")
    (pending,) = paused.pending
    assert pending.elicitation is not None
    with server(errlog) as restarted:
        answer = pending.elicitation.answer({"name": "Ed"})
        done = ToolService([restarted]).chat(asks(), paused.messages, approvals={"c1": answer})
    assert done.tool_executions[0].result.text == (
        "Tool `ask` failed: MCPError: Invalid or expired requestState"
    )


def test_a_server_that_asks_mid_call_needs_the_handshake(errlog: TextIO) -> None:
    # The stateless revision has no requests from the server: `ctx.elicit` cannot ask there.
    with server(errlog) as mcp:
        refused = ToolService([mcp]).chat(asks(tool="ask_mid_call"), "who am I?")
    assert refused.text == "the tool said: not asked: NoBackChannelError"
    with server(errlog, "handshake") as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(tool="ask_mid_call"), "who am I?")
        answer = ElicitationAnswer({"name": "Di"})
        done = service.chat(asks(tool="ask_mid_call"), paused.messages, approvals={"c1": answer})
    assert done.text == "the tool said: answer: accept Di"
