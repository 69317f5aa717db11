"""MCP elicitation as a pause of the run: a server's question during a call appears in
`result.pending` with its requested schema; the run resumes with an `ElicitationAnswer`
(validated against that schema) or a refusal, after a JSON round trip of its history; with no way
to answer (a call outside a run) the server gets the protocol's decline at once. The server is
tests/mcp_fixture_server.py over stdio (its `ask` tool calls the SDK's `ctx.elicit`)."""

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

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    Elicitation,
    ElicitationAnswer,
    FunctionModel,
    MCPServer,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    ToolService,
)

HISTORY = TypeAdapter(list[ChatMessage])
NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name"}},
    "required": ["name"],
    "title": "Name",
}


def asks(arguments: str = "{}") -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return AiMessage(text=f"the tool said: {results[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name="ask", arguments=arguments)])

    return FunctionModel(reply)


def server(errlog: TextIO, **options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, **options)


def round_trip(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return HISTORY.validate_json(HISTORY.dump_json(list(messages)))


def test_a_question_pauses_the_run_and_an_answer_resumes_it(errlog: TextIO) -> None:
    with server(errlog) as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(), "who am I?")
        (pending,) = paused.pending
        assert (pending.call.id, pending.reason) == ("c1", "elicitation")
        assert pending.elicitation == Elicitation("What is your name?", NAME_SCHEMA)
        history = round_trip(paused.messages)
        answer = ElicitationAnswer({"name": "Ada"})
        done = service.chat(asks(), history, approvals={"c1": answer})
    assert done.final_response.ai_message.text == "the tool said: answer: accept Ada"
    assert done.pending == ()


async def test_a_refusal_and_a_second_question_under_achat(errlog: TextIO) -> None:
    async with server(errlog) as mcp:
        service = ToolService([mcp])
        paused = await service.achat(asks('{"twice": true}'), "who am I?")
        again = await service.achat(
            asks(), round_trip(paused.messages), approvals={"c1": ElicitationAnswer({"name": "A"})}
        )
        assert [p.reason for p in again.pending] == ["elicitation"]  # the server asks again
        refused = ElicitationAnswer(action="decline")
        done = await service.achat(asks(), round_trip(again.messages), approvals={"c1": refused})
    assert done.final_response.ai_message.text == "the tool said: answer: accept A, decline"


def test_an_answer_the_schema_refuses_is_a_tool_arguments_error(errlog: TextIO) -> None:
    with server(errlog) as mcp:
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


def test_without_a_way_to_answer_the_server_is_declined_at_once(errlog: TextIO) -> None:
    with server(errlog, timeout=5) as mcp:
        started = time.monotonic()
        result = by_name(mcp)["ask"].execute(call("ask", {}), CONTEXT)  # no run to pause
    assert time.monotonic() - started < 4
    assert result.text == "answer: decline"


def test_an_answer_after_the_question_closed_is_an_error_the_model_reads(errlog: TextIO) -> None:
    with server(errlog) as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(), "who am I?")
    with server(errlog) as restarted:  # a new process: the question is gone
        service = ToolService([restarted])
        done = service.chat(
            asks(), round_trip(paused.messages), approvals={"c1": ElicitationAnswer({"name": "X"})}
        )
    assert done.tool_executions[0].result.text == (
        "Tool `ask` failed: the server's question is no longer open (its session ended, or the "
        "program restarted); call the tool again"
    )
