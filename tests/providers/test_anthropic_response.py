"""Parsing of Anthropic Messages API response bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    ChatResponse,
    FinishReason,
    ModelError,
    TokenUsage,
    ToolCall,
)
from agentforge_typed.providers._anthropic_wire import parse_response

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "anthropic"


def body(
    content: list[dict[str, Any]], stop_reason: str | None = "end_turn", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "msg_01AbCdEfGh",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 42},
        **extra,
    }


def test_text() -> None:
    response = parse_response(
        body([{"type": "text", "text": "CompletableFuture 是 Java 8 引入的异步编程工具。"}])
    )
    assert response == ChatResponse(
        ai_message=AiMessage(text="CompletableFuture 是 Java 8 引入的异步编程工具。"),
        token_usage=TokenUsage(input_tokens=20, output_tokens=42, total_tokens=62),
        finish_reason=FinishReason.STOP,
        metadata={
            "id": "msg_01AbCdEfGh",
            "model": "claude-sonnet-4-5-20250929",
            "type": "message",
            "stop_reason": "end_turn",
        },
    )


def test_text_blocks_concatenated_without_separator() -> None:
    response = parse_response(
        body([{"type": "text", "text": "Hello"}, {"type": "text", "text": ", world"}])
    )
    assert response.ai_message.text == "Hello, world"


def test_single_tool_use() -> None:
    response = parse_response(
        body(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"location": "San Francisco, CA", "unit": "celsius"},
                }
            ],
            stop_reason="tool_use",
        )
    )
    assert response.ai_message == AiMessage(
        tool_calls=[
            ToolCall(
                id="toolu_01A09q90qw90lq917835lq9",
                name="get_weather",
                arguments='{"location":"San Francisco, CA","unit":"celsius"}',
            )
        ]
    )
    assert response.ai_message.text is None
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


def test_text_and_parallel_tool_use() -> None:
    response = parse_response(
        json.loads((FIXTURES / "parallel_tool_calls/response.json").read_text())
    )
    assert response.ai_message == AiMessage(
        text="Let me check both cities — 杭州 and Zürich 🌦.",
        tool_calls=[
            ToolCall(
                id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                name="get_weather",
                arguments='{"city":"杭州","unit":"celsius"}',
            ),
            ToolCall(
                id="toolu_01CQxLhGzVaRfKuCH2Pk2xrB",
                name="get_weather",
                arguments='{"city":"Zürich","unit":"celsius"}',
            ),
        ],
    )
    assert response.token_usage == TokenUsage(input_tokens=472, output_tokens=131, total_tokens=603)
    assert response.metadata == {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "model": "claude-sonnet-4-5-20250929",
        "type": "message",
        "stop_reason": "tool_use",
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def test_tool_use_with_empty_input() -> None:
    response = parse_response(
        body([{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}], "tool_use")
    )
    assert response.ai_message.tool_calls == (ToolCall(id="toolu_1", name="now", arguments="{}"),)


def test_thinking_and_tool_use_keep_the_signature() -> None:
    raw = json.loads((FIXTURES / "thinking/response.json").read_text())
    response = parse_response(raw)
    message = response.ai_message
    assert (
        message.thinking
        == "The user wants the weather in Paris. I should call get_weather with city=Paris."
    )
    assert message.text is None
    assert message.tool_calls == (
        ToolCall(
            id="toolu_01NRLabsLyVHZPKxbKvkfSMn", name="get_weather", arguments='{"city":"Paris"}'
        ),
    )
    assert message.attributes == {"anthropic_content": raw["content"]}
    assert message.attributes["anthropic_content"][0]["signature"].startswith("EqQBCgIYAhIM")
    # Input counts what the cache read and wrote too (1024 + 2048 + 512); metadata splits it.
    assert response.token_usage == TokenUsage(
        input_tokens=3584, output_tokens=87, total_tokens=3671
    )
    assert response.metadata["cache_creation_input_tokens"] == 2048
    assert response.metadata["cache_read_input_tokens"] == 512


def test_server_tool_blocks_are_not_tool_calls() -> None:
    raw = json.loads((FIXTURES / "web_search/response.json").read_text())
    response = parse_response(raw)
    assert response.ai_message.text == (
        "I'll look up today's weather in Paris.It is 18°C and sunny in Paris, so you can leave the umbrella at home."
    )
    assert response.ai_message.tool_calls == ()
    assert response.ai_message.attributes == {"anthropic_content": raw["content"]}
    assert response.finish_reason is FinishReason.STOP
    assert response.metadata["server_tool_use"] == {"web_search_requests": 1}


def test_plain_answers_carry_no_attributes() -> None:
    assert parse_response(body([{"type": "text", "text": "hi"}])).ai_message.attributes == {}


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL_EXECUTION),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
        ("model_context_window_exceeded", FinishReason.OTHER),
        (None, None),
    ],
)
def test_stop_reasons(stop_reason: str | None, expected: FinishReason | None) -> None:
    response = parse_response(body([{"type": "text", "text": "x"}], stop_reason))
    assert response.finish_reason is expected
    assert response.metadata.get("stop_reason") == stop_reason


def test_stop_sequence_kept_in_metadata() -> None:
    raw = body([{"type": "text", "text": "1, 2, 3"}], "stop_sequence")
    raw["stop_sequence"] = "###"
    assert parse_response(raw).metadata["stop_sequence"] == "###"


def test_missing_usage() -> None:
    raw = body([{"type": "text", "text": "x"}])
    del raw["usage"]
    assert parse_response(raw).token_usage is None


@pytest.mark.parametrize(
    "raw",
    [
        [],
        body([{"type": "text"}]),
        body([{"text": "no type"}]),
        body([{"type": "tool_use", "id": "t", "name": "n", "input": "[1]"}]),
        body([{"type": "tool_use", "id": 5, "name": "n", "input": {}}]),
        body([{"type": "text", "text": "x"}], usage={"input_tokens": "many"}),
    ],
)
def test_malformed_bodies(raw: Any) -> None:
    with pytest.raises(ModelError, match="malformed Anthropic response") as info:
        parse_response(raw)
    assert info.value.body == raw


def test_error_object_in_a_200_body() -> None:
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    with pytest.raises(ModelError, match="Internal server error") as info:
        parse_response(error)
    assert info.value.code == "api_error"
