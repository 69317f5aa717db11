"""Parsing of Anthropic Messages API response bodies beyond the golden cases
(`tests/fixtures/golden/anthropic/`): other stop reasons, gaps, malformed and error bodies."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge_typed import (
    FinishReason,
    ModelError,
    ToolCall,
)
from agentforge_typed.providers._anthropic_wire import parse_response


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


def test_tool_use_with_empty_input() -> None:
    response = parse_response(
        body([{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}], "tool_use")
    )
    assert response.ai_message.tool_calls == (ToolCall(id="toolu_1", name="now", arguments="{}"),)


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        # end_turn, max_tokens, tool_use and refusal: the golden cases
        ("stop_sequence", FinishReason.STOP),
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
