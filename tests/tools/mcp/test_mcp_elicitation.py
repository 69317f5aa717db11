"""MCP elicitation as a pause of the run: a server's question appears in `result.pending` with
its requested schema; the run resumes with an `ElicitationAnswer` (validated against that schema)
or a refusal, after a JSON round trip of its history; with no way to answer (a call outside a run)
the server gets the protocol's decline at once. Both ways a server asks are tested: mid-call on a
handshake revision (2025-11-25), in an `input_required` result on the stateless one (2026-07-28),
where a keyed question can also be answered by another process. The server is
tests/mcp_fixture_server.py over stdio (its `ask` tool asks through the SDK's resolvers).

Run against Temporal, see test_temporal_mcp.py."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
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
    ToolChatResult,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed.tools.mcp._session import Revision

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


# -- questions belong to their conversation ----------------------------------------------------


def two_asked(service: ToolService[None]) -> tuple[ToolChatResult[Any], ToolChatResult[Any]]:
    """Ada's and Bob's conversations, each paused on the same call: c1 / ask / twice."""
    ada = service.chat(asks('{"twice": true}'), "I am Ada")
    bob = service.chat(asks('{"twice": true}'), "I am Bob")
    assert ada.conversation_id != bob.conversation_id
    return ada, bob


def answered(
    service: ToolService[None], paused: ToolChatResult[Any], answer: ElicitationAnswer
) -> ToolChatResult[Any]:
    return service.chat(asks(), paused.messages, approvals={"c1": answer})


def test_bare_answers_of_two_conversations_making_the_same_call_never_cross(
    errlog: TextIO,
) -> None:
    # Remembered by the call alone, Bob's bare answer went out with Ada's server state (which
    # holds her first answer) and came back with her name.
    with server(errlog) as mcp:
        service = ToolService([mcp])
        ada, bob = two_asked(service)
        ada = answered(service, ada, ElicitationAnswer({"name": "A"}))
        bob = answered(service, bob, ElicitationAnswer({"name": "B"}))
        assert [p.reason for p in bob.pending] == ["elicitation"]  # Bob's own second question
        bob = answered(service, bob, ElicitationAnswer({"name": "B2"}))
        ada = answered(service, ada, ElicitationAnswer({"name": "A2"}))
    assert bob.text == "the tool said: answer: accept B, accept B2"
    assert ada.text == "the tool said: answer: accept A, accept A2"


def test_an_answer_carrying_its_question_is_not_replaced_by_another_conversation_s(
    errlog: TextIO,
) -> None:
    with server(errlog) as mcp:
        service = ToolService([mcp])
        ada, bob = two_asked(service)
        ada = answered(service, ada, ElicitationAnswer({"name": "A"}))
        # Ada's second question is remembered now; Bob answers his first, carrying it.
        (pending,) = bob.pending
        assert pending.elicitation is not None
        bob = answered(service, bob, pending.elicitation.answer({"name": "B"}))
        (pending,) = bob.pending
        assert pending.elicitation is not None and pending.elicitation.key == "__main__:_second"
        done = answered(service, bob, pending.elicitation.answer({"name": "B2"}))
    assert done.text == "the tool said: answer: accept B, accept B2"


def test_an_answer_carrying_another_question_than_its_call_paused_on_is_refused(
    errlog: TextIO,
) -> None:
    with server(errlog) as mcp:
        service = ToolService([mcp])
        paused = service.chat(asks(), "who am I?")
        (pending,) = paused.pending
        question = pending.elicitation
        assert question is not None and question.state is not None
        forged = dataclasses.replace(question, state=question.state[:-4] + "AAAA")
        with pytest.raises(ValueError) as refused:
            service.chat(asks(), paused.messages, approvals={"c1": forged.answer({"name": "X"})})
        # The history's record of the pause refuses it first; the conversation's remembered
        # question would too (a history from before pauses were recorded).
        assert str(refused.value) == (
            "the answer for call 'c1' (ask) answers another question than the one the call "
            "waits on ('What is your name?'); nothing was sent"
        )
        other = dataclasses.replace(question, message="Your PIN?", key="pin")
        with pytest.raises(ValueError, match=r"answers another question"):
            service.chat(asks(), paused.messages, approvals={"c1": other.answer({"name": "X"})})
        # Nothing was sent: the question is still open, and its own answer goes through.
        done = service.chat(
            asks(), paused.messages, approvals={"c1": question.answer({"name": "Ada"})}
        )
    assert done.text == "the tool said: answer: accept Ada"


async def test_a_question_asked_during_a_direct_call_never_reaches_a_run_s_user(
    errlog: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    # Handshake: a run's call is in flight (it may pause) when a direct `aexecute` on the same
    # session asks. Counting only the run's calls, the question went to the run's user.
    with (
        caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"),
        server(errlog, "handshake", elicitation_timeout=5) as mcp,
    ):
        service = ToolService([mcp])
        running = asyncio.ensure_future(service.achat(asks('{"seconds": 1.5}', "slow"), "wait"))
        await asyncio.sleep(0.5)
        direct = await by_name(mcp)["ask"].aexecute(call("ask", {}), CONTEXT)
        run = await running
    assert direct.text == "answer: decline"
    assert run.pending == () and run.text == "the tool said: slept 1.5"
    (declined,) = [m for m in caplog.messages if "declined" in m]
    assert declined.endswith(
        "a question declined: 2 calls were in flight on the session, and the protocol does not "
        "say which one asked it"
    )


@REVISIONS
def test_a_question_asked_during_a_direct_call_is_declined_saying_why(
    errlog: TextIO, caplog: pytest.LogCaptureFixture, revision: Revision
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"),
        server(errlog, revision) as mcp,
    ):
        result = by_name(mcp)["ask"].execute(call("ask", {}), CONTEXT)
    assert result.text == "answer: decline"
    if revision == "handshake":  # asked mid-call; in a result, the decline is the answer
        (declined,) = [m for m in caplog.messages if "declined" in m]
        assert declined.endswith(
            "a question declined: the call in flight cannot pause for an answer (it runs "
            "outside a ToolService run, with no way to pause for the user)"
        )
