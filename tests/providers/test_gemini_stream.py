"""Streaming: Gemini SSE chunks decoded and accumulated into events and one response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentforge_typed import (
    ChatResponse,
    ModelError,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentforge_typed.providers._gemini_wire import GeminiStreamAccumulator, parse_response
from agentforge_typed.providers._sse import ServerSentEvent, SSEDecoder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "gemini"
STREAMS = {
    name: (FIXTURES / f"{name}/stream.sse").read_bytes()
    for name in ("parallel_tool_calls", "text", "call_with_id")
}


def run(chunks: list[bytes]) -> list[StreamEvent]:
    decoder = SSEDecoder()
    accumulator = GeminiStreamAccumulator()
    events: list[StreamEvent] = []
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            events.extend(accumulator.take(sse))
            assert not accumulator.done
    assert not decoder.pending
    return events + accumulator.end()


def blocking(name: str) -> ChatResponse:
    return parse_response(
        json.loads((FIXTURES / f"{name}/response.json").read_text(encoding="utf-8"))
    )


def test_thinking_then_parallel_calls_arriving_whole() -> None:
    events = run([STREAMS["parallel_tool_calls"]])
    assert events[:-1] == [
        ThinkingDelta(text="**Checking two cities**\n\nThe user wants Paris and "),
        ThinkingDelta(text="Zürich; I will call get_weather twice."),
        ToolCallDelta(
            index=0,
            id="call_2Pq0aJ3hOIaS1dkPzNSF0Ak_0",
            name="get_weather",
            arguments_delta='{"city":"Paris","unit":"celsius"}',
        ),
        ToolCallDelta(
            index=1,
            id="call_2Pq0aJ3hOIaS1dkPzNSF0Ak_1",
            name="get_weather",
            arguments_delta='{"city":"Zürich","unit":"celsius"}',
        ),
    ]
    # The streamed answer is exactly the blocking parse of the same answer, signatures included.
    assert events[-1] == ResponseComplete(response=blocking("parallel_tool_calls"))


def test_text_deltas_signed_empty_part_and_last_usage() -> None:
    events = run([STREAMS["text"]])
    assert events[:-1] == [
        TextDelta(text="Paris: 18°C and sunny. "),
        TextDelta(text="Zürich: 12°C, "),
        TextDelta(text="light rain 🌦."),
    ]
    final = events[-1]
    assert final == ResponseComplete(response=blocking("text"))
    assert isinstance(final, ResponseComplete)
    # Prompt counts change in the last chunk: its usage is the one kept.
    usage = final.response.token_usage
    assert usage is not None and (usage.input_tokens, usage.total_tokens) == (305, 371)


def test_call_with_gemini_id() -> None:
    events = run([STREAMS["call_with_id"]])
    assert events[0] == ToolCallDelta(
        index=0, id="k3x9q2ab", name="get_time", arguments_delta='{"zone":"Europe/Paris"}'
    )
    assert events[-1] == ResponseComplete(response=blocking("call_with_id"))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_rechunking_gives_the_same_events(data: st.DataObject) -> None:
    stream = data.draw(st.sampled_from(sorted(STREAMS.values())))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=40)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert run(chunks) == run([stream])


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_truncated_stream_is_an_error(name: str) -> None:
    stream = STREAMS[name]
    last = stream.rindex(b"data: ")
    with pytest.raises(ModelError, match="ended before a finish reason"):
        run([stream[:last]])


def test_stream_without_any_chunk_is_an_error() -> None:
    with pytest.raises(ModelError, match="ended before a finish reason"):
        GeminiStreamAccumulator().end()


def feed(*chunks: Any) -> tuple[GeminiStreamAccumulator, list[StreamEvent]]:
    accumulator = GeminiStreamAccumulator()
    events: list[StreamEvent] = []
    for chunk in chunks:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        events.extend(accumulator.take(ServerSentEvent(data=data)))
    return accumulator, events


def text_chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "responseId": "r1"}


def test_error_chunk_mid_stream() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    accumulator, events = feed(text_chunk({"text": "Hel"}))
    assert events == [TextDelta(text="Hel")]
    with pytest.raises(ModelError, match="Gemini stream error: The model is overloaded") as info:
        accumulator.take(ServerSentEvent(data=json.dumps(error)))
    assert info.value.code == "UNAVAILABLE"
    assert info.value.body == error


@pytest.mark.parametrize(
    "chunk",
    [
        "{not json",
        "[1, 2]",
        '{"candidates": [{"content": {"parts": [{"text": 5}]}}]}',
        '{"candidates": [{"content": {"parts": ["text"]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": 1}}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}',
        '{"candidates": "x"}',
    ],
)
def test_malformed_chunks(chunk: str) -> None:
    with pytest.raises(ModelError, match="Gemini sent"):
        feed(chunk)


def test_malformed_final_usage_is_a_model_error_at_the_end() -> None:
    accumulator, _ = feed(
        {**text_chunk({"text": "x"}, finish="STOP"), "usageMetadata": {"promptTokenCount": "9"}}
    )
    with pytest.raises(ModelError, match="malformed Gemini response"):
        accumulator.end()


def test_signed_text_parts_are_never_joined_to_others() -> None:
    accumulator, events = feed(
        text_chunk({"text": "A", "thoughtSignature": "s1"}),
        text_chunk({"text": "B"}),
        text_chunk({"text": "C"}),
        text_chunk({"text": "", "thoughtSignature": "s2"}, finish="STOP"),
    )
    assert events == [TextDelta(text="A"), TextDelta(text="B"), TextDelta(text="C")]
    (final,) = accumulator.end()
    assert isinstance(final, ResponseComplete)
    assert final.response.ai_message.text == "ABC"
    assert final.response.ai_message.attributes["gemini_parts"] == [
        {"text": "A", "thoughtSignature": "s1"},
        {"text": "BC"},
        {"text": "", "thoughtSignature": "s2"},
    ]


def test_malformed_function_call_in_the_last_chunk() -> None:
    accumulator, events = feed(
        text_chunk({"text": "Let me check."}),
        {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "bad"}]},
    )
    assert events == [TextDelta(text="Let me check.")]
    with pytest.raises(ModelError, match="malformed function call: bad"):
        accumulator.end()


def test_blocked_prompt_stream_ends_without_candidates() -> None:
    accumulator, events = feed({"promptFeedback": {"blockReason": "SAFETY"}, "responseId": "r"})
    assert events == []
    (final,) = accumulator.end()
    assert isinstance(final, ResponseComplete)
    assert final.response.metadata["block_reason"] == "SAFETY"
