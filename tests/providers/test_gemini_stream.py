"""Gemini streams beyond the golden cases (`tests/fixtures/golden/gemini/`): truncation, malformed
chunks, signed parts, malformed function calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import (
    ModelError,
    ResponseComplete,
    StreamEvent,
    TextDelta,
)
from agentforge_typed.providers._gemini_wire import GeminiStreamAccumulator
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
