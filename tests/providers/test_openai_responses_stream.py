"""OpenAI Responses streaming beyond the golden cases (`tests/fixtures/golden/openai_responses/`):
reasoning replayed, compatible servers' shapes, errors, truncation and malformed events."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai_support import ChunkedStream, call, sse_response
from responses_support import ResponsesServer, fixture_bytes, fixture_json

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    ModelError,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    UserMessage,
)
from agentforge_typed.providers._responses_wire import (
    ResponsesStreamAccumulator,
    build_payload,
    parse_response,
)
from agentforge_typed.providers._sse import SSEDecoder

REQUEST = ChatRequest(messages=[UserMessage(content="Paris and Rome?")])


def sans_io(pieces: list[bytes]) -> tuple[list[StreamEvent], ChatResponse]:
    """Decode and aggregate bytes without any HTTP: what both model shells run."""
    decoder = SSEDecoder()
    accumulator = ResponsesStreamAccumulator()
    events: list[StreamEvent] = []
    for piece in pieces:
        for sse in decoder.feed(piece):
            events.extend(accumulator.take(sse))
    events.extend(accumulator.end())
    return events, accumulator.finish()


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
    ).encode()


def test_only_the_final_encrypted_reasoning_is_replayed() -> None:
    data = fixture_bytes("parallel_tool_calls/stream.sse")
    assert b"gAAAAABosaPxEARLY" in data  # what response.output_item.added carried
    _, response = sans_io([data])
    answer = response.ai_message
    history: list[ChatMessage] = [
        UserMessage(content="Paris and Rome?"),
        answer,
        *(
            ToolResultMessage(tool_call_id=c.id, tool_name=c.name, text="ok")
            for c in answer.tool_calls
        ),
    ]
    body = build_payload(history, ChatRequestParameters(model="gpt-5-mini"), stream=False)
    reasoning = body["input"][1]
    assert reasoning["type"] == "reasoning"
    assert reasoning["id"] == "rs_68b1a3f1a2fc8190a5d3e7c9b1f04d2a0c2b6f1e8d4a3b5c"
    assert reasoning["encrypted_content"].startswith("gAAAAABosaPzFINAL")
    assert "EARLY" not in json.dumps(body)


def test_completed_without_output_falls_back_to_the_items_streamed() -> None:
    data = fixture_bytes("parallel_tool_calls/stream.sse")
    head, _, last = data.rstrip(b"\n").rpartition(b"\n\n")
    completed = json.loads(last.split(b"data: ", 1)[1])
    completed["response"]["output"] = []
    _, response = sans_io([head + b"\n\n" + sse(completed)])
    assert response == parse_response(fixture_json("parallel_tool_calls/response.json"))


def test_arguments_sent_only_with_done_and_items_found_by_id() -> None:
    # A compatible server: no argument deltas, no output_index on the argument events.
    data = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "f",
                "arguments": "",
            },
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "arguments": '{"a":1}',
        },
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "c1",
                        "name": "f",
                        "arguments": '{"a":1}',
                    }
                ],
            },
        },
    )
    events, response = sans_io([data])
    assert events[:2] == [
        ToolCallDelta(index=0, id="c1", name="f"),
        ToolCallDelta(index=0, arguments_delta='{"a":1}'),
    ]
    assert response.ai_message == AiMessage(
        tool_calls=[ToolCall(id="c1", name="f", arguments='{"a":1}')]
    )


def test_arguments_sent_only_with_the_finished_item() -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f"}
    data = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": ""},
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**item, "arguments": "{}"},
        },
        {"type": "response.completed", "response": {"status": "completed", "output": []}},
    )
    events, response = sans_io([data])
    assert events[:2] == [
        ToolCallDelta(index=0, id="c1", name="f"),
        ToolCallDelta(index=0, arguments_delta="{}"),
    ]
    assert response.ai_message.tool_calls == (ToolCall(id="c1", name="f", arguments="{}"),)


def test_events_after_completion_and_done_marker_are_ignored() -> None:
    data = (
        fixture_bytes("thinking/stream.sse")
        + b"data: [DONE]\n\n"
        + sse({"type": "response.output_text.delta", "output_index": 1, "delta": "late"})
    )
    events, response = sans_io([data])
    assert response == parse_response(fixture_json("thinking/response.json"))
    assert TextDelta(text="late") not in events


# -- errors -------------------------------------------------------------------------------------

HEAD = fixture_bytes("thinking/stream.sse").split(b"event: response.output_text.done")[0]
ERROR = {
    "type": "error",
    "sequence_number": 40,
    "code": "server_error",
    "message": "An error occurred while processing your request.",
    "param": None,
}
FAILED = {
    "type": "response.failed",
    "sequence_number": 41,
    "response": {
        "id": "resp_68b1a3f9b0d88190a3c4e5f6a7b8c9d00c2b6f1e8d4a3b5c",
        "object": "response",
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed to generate a response."},
        "output": [],
    },
}


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (
            sse(ERROR, FAILED),
            "OpenAI stream error: An error occurred while processing your request.",
        ),
        (sse(FAILED), "OpenAI response failed: The model failed to generate a response."),
    ],
)
async def test_error_and_failed_events_inside_a_200_stream(
    mode: str, tail: bytes, message: str
) -> None:
    server = ResponsesServer(sse_response(HEAD + tail, size=7))
    received: list[StreamEvent] = []
    with pytest.raises(ModelError) as info:
        if mode == "astream":
            async for event in server.model().astream(REQUEST):
                received.append(event)
        else:
            for event in server.model().stream(REQUEST):
                received.append(event)
    assert (info.value.message, info.value.code) == (message, "server_error")
    assert received and all(isinstance(e, TextDelta) for e in received)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize(
    "data",
    [
        HEAD,  # closed cleanly mid-answer
        HEAD + b'event: response.output_text.delta\ndata: {"type":"response.output_te',
        fixture_bytes("thinking/stream.sse").rsplit(b"event: response.completed", 1)[0],
    ],
)
async def test_a_stream_without_completion_is_an_error(mode: str, data: bytes) -> None:
    server = ResponsesServer(sse_response(data))
    # Cut inside a line, the decoder says so before the wire can.
    expected = r"stream ended (before response\.completed|inside a line: it was cut off)"
    with pytest.raises(ModelError, match=expected):
        await call(server.model(), REQUEST, mode)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_connection_dropped_mid_stream_is_not_retried(mode: str) -> None:
    stream = ChunkedStream([HEAD], error=httpx.RemoteProtocolError("peer closed connection"))
    server = ResponsesServer(httpx.Response(200, stream=stream), httpx.Response(500))
    with pytest.raises(ModelError, match="OpenAI stream was interrupted: RemoteProtocolError"):
        await call(server.model(), REQUEST, mode)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("tail", "match"),
    [
        (b"event: response.output_text.delta\ndata: {not json}\n\n", "malformed SSE data"),
        (b"data: [1, 2]\n\n", "unexpected stream event"),
        (
            sse({"type": "response.output_text.delta", "delta": 5}),
            "malformed 'response.output_text.delta'",
        ),
        (
            sse(
                {"type": "response.function_call_arguments.delta", "output_index": 9, "delta": "x"}
            ),
            "malformed 'response.function_call_arguments.delta'",
        ),
        (sse({"type": "response.completed", "response": "done"}), "malformed 'response.completed'"),
        (
            sse({"type": "response.completed", "response": {"output": [{"type": "message"}]}}),
            "malformed response",
        ),
    ],
)
async def test_malformed_events_are_model_errors(tail: bytes, match: str) -> None:
    server = ResponsesServer(sse_response(HEAD + tail))
    with pytest.raises(ModelError, match=match):
        await call(server.model(), REQUEST, "stream")
