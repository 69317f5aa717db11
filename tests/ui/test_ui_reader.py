"""`RunReader`, the one translator both protocols share, fed streams that servers really send:
ids repeated across answers, calls streamed without ids or under an id the answer does not
keep, text only in the complete answer, progress, a resumed run; and the checks of a client's
history it relies on (`_conversation`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import ui_support
from ui_support import agui_input, agui_run, sse

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ResponseComplete,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.ui import create_app
from agentforge_typed.ui._conversation import CUT_SHORT, checked
from agentforge_typed.ui._errors import InputError
from agentforge_typed.ui._reader import NOT_CALLED

THREAD = "reader-thread-0123456789"


class Streamed(ui_support.StreamOnly):
    """A model that answers each request with the next of `answers`: the stream events to send
    (its complete response last)."""

    def __init__(self, *answers: Sequence[Any]) -> None:
        self.answers = list(answers)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self.answers.pop(0):
            yield event


def complete(text: str | None = None, *calls: ToolCall) -> ResponseComplete:
    reason = FinishReason.TOOL_EXECUTION if calls else FinishReason.STOP
    message = AiMessage(text=text, tool_calls=calls)
    return ResponseComplete(response=ChatResponse(ai_message=message, finish_reason=reason))


LOOKUP = ToolCall(id="b", name="lookup", arguments='{"token": "t"}')
DONE = [complete("done")]


def http(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def both(model: Streamed, vercel: Streamed) -> tuple[list[Any], list[Any], list[Any]]:
    """The AG-UI events, the client's messages after them, and the AI SDK chunks of the same
    answers."""
    messages: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": "go"}]
    async with http(create_app(ui_support.service(), model)) as client:
        events = await agui_run(client, THREAD, messages)
    body = {
        "id": THREAD,
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
    }
    async with http(create_app(ui_support.service(), vercel)) as client:
        chunks = sse((await client.post("/api/chat", json=body)).text)
    return events, messages, chunks


async def test_a_call_streamed_under_another_id_is_closed_as_not_called() -> None:
    answer = [
        ToolCallDelta(index=0, id="a", name="lookup", arguments_delta='{"token": '),
        ToolCallDelta(index=0, arguments_delta='"t"}'),
        complete(None, LOOKUP),
    ]
    events, messages, chunks = await both(Streamed(answer, DONE), Streamed(answer, DONE))
    starts = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    assert starts == ["a", "b"]
    results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert results == {"a": NOT_CALLED, "b": "value-of-t"}
    # The not-called call's result is sealed as standing for nothing: the history goes on.
    assert all("encryptedValue" in m for m in messages if m["role"] != "user")
    messages.append({"id": "u2", "role": "user", "content": "again"})
    async with http(create_app(ui_support.service(), Streamed(DONE))) as client:
        refused = await client.post("/ag-ui", json=agui_input(THREAD, messages))
    assert refused.status_code == 400  # another app: another secret
    kinds = [(c["type"], c.get("toolCallId")) for c in chunks]
    assert ("tool-output-error", "a") in kinds and ("tool-output-available", "b") in kinds


async def test_a_server_repeating_ids_is_shown_under_the_loop_s_ids() -> None:
    # Each answer calls `call_0`, as some local servers number every answer's calls.
    def answer(token: str) -> list[StreamEvent]:
        call = ToolCall(id="call_0", name="lookup", arguments=json.dumps({"token": token}))
        return [
            ToolCallDelta(index=0, id="call_0", name="lookup", arguments_delta=call.arguments),
            complete(None, call),
        ]

    model = Streamed(answer("1"), answer("2"), answer("3"), DONE)
    messages: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": "go"}]
    async with http(create_app(ui_support.service(), model)) as client:
        events = await agui_run(client, THREAD, messages)
    starts = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    results = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert starts == results == ["call_0", "call_0~1", "call_0~2"]
    assert not [e for e in events if e.get("content") == NOT_CALLED]


async def test_calls_without_ids_and_text_only_in_the_answer_are_shown_at_its_end() -> None:
    answer = [
        ToolCallDelta(index=0, name="lookup", arguments_delta='{"token": "t"}'),  # no id yet
        complete("Looking it up.", LOOKUP),
    ]
    events, messages, chunks = await both(Streamed(answer, DONE), Streamed(answer, DONE))
    kinds = [e["type"] for e in events]
    assert kinds[1:6] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
    ]
    assert messages[1]["content"] == "Looking it up."
    assert messages[1]["toolCalls"][0]["function"]["arguments"] == '{"token": "t"}'
    assert [c["delta"] for c in chunks if c["type"] == "text-delta"] == ["Looking it up.", "done"]


async def test_arguments_that_add_up_otherwise_keep_their_id() -> None:
    answer = [
        ToolCallDelta(index=0, id="b", name="lookup", arguments_delta='{"token": "x'),
        complete(None, LOOKUP),
    ]
    events, _messages, chunks = await both(Streamed(answer, DONE), Streamed(answer, DONE))
    assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"] == ["b"]
    available = next(c for c in chunks if c["type"] == "tool-input-available")
    assert available["input"] == {"token": "t"}  # the call as it runs
    assert not [e for e in events if e.get("content") == NOT_CALLED]


async def test_only_text_opens_no_empty_part_and_a_round_of_calls_only_has_a_parent() -> None:
    answer = [
        ToolCallDelta(index=0, id="b", name="lookup", arguments_delta='{"token": "t"}'),
        complete(None, LOOKUP),
    ]
    events, _messages, chunks = await both(Streamed(answer, DONE), Streamed(answer, DONE))
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["parentMessageId"] == events[1]["messageId"]
    assert events[1]["type"] == "TEXT_MESSAGE_START"
    # The AI SDK has no parent to open: no text part is opened for it.
    text_ids = [c["id"] for c in chunks if c["type"] == "text-start"]
    assert start["parentMessageId"] not in text_ids


async def test_progress_is_reported_on_both_protocols() -> None:
    @tool
    async def slow(ctx: ToolContext[None]) -> str:
        """Work in steps."""
        for step in (1, 2):
            ctx.report_progress(step, 2, f"step {step}")
        return "finished"

    def script(messages: Sequence[Any], parameters: Any) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="ok")
        return AiMessage(tool_calls=[ToolCall(id="s", name="slow")])

    from agentforge_typed import FunctionModel

    app = create_app(ToolService([slow]), FunctionModel(script))
    async with http(app) as client:
        events = await agui_run(client, THREAD, [{"id": "u1", "role": "user", "content": "go"}])
        body = {
            "id": THREAD,
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        }
        chunks = sse((await client.post("/api/chat", json=body)).text)
    progress = [e["value"] for e in events if e["type"] == "CUSTOM"]
    assert progress[-1] == {"toolCallId": "s", "progress": 2.0, "total": 2.0, "message": "step 2"}
    data = [c for c in chunks if c["type"] == "data-agentforge-progress"]
    assert data[-1]["transient"] is True and data[-1]["id"] == "s"


def test_a_call_cut_short_gets_a_result_and_is_never_run_again() -> None:
    call = ToolCall(id="c", name="lookup", arguments="{}")
    history: list[ChatMessage] = [
        UserMessage(content="go"),
        AiMessage(tool_calls=[call]),
        UserMessage(content="and?"),
    ]
    fixed, ids = checked(history, ["u1", "m1", "u2"])
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "user"]
    assert isinstance(fixed[2], ToolResultMessage) and fixed[2].text == CUT_SHORT
    assert ids == ["u1", "m1", None, "u2"]
    ended, _ = checked(history[:2], ["u1", "m1"])  # ending the history, too
    assert ended[-1] == ToolResultMessage(
        tool_call_id="c", tool_name="lookup", text=CUT_SHORT, is_error=True
    )
    with pytest.raises(InputError, match="used twice"):
        checked(
            [history[1], ToolResultMessage(tool_call_id="c", tool_name="lookup"), history[1]],
            [None] * 3,
        )
