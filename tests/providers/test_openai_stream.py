"""OpenAI streaming quirks and failures; the recorded streams are the golden cases
(`tests/fixtures/golden/openai/`, `test_golden.py`)."""

from __future__ import annotations

import httpx
import pytest
from openai_support import (
    ChunkedStream,
    Server,
    call,
    fixture_bytes,
    fixture_json,
    sse_response,
)

from agentforge_typed import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    ModelError,
    StreamEvent,
    TextDelta,
    ToolCall,
    UserMessage,
)
from agentforge_typed.providers._openai_wire import StreamAccumulator, parse_response
from agentforge_typed.providers._sse import SSEDecoder

REQUEST = ChatRequest(messages=[UserMessage(content="杭州今天天气怎么样")])


def sans_io(pieces: list[bytes]) -> tuple[list[StreamEvent], ChatResponse]:
    """Decode and aggregate bytes without any HTTP: what both model shells run."""
    decoder = SSEDecoder()
    accumulator = StreamAccumulator()
    events: list[StreamEvent] = []
    for piece in pieces:
        for sse in decoder.feed(piece):
            events.extend(accumulator.feed(sse))
    return events, accumulator.finish()


def test_id_repeated_on_every_piece_is_a_continuation() -> None:
    stream = (
        b'data: {"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
        b'"function":{"name":"f","arguments":"{\\"a\\":"}}]}}]}\n\n'
        b'data: {"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
        b'"function":{"arguments":"1}"}}]}}]}\n\n'
        b'data: {"id":"r","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    )
    _, response = sans_io([stream])  # no [DONE]: the finish reason makes it complete
    assert response.ai_message.tool_calls == (ToolCall(id="c1", name="f", arguments='{"a":1}'),)


def test_text_only_done_without_finish_reason_is_stop() -> None:
    stream = (
        b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    )
    _, response = sans_io([stream])
    assert response.finish_reason is FinishReason.STOP
    assert response.ai_message.text == "hi"


def test_events_after_done_and_other_choices_are_ignored() -> None:
    stream = (
        b'data: {"id":"x","choices":[{"index":1,"delta":{"content":"other"}},'
        b'{"index":0,"delta":{"content":"mine"},"finish_reason":"length"}]}\n\n'
        b"event: ping\ndata: {}\n\n"
        b"data: [DONE]\n\n"
        b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"late"}}]}\n\n'
    )
    events, response = sans_io([stream])
    assert events == [TextDelta(text="mine")]
    assert response.finish_reason is FinishReason.LENGTH


# -- errors ---------------------------------------------------------------------------------

PARTIAL = (
    b'data: {"id":"chatcmpl-e","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'
)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize(
    ("tail", "message", "code"),
    [
        (
            b'event: error\ndata: {"error":{"message":"The server had an error while processing '
            b'your request.","type":"server_error","code":"internal_error"}}\n\n',
            "OpenAI stream error: The server had an error while processing your request.",
            "internal_error",
        ),
        (
            b'data: {"error":{"message":"Rate limit reached","type":"requests",'
            b'"code":"rate_limit_exceeded","param":null}}\n\n',
            "OpenAI stream error: Rate limit reached",
            "rate_limit_exceeded",
        ),
        (
            b"event: error\ndata: upstream overloaded\n\n",
            "OpenAI stream error: upstream overloaded",
            None,
        ),
    ],
)
async def test_error_inside_the_stream(
    mode: str, tail: bytes, message: str, code: str | None
) -> None:
    server = Server(sse_response(PARTIAL + b": keep-alive\n\n" + tail))
    received: list[StreamEvent] = []
    with pytest.raises(ModelError) as info:
        if mode == "astream":
            async for event in server.model().astream(REQUEST):
                received.append(event)
        else:
            for event in server.model().stream(REQUEST):
                received.append(event)
    assert received == [TextDelta(text="Hel")]
    assert (info.value.message, info.value.code) == (message, code)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize(
    "tail",
    [
        b"",  # closed cleanly after a chunk
        b'data: {"id":"chatcmpl-e","choices":[{"index":0,"delta":{"content":"lo"',  # mid-event
    ],
)
async def test_truncated_stream_is_an_error(mode: str, tail: bytes) -> None:
    server = Server(sse_response(PARTIAL + tail))
    with pytest.raises(ModelError, match="OpenAI stream ended"):
        await call(server.model(), REQUEST, mode)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_connection_dropped_mid_stream(mode: str) -> None:
    stream = ChunkedStream([PARTIAL], error=httpx.RemoteProtocolError("peer closed connection"))
    server = Server(httpx.Response(200, stream=stream), httpx.Response(500))
    with pytest.raises(ModelError, match="OpenAI stream was interrupted: RemoteProtocolError"):
        await call(server.model(), REQUEST, mode)
    assert len(server.requests) == 1  # not retried once the answer had started


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_malformed_chunk(mode: str) -> None:
    server = Server(sse_response(PARTIAL + b"data: {not json}\n\n"))
    with pytest.raises(ModelError, match="malformed stream chunk"):
        await call(server.model(), REQUEST, mode)
    server = Server(sse_response(b'data: {"choices":[{"index":0,"delta":"text"}]}\n\n'))
    with pytest.raises(ModelError, match="malformed stream chunk"):
        await call(server.model(), REQUEST, mode)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_stream_retries_a_429_before_the_first_byte(mode: str) -> None:
    server = Server(
        httpx.Response(
            429,
            headers={"retry-after": "1"},
            json={
                "error": {
                    "message": "Rate limit",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        sse_response(fixture_bytes("tool_call_split/stream.sse"), size=64),
    )
    response = await call(server.model(), REQUEST, mode)
    assert response == parse_response(fixture_json("tool_call_split/response.json"))
    assert server.waits == [1.0]
