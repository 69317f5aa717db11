"""Anthropic streams beyond the golden cases (`tests/fixtures/golden/anthropic/`): truncation, server
tools and redacted thinking, unknown events, malformed streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import (
    ModelError,
    ResponseComplete,
    StreamEvent,
    TextDelta,
)
from agentforge_typed.providers._anthropic_wire import AnthropicStreamAccumulator
from agentforge_typed.providers._sse import SSEDecoder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "anthropic"
TEXT_TWO_TOOLS = (FIXTURES / "parallel_tool_calls/stream.sse").read_bytes()


def run(chunks: list[bytes]) -> list[StreamEvent]:
    decoder = SSEDecoder()
    accumulator = AnthropicStreamAccumulator()
    events: list[StreamEvent] = []
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            events.extend(accumulator.feed(sse.event, sse.json()))
    accumulator.finish()
    return events


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
