"""Streaming: Anthropic SSE streams decoded and accumulated into events and one response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic_support import streamed_arguments, with_arguments
from hypothesis import given, settings
from hypothesis import strategies as st

from agentforge_typed import (
    ModelError,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentforge_typed.providers._anthropic_wire import AnthropicStreamAccumulator, parse_response
from agentforge_typed.providers._sse import SSEDecoder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "anthropic"
TEXT_TWO_TOOLS = (FIXTURES / "parallel_tool_calls/stream.sse").read_bytes()
THINKING_TOOL = (FIXTURES / "thinking/stream.sse").read_bytes()


def run(chunks: list[bytes]) -> list[StreamEvent]:
    decoder = SSEDecoder()
    accumulator = AnthropicStreamAccumulator()
    events: list[StreamEvent] = []
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            events.extend(accumulator.feed(sse.event, sse.json()))
    accumulator.finish()
    return events


def blocking(name: str) -> Any:
    return parse_response(json.loads((FIXTURES / name).read_text()))


def test_text_then_two_tool_uses() -> None:
    events = run([TEXT_TWO_TOOLS])
    assert events[:-1] == [
        TextDelta(text="Let me check both cities"),
        TextDelta(text=" — 杭州 and Zürich 🌦."),
        ToolCallDelta(index=0, id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather"),
        ToolCallDelta(index=0, arguments_delta=""),
        ToolCallDelta(index=0, arguments_delta='{"city": "杭'),
        ToolCallDelta(index=0, arguments_delta='州", "unit": "cels'),
        ToolCallDelta(index=0, arguments_delta='ius"}'),
        ToolCallDelta(index=1, id="toolu_01CQxLhGzVaRfKuCH2Pk2xrB", name="get_weather"),
        ToolCallDelta(index=1, arguments_delta='{"ci'),
        ToolCallDelta(index=1, arguments_delta='ty": "Zür'),
        ToolCallDelta(index=1, arguments_delta='ich", "unit": "celsius"}'),
    ]
    # The streamed answer is the blocking parse of the same message, but for the arguments: those
    # are exactly the text the model streamed.
    expected = with_arguments(
        blocking("parallel_tool_calls/response.json"), streamed_arguments(TEXT_TWO_TOOLS)
    )
    assert events[-1] == ResponseComplete(response=expected)
    response = events[-1].response
    assert response.ai_message.tool_calls[0].arguments == '{"city": "杭州", "unit": "celsius"}'
    assert response.token_usage is not None and response.token_usage.output_tokens == 131


def test_thinking_with_signature_and_pings() -> None:
    events = run([THINKING_TOOL])
    assert events[:2] == [
        ThinkingDelta(text="The user wants the weather in Paris. "),
        ThinkingDelta(text="I should call get_weather with city=Paris."),
    ]
    expected = with_arguments(blocking("thinking/response.json"), streamed_arguments(THINKING_TOOL))
    assert events[-1] == ResponseComplete(response=expected)
    content = events[-1].response.ai_message.attributes["anthropic_content"]
    assert (
        content[0]["signature"]
        == json.loads((FIXTURES / "thinking/response.json").read_text())["content"][0]["signature"]
    )


def test_input_split_mid_utf8_character() -> None:
    cut = TEXT_TWO_TOOLS.index("杭".encode()) + 1
    events = run([TEXT_TWO_TOOLS[:cut], TEXT_TWO_TOOLS[cut:]])
    assert events == run([TEXT_TWO_TOOLS])


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_rechunking_gives_the_same_events(data: st.DataObject) -> None:
    stream = data.draw(st.sampled_from([TEXT_TWO_TOOLS, THINKING_TOOL]))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=40)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert run(chunks) == run([stream])


def frames(*events: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(event["type"], event) for event in events]


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}


def feed_all(
    accumulator: AnthropicStreamAccumulator, items: list[tuple[str, dict[str, Any]]]
) -> list[StreamEvent]:
    return [event for name, data in items for event in accumulator.feed(name, data)]


def test_overloaded_error_mid_stream() -> None:
    accumulator = AnthropicStreamAccumulator()
    emitted = feed_all(
        accumulator,
        frames(
            START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hel"},
            },
        ),
    )
    assert emitted == [TextDelta(text="Hel")]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ModelError, match="Anthropic stream error: Overloaded") as info:
        accumulator.feed("error", error)
    assert info.value.code == "overloaded_error"
    assert info.value.body == error


def test_truncated_stream() -> None:
    cut = TEXT_TWO_TOOLS.index(b"event: message_delta")
    with pytest.raises(ModelError, match="ended before message_stop"):
        run([TEXT_TWO_TOOLS[:cut]])


def test_tool_use_without_input_deltas_gives_empty_object() -> None:
    accumulator = AnthropicStreamAccumulator()
    events = feed_all(
        accumulator,
        frames(
            START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ),
    )
    response = accumulator.finish()
    assert events[-1] == ResponseComplete(response=response)
    assert response.ai_message.tool_calls[0].arguments == "{}"


def test_redacted_thinking_and_server_tools_in_stream() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://a.test",
                "title": "A",
                "encrypted_content": "Eq",
                "page_age": None,
            }
        ],
    }
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgB"}
    accumulator = AnthropicStreamAccumulator()
    events = feed_all(
        accumulator,
        frames(
            START,
            {"type": "content_block_start", "index": 0, "content_block": redacted},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": search},
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": "a"}'},
            },
            {"type": "content_block_stop", "index": 1},
            {"type": "content_block_start", "index": 2, "content_block": result},
            {"type": "content_block_stop", "index": 2},
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "text_delta", "text": "A is "},
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {
                    "type": "citations_delta",
                    "citation": {
                        "type": "web_search_result_location",
                        "url": "https://a.test",
                        "cited_text": "A",
                    },
                },
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "text_delta", "text": "great."},
            },
            {"type": "content_block_stop", "index": 3},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 30, "server_tool_use": {"web_search_requests": 1}},
            },
            {"type": "message_stop"},
        ),
    )
    # Server tools are not client tool calls: no ToolCallDelta for them.
    assert events[:-1] == [TextDelta(text="A is "), TextDelta(text="great.")]
    response = accumulator.finish()
    assert response.ai_message.tool_calls == ()
    assert response.ai_message.attributes["anthropic_content"] == [
        redacted,
        {**search, "input": {"query": "a"}},
        result,
        {
            "type": "text",
            "text": "A is great.",
            "citations": [
                {"type": "web_search_result_location", "url": "https://a.test", "cited_text": "A"}
            ],
        },
    ]
    assert response.metadata["server_tool_use"] == {"web_search_requests": 1}


def test_unknown_events_and_deltas_are_ignored() -> None:
    accumulator = AnthropicStreamAccumulator()
    events = feed_all(
        accumulator,
        frames(
            START,
            {"type": "future_event", "x": 1},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Hi"},
            },
            {"type": "content_block_delta", "index": 0, "delta": {"type": "future_delta", "x": 1}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        ),
    )
    assert events[0] == TextDelta(text="Hi")
    assert accumulator.finish().ai_message.text == "Hi"
    # Anything after message_stop changes nothing.
    assert accumulator.feed("message_stop", {"type": "message_stop"}) == []


@pytest.mark.parametrize(
    "items",
    [
        frames(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        frames(
            START,
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "text_delta", "text": "x"},
            },
        ),
    ],
)
def test_malformed_streams(items: list[tuple[str, dict[str, Any]]]) -> None:
    with pytest.raises(ModelError):
        feed_all(AnthropicStreamAccumulator(), items)
