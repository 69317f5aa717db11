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
    OpenAIChatModel,
    UserMessage,
)
from agentforge_typed.providers import StreamEvent

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

# Prompt caching: where the breakpoints go, and for how long.
AnthropicChatModel("claude", prompt_cache="off", cache_ttl="1h")
AnthropicChatModel("claude", prompt_cache=["tools", "system"])
AnthropicChatModel("claude", prompt_cache="always")  # type: ignore[arg-type]
AnthropicChatModel("claude", prompt_cache=["history"])  # type: ignore[list-item]
AnthropicChatModel("claude", cache_ttl="24h")  # type: ignore[arg-type]
OpenAIChatModel("gpt-4o", prompt_cache_key="tenant-7", prompt_cache_retention="24h")
OpenAIChatModel("gpt-4o", prompt_cache_retention="forever")  # type: ignore[arg-type]
