"""Static-typing contract of the chat layer: mypy --strict must accept the usage and reject the
misuse lines (each `type: ignore` is checked by `warn_unused_ignores`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from typing_extensions import assert_type

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    ToolCall,
    UserMessage,
)
from agentforge_typed.providers import FinishReason, StreamEvent, TokenUsage, ToolChoice


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi", tool_calls=[ToolCall(id="1", name="f", arguments="{}")])


model: ChatModel = FunctionModel(reply)
request = ChatRequest(messages=[UserMessage(content="hello")])
response = model.chat(request)
assert_type(response, ChatResponse)
assert_type(UserMessage(text="hi"), UserMessage)  # the text keyword of every message kind
assert_type(UserMessage(content="hi").text, str)
assert_type(response.ai_message.text, str | None)
assert_type(response.ai_message.tool_calls[0], ToolCall)
assert_type(response.finish_reason, FinishReason | None)
assert_type(model.stream(request), Iterator[StreamEvent])
assert_type(model.astream(request), AsyncIterator[StreamEvent])
assert_type(TokenUsage() + TokenUsage(), TokenUsage)
merged = ChatRequestParameters(model="a").merge(ChatRequestParameters(tool_choice=ToolChoice.AUTO))
assert_type(merged, ChatRequestParameters)

# Misuse that must stay a type error.
ChatRequest(messages=1)  # type: ignore[arg-type]
response.ai_message.nonexistent  # type: ignore[attr-defined]
UserMessage(content=42)  # type: ignore[call-overload]
UserMessage(text=42)  # type: ignore[call-overload]
UserMessage(text="hi", content="ho")  # type: ignore[call-overload]
FunctionModel(lambda: AiMessage())  # type: ignore[arg-type,misc]
TokenUsage() + 1  # type: ignore[operator]
