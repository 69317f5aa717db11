"""Static-typing contract of `AnthropicChatModel`: it is a `ChatModel`, and its options are typed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
from typing_extensions import assert_type

from agentforge_typed import (
    AnthropicChatModel,
    ChatModel,
    ChatRequest,
    ChatResponse,
    StreamEvent,
    UserMessage,
)

anthropic = AnthropicChatModel(
    "claude-sonnet-4-5",
    api_key="sk-ant-example",
    max_tokens=2048,
    http_client=httpx.Client(),
    temperature=0.2,
)
model: ChatModel = anthropic
request = ChatRequest(messages=[UserMessage(content="hello")])
assert_type(anthropic.chat(request), ChatResponse)
assert_type(anthropic.stream(request), Iterator[StreamEvent])
assert_type(anthropic.astream(request), AsyncIterator[StreamEvent])
assert_type(anthropic.base_url, str)

# Misuse that must stay a type error.
AnthropicChatModel(model=42)  # type: ignore[arg-type]
AnthropicChatModel("claude", max_tokens="many")  # type: ignore[arg-type]
AnthropicChatModel("claude", http_client=httpx.AsyncClient())  # type: ignore[arg-type]
AnthropicChatModel("claude", temprature=0.2)  # type: ignore[call-arg]
