"""OpenAI streaming: SSE fixtures aggregated into deltas and a response equal to the blocking one."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_support import (
    ChunkedStream,
    Server,
    call,
    chunks,
    collect,
    fixture_bytes,
    fixture_json,
    sse_response,
)

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ModelError,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    TokenUsage,
    ToolCall,
    ToolCallDelta,
    UserMessage,
)
from agentforge_typed.providers._openai_wire import StreamAccumulator, parse_response
from agentforge_typed.providers._sse import SSEDecoder

REQUEST = ChatRequest(messages=[UserMessage(content="杭州今天天气怎么样")])
FIXTURES = [
    "thinking",
    "tool_call_split",
    "parallel_interleaved",
    "missing_index_keepalive",
    "repeated_first_entry",
    "compat_quirks",
]


def sans_io(pieces: list[bytes]) -> tuple[list[StreamEvent], ChatResponse]:
    """Decode and aggregate bytes without any HTTP: what both model shells run."""
    decoder = SSEDecoder()
    accumulator = StreamAccumulator()
    events: list[StreamEvent] = []
    for piece in pieces:
        for sse in decoder.feed(piece):
            events.extend(accumulator.feed(sse))
    return events, accumulator.finish()


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_streamed_response_equals_blocking_parse(name: str, mode: str) -> None:
    blocking_server = Server(httpx.Response(200, json=fixture_json(f"{name}/response.json")))
    blocking = await call(blocking_server.model(), REQUEST, "chat")
    # One byte per chunk: every line, JSON token and UTF-8 character is cut somewhere.
    server = Server(sse_response(fixture_bytes(f"{name}/stream.sse"), size=1))
    events = await collect(server.model(), REQUEST, is_async=mode == "astream")
    assert events[-1] == ResponseComplete(response=blocking)
    assert [e for e in events if isinstance(e, ResponseComplete)] == [events[-1]]
    assert server.bodies[0]["stream"] is True


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    name=st.sampled_from(FIXTURES),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
)
def test_any_rechunking_gives_the_same_final_response(name: str, cuts: list[int]) -> None:
    data = fixture_bytes(f"{name}/stream.sse")
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    events, response = sans_io(pieces)
    whole_events, whole_response = sans_io([data])
    assert response == whole_response == parse_response(fixture_json(f"{name}/response.json"))
    assert events == whole_events


def test_reasoning_then_text_deltas() -> None:
    events, response = sans_io([fixture_bytes("thinking/stream.sse")])
    assert events == [
        ThinkingDelta(text="用户想要一句话解释"),
        ThinkingDelta(text="CompletableFuture\uff0c我需要给出准确又简洁的定义。"),
        TextDelta(text="CompletableFuture"),
        TextDelta(text=" 是 Java 8 引入的异步编程工具。"),
    ]
    assert response.token_usage == TokenUsage(input_tokens=14, output_tokens=52, total_tokens=66)
    assert response.finish_reason is FinishReason.STOP
    assert response.metadata == {
        "id": "chatcmpl-9xYzAbC789",
        "model": "deepseek-reasoner",
        "created": 1726200200,
        "system_fingerprint": "fp_7e73fd9a08",
        "cached_tokens": 0,
        "reasoning_tokens": 31,
    }


def test_arguments_concatenated_verbatim() -> None:
    events, response = sans_io(chunks(fixture_bytes("tool_call_split/stream.sse"), 3))
    assert events == [
        ToolCallDelta(index=0, id="call_abc123", name="get_weather"),
        ToolCallDelta(index=0, arguments_delta='{"'),
        ToolCallDelta(index=0, arguments_delta="ci"),
        ToolCallDelta(index=0, arguments_delta='ty":"杭'),
        ToolCallDelta(index=0, arguments_delta='州 \\u2014 é"}'),
    ]
    assert response.ai_message == AiMessage(
        tool_calls=[
            ToolCall(id="call_abc123", name="get_weather", arguments='{"city":"杭州 \\u2014 é"}')
        ]
    )
    assert response.finish_reason is FinishReason.TOOL_EXECUTION
    assert response.token_usage == TokenUsage(input_tokens=62, output_tokens=18, total_tokens=80)


def test_interleaved_parallel_calls_stay_apart() -> None:
    events, response = sans_io([fixture_bytes("parallel_interleaved/stream.sse")])
    assert [e for e in events if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(index=0, id="call_Paris01", name="get_weather"),
        ToolCallDelta(index=1, id="call_Tokyo2", name="get_time"),
        ToolCallDelta(index=0, arguments_delta='{"city": '),
        ToolCallDelta(index=1, arguments_delta='{"zone": "Asia/'),
        ToolCallDelta(index=0, arguments_delta='"Paris", "unit": "c"}'),
        ToolCallDelta(index=1, arguments_delta='Tokyo"}'),
    ]
    assert response.ai_message.text == "Checking both cities."
    assert [call.arguments for call in response.ai_message.tool_calls] == [
        '{"city": "Paris", "unit": "c"}',
        '{"zone": "Asia/Tokyo"}',
    ]


def test_missing_index_buckets_by_new_id() -> None:
    events, response = sans_io([fixture_bytes("missing_index_keepalive/stream.sse")])
    assert events == [
        ToolCallDelta(
            index=0,
            id="function-call-1457203281236791850",
            name="get_weather",
            arguments_delta='{"city":"Paris"}',
        ),
        ToolCallDelta(
            index=1,
            id="function-call-8471519287631006013",
            name="get_weather",
            arguments_delta='{"city":"',
        ),
        ToolCallDelta(index=1, arguments_delta='Lyon"}'),
    ]
    assert response.finish_reason is FinishReason.TOOL_EXECUTION  # "stop" next to tool calls


def test_repeated_first_entry_is_not_duplicated() -> None:
    events, response = sans_io([fixture_bytes("repeated_first_entry/stream.sse")])
    assert events == [
        ToolCallDelta(
            index=0, id="functions.search:0", name="search", arguments_delta='{"query": '
        ),
        ToolCallDelta(index=0, arguments_delta='"vLLM tool'),
        ToolCallDelta(index=0, arguments_delta=' parsers"}'),
    ]
    assert response.ai_message.tool_calls == (
        ToolCall(
            id="functions.search:0", name="search", arguments='{"query": "vLLM tool parsers"}'
        ),
    )


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


def test_compatible_quirks_and_done_without_finish_reason() -> None:
    events, response = sans_io([fixture_bytes("compat_quirks/stream.sse")])
    assert events == [
        ThinkingDelta(text="Need the weather tool."),
        TextDelta(text="Let me check."),
        ToolCallDelta(index=0, name="get_weather", arguments_delta='{"city":"Oslo","days":2}'),
        ToolCallDelta(index=1, name="get_time", arguments_delta="{}"),
    ]
    assert response.ai_message.tool_calls == (
        ToolCall(
            id="call_chatcmpl-482_0", name="get_weather", arguments='{"city":"Oslo","days":2}'
        ),
        ToolCall(id="call_chatcmpl-482_1", name="get_time", arguments="{}"),
    )
    assert response.finish_reason is FinishReason.TOOL_EXECUTION  # inferred
    assert response.token_usage is None


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
