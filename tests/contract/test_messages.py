from __future__ import annotations

import pydantic
import pytest
from pydantic import TypeAdapter

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

HISTORY: list[ChatMessage] = [
    SystemMessage(text="You are terse."),
    UserMessage(content="Weather in Paris?", name="alice"),
    UserMessage(
        content=[TextContent(text="and this?"), ImageContent(url="data:image/png;base64,AAAA")]
    ),
    AiMessage(
        text="Let me check.",
        thinking="Need the weather tool.",
        tool_calls=[ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}')],
        attributes={"signature": "abc"},
    ),
    ToolResultMessage(tool_call_id="call_1", tool_name="weather", text="18°C, cloudy"),
    ToolResultMessage(tool_call_id="call_2", tool_name="other", text="boom", is_error=True),
    CustomMessage(attributes={"type": "web_search_result", "items": [1, 2]}),
    AiMessage(text="It is 18°C."),
]

history_adapter = TypeAdapter(list[ChatMessage])


@pytest.mark.parametrize("message", HISTORY, ids=lambda m: type(m).__name__)
def test_each_message_round_trips_through_json(message: ChatMessage) -> None:
    adapter: TypeAdapter[ChatMessage] = TypeAdapter(ChatMessage)
    assert adapter.validate_json(adapter.dump_json(message)) == message


def test_history_round_trips_unchanged() -> None:
    dumped = history_adapter.dump_json(HISTORY)
    loaded = history_adapter.validate_json(dumped)
    assert loaded == HISTORY
    assert [type(m) for m in loaded] == [type(m) for m in HISTORY]
    assert history_adapter.dump_json(loaded) == dumped


def test_unknown_role_is_rejected_clearly() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        history_adapter.validate_python([{"role": "wizard", "text": "hi"}])
    (error,) = info.value.errors()
    assert error["type"] == "union_tag_invalid"
    assert "wizard" in str(info.value)
    assert "'system', 'user', 'assistant', 'tool', 'custom'" in str(info.value)


def test_request_needs_a_message() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        ChatRequest(messages=[])
    assert info.value.errors()[0]["loc"] == ("messages",)


def test_messages_are_immutable() -> None:
    request = ChatRequest(messages=[UserMessage(content="hi")])
    assert isinstance(request.messages, tuple)
    with pytest.raises(pydantic.ValidationError):
        request.messages = ()
    with pytest.raises(pydantic.ValidationError):
        request.messages[0].content = "changed"
    message = AiMessage(tool_calls=[ToolCall(id="1", name="f")])
    assert isinstance(message.tool_calls, tuple)


def test_request_from_a_list_is_decoupled_from_it() -> None:
    messages: list[ChatMessage] = [UserMessage(content="hi")]
    request = ChatRequest(messages=messages)
    messages.append(UserMessage(content="later"))
    assert len(request.messages) == 1


def test_user_message_single_text_accessors() -> None:
    assert UserMessage(content="hello").text == "hello"
    assert UserMessage(content="hello").has_single_text
    one_part = UserMessage(content=[TextContent(text="part")])
    assert one_part.has_single_text and one_part.text == "part"
    several = UserMessage(content=[TextContent(text="a"), TextContent(text="b")])
    assert not several.has_single_text
    with pytest.raises(ValueError, match="several or non-text parts"):
        _ = several.text
    image = UserMessage(content=[ImageContent(url="https://example.com/a.png")])
    assert not image.has_single_text
    with pytest.raises(ValueError):
        _ = image.text


def test_user_message_needs_content_parts() -> None:
    with pytest.raises(pydantic.ValidationError):
        UserMessage(content=[])


def test_ai_message_tool_call_flag() -> None:
    assert not AiMessage(text="hi").has_tool_calls
    assert AiMessage(tool_calls=[ToolCall(id="1", name="f")]).has_tool_calls
    assert AiMessage().text is None


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(pydantic.ValidationError, match="extra"):
        SystemMessage(text="x", colour="red")  # type: ignore[call-arg]
