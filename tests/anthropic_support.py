"""Helpers for Anthropic stream tests: a streamed answer keeps the model's own arguments text."""

from __future__ import annotations

from collections.abc import Sequence

from agentforge_typed import ChatResponse
from agentforge_typed.providers._sse import SSEDecoder


def streamed_arguments(sse: bytes) -> list[str]:
    """The `partial_json` pieces each `tool_use` block of an Anthropic stream carried, joined."""
    pieces: dict[int, list[str]] = {}
    for event in SSEDecoder().feed(sse):
        data = event.json()
        if data["type"] == "content_block_start" and data["content_block"]["type"] == "tool_use":
            pieces[data["index"]] = []
        elif data["type"] == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            pieces[data["index"]].append(data["delta"]["partial_json"])
    return ["".join(parts) for _, parts in sorted(pieces.items())]


def with_arguments(response: ChatResponse, arguments: Sequence[str]) -> ChatResponse:
    """`response` with its tool calls' arguments replaced, in order."""
    message = response.ai_message
    calls = tuple(
        call.model_copy(update={"arguments": text})
        for call, text in zip(message.tool_calls, arguments, strict=True)
    )
    return response.model_copy(
        update={"ai_message": message.model_copy(update={"tool_calls": calls})}
    )
