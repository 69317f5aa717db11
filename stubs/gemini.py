"""Static-typing contract of `GeminiChatModel`: it is a `ChatModel`, and its options are typed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
from typing_extensions import assert_type

from agentforge_typed import ChatModel, ChatRequest, ChatResponse, GeminiChatModel, UserMessage
from agentforge_typed.providers import MAX_GEMINI_SCHEMA_CHARS, StreamEvent

gemini = GeminiChatModel(
    "gemini-2.5-flash",
    api_key="AIza-example",
    http_client=httpx.Client(),
    function_schema="gemini",
    temperature=0.2,
)
model: ChatModel = gemini
request = ChatRequest(messages=[UserMessage(content="hello")])
assert_type(gemini.chat(request), ChatResponse)
assert_type(gemini.stream(request), Iterator[StreamEvent])
assert_type(gemini.astream(request), AsyncIterator[StreamEvent])
assert_type(gemini.base_url, str)
assert_type(MAX_GEMINI_SCHEMA_CHARS, int)

# Misuse that must stay a type error.
GeminiChatModel(model=42)  # type: ignore[arg-type]
GeminiChatModel("gemini-2.5-flash", function_schema="openapi")  # type: ignore[arg-type]
GeminiChatModel("gemini-2.5-flash", async_http_client=httpx.Client())  # type: ignore[arg-type]
GeminiChatModel("gemini-2.5-flash", temprature=0.2)  # type: ignore[call-arg]
