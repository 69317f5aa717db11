"""Static-typing contract of `OpenAIResponsesModel`: it is a `ChatModel`, and its options are typed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
from typing_extensions import assert_type

from agentforge_typed import ChatModel, ChatRequest, ChatResponse, OpenAIResponsesModel, UserMessage
from agentforge_typed.providers import StreamEvent

responses = OpenAIResponsesModel(
    "gpt-5-mini",
    api_key="sk-example",
    http_client=httpx.Client(),
    max_retries=3,
    custom={"reasoning": {"effort": "low"}},
)
model: ChatModel = responses
request = ChatRequest(messages=[UserMessage(content="hello")])
assert_type(responses.chat(request), ChatResponse)
assert_type(responses.stream(request), Iterator[StreamEvent])
assert_type(responses.astream(request), AsyncIterator[StreamEvent])
assert_type(responses.base_url, str)

# Misuse that must stay a type error.
OpenAIResponsesModel(model=42)  # type: ignore[arg-type]
OpenAIResponsesModel("gpt-5-mini", max_retries="3")  # type: ignore[arg-type]
OpenAIResponsesModel("gpt-5-mini", http_client=httpx.AsyncClient())  # type: ignore[arg-type]
