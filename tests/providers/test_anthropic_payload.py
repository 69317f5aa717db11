"""Request mapping of the Anthropic provider: the exact JSON each conversation produces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    CustomMessage,
    ImageContent,
    ModelError,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    ToolSpecification,
    UserMessage,
)
from agentforge_typed.providers._anthropic_wire import build_payload, parse_response
from agentforge_typed.providers._dialects import render_schema

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "anthropic"
PARAMS = ChatRequestParameters(model="claude-sonnet-4-5", max_tokens=1024)
WEATHER = ToolSpecification(
    name="get_weather",
    description="Current weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)


def payload(messages: list[ChatMessage], **parameters: Any) -> dict[str, Any]:
    return build_payload(messages, PARAMS.model_copy(update=parameters))


def test_system_messages_hoisted_and_joined_by_a_blank_line() -> None:
    body = payload(
        [
            SystemMessage(text="You are a weather bot."),
            UserMessage(content="Weather in Paris?"),
            SystemMessage(text="Answer in Celsius."),
        ]
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a weather bot.\n\nAnswer in Celsius.",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }


def test_multi_round_tool_history() -> None:
    messages: list[ChatMessage] = [
        SystemMessage(text="You are a weather bot."),
        UserMessage(content="Weather in Paris and Rome?"),
        AiMessage(
            text="Checking both.",
            tool_calls=[
                ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="toolu_2", name="get_weather", arguments='{"city":"Rome"}'),
            ],
        ),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="get_weather", text="18°C"),
        ToolResultMessage(
            tool_call_id="toolu_2", tool_name="get_weather", text="timeout", is_error=True
        ),
        AiMessage(tool_calls=[ToolCall(id="toolu_3", name="get_weather", arguments="")]),
        ToolResultMessage(tool_call_id="toolu_3", tool_name="get_weather", text="21°C"),
        UserMessage(
            content=[TextContent(text="And this place?"), ImageContent(url="https://x.test/a.png")]
        ),
        AiMessage(text="That is Rome."),
        UserMessage(content="Thanks!"),
    ]
    assert payload(messages, tools=[WEATHER]) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a weather bot.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather of a city.",
                "input_schema": render_schema(WEATHER.parameters, "anthropic"),
            }
        ],
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                # Parallel results: one user message of tool_result blocks.
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "timeout",
                        "is_error": True,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_3", "name": "get_weather", "input": {}}
                ],
            },
            {
                # A user turn right after tool results is merged into the same message.
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_3", "content": "21°C"},
                    {"type": "text", "text": "And this place?"},
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "That is Rome."}]},
            {"role": "user", "content": "Thanks!"},
        ],
    }


def test_consecutive_user_strings_are_merged_into_blocks() -> None:
    body = payload([UserMessage(content="one"), UserMessage(content="two")])
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]


def test_data_url_image_becomes_base64_source() -> None:
    image = ImageContent(url="data:image/png;base64,iVBORw0KGgo=", detail="high")
    body = payload([UserMessage(content=[image])])
    assert body["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
    ]


@pytest.mark.parametrize(
    "url", ["data:image/png,rawbytes", "data:;base64,AAAA", "data:image/png;base64,"]
)
def test_unusable_data_url_is_refused(url: str) -> None:
    with pytest.raises(ModelError, match="base64"):
        payload([UserMessage(content=[ImageContent(url=url)])])


@pytest.mark.parametrize("arguments", ['["Paris"]', '{"city": "Par', "null"])
def test_arguments_that_are_not_an_object_go_back_as_invalid_json(arguments: str) -> None:
    """A call the tool refused (its arguments error is the next message) must still be sendable:
    the API needs an object, and the model sees what it sent."""
    call = ToolCall(id="toolu_9", name="get_weather", arguments=arguments)
    sent = payload([UserMessage(content="hi"), AiMessage(tool_calls=[call])])
    assert sent["messages"][1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_9",
            "name": "get_weather",
            "input": {"INVALID_JSON": arguments},
        }
    ]


def test_signed_thinking_is_echoed_first_and_unchanged() -> None:
    body = json.loads((FIXTURES / "thinking/response.json").read_text())
    message = parse_response(body).ai_message
    request = payload(
        [
            UserMessage(content="Weather in Paris?"),
            message,
            ToolResultMessage(
                tool_call_id=message.tool_calls[0].id, tool_name="get_weather", text="18°C"
            ),
        ]
    )
    assert request["messages"][1] == {"role": "assistant", "content": body["content"]}
    assert request["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants the weather in Paris. I should call get_weather with city=Paris.",
        "signature": body["content"][0]["signature"],
    }
    assert request["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "content": "18°C",
            }
        ],
    }


def test_edited_message_keeps_signed_thinking_but_its_own_text() -> None:
    message = parse_response(
        json.loads((FIXTURES / "thinking/response.json").read_text())
    ).ai_message
    edited = message.model_copy(update={"text": "Calling the tool.", "tool_calls": ()})
    assert payload([UserMessage(content="hi"), edited])["messages"][1]["content"] == [
        message.attributes["anthropic_content"][0],
        {"type": "text", "text": "Calling the tool."},
    ]
    rethought = message.model_copy(update={"thinking": "Something else."})
    assert [
        b["type"] for b in payload([UserMessage(content="hi"), rethought])["messages"][1]["content"]
    ] == ["tool_use"]


def test_unsigned_thinking_is_not_sent() -> None:
    message = AiMessage(text="Paris.", thinking="from another provider")
    assert payload([UserMessage(content="hi"), message])["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Paris."}],
    }


def test_server_tool_blocks_echoed_in_their_original_position() -> None:
    body = json.loads((FIXTURES / "web_search/response.json").read_text())
    message = parse_response(body).ai_message
    request = payload(
        [UserMessage(content="Weather in Paris?"), message, UserMessage(content="Thanks")]
    )
    assert request["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": "Thanks"},
    ]


def test_redacted_thinking_is_kept_and_echoed() -> None:
    content = [
        {
            "type": "redacted_thinking",
            "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
        },
        {"type": "text", "text": "Done."},
    ]
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    message = parse_response(body).ai_message
    assert message.text == "Done." and message.attributes == {"anthropic_content": content}
    assert payload([UserMessage(content="hi"), message])["messages"][1]["content"] == content


def test_custom_message_passthrough_and_refusal() -> None:
    raw = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "Notes."},
            }
        ],
    }
    body = payload(
        [UserMessage(content="Read this:"), CustomMessage(attributes={"anthropic_message": raw})]
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read this:"}, *raw["content"]]}
    ]
    with pytest.raises(ModelError, match="anthropic_message"):
        payload([CustomMessage(attributes={"kind": "other"})])


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        (ToolChoice.AUTO, None, {"type": "auto"}),
        (ToolChoice.REQUIRED, None, {"type": "any"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
        (ToolChoice.NONE, None, {"type": "none"}),
        (ToolChoice.AUTO, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (ToolChoice.REQUIRED, False, {"type": "any", "disable_parallel_tool_use": True}),
        (
            "get_weather",
            False,
            {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        ),
        (ToolChoice.NONE, False, {"type": "none"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, True, None),
        (ToolChoice.AUTO, True, {"type": "auto"}),
    ],
)
def test_tool_choice(choice: ToolChoice | str | None, parallel: bool | None, expected: Any) -> None:
    body = payload(
        [UserMessage(content="hi")],
        tools=[WEATHER],
        tool_choice=choice,
        parallel_tool_calls=parallel,
    )
    assert body.get("tool_choice") == expected


def test_parallel_false_without_tools_sends_no_tool_choice() -> None:
    assert "tool_choice" not in payload([UserMessage(content="hi")], parallel_tool_calls=False)


def test_sampling_parameters_and_custom_spread_at_top_level() -> None:
    body = payload(
        [UserMessage(content="hi")],
        temperature=0.2,
        top_p=0.9,
        stop=["###", "END"],
        max_tokens=64,
        custom={
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "metadata": {"user_id": "u-1"},
        },
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["###", "END"],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "metadata": {"user_id": "u-1"},
    }


def test_stream_flag_and_missing_model() -> None:
    assert build_payload([UserMessage(content="hi")], PARAMS, stream=True)["stream"] is True
    with pytest.raises(ValueError, match="max_tokens"):
        build_payload([UserMessage(content="hi")], ChatRequestParameters(model="claude"))


def test_malformed_content_attribute_is_reported() -> None:
    message = AiMessage(text="x", attributes={"anthropic_content": [{"text": "no type"}]})
    with pytest.raises(ModelError, match="malformed 'anthropic_content'"):
        payload([UserMessage(content="hi"), message])


def test_server_tools_in_custom_are_offered_next_to_client_tools() -> None:
    web_search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    body = payload([UserMessage(content="news?")], tools=[WEATHER], custom={"tools": [web_search]})
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "input_schema": render_schema(WEATHER.parameters, "anthropic"),
        },
        web_search,
    ]
    only_server = payload([UserMessage(content="news?")], custom={"tools": [web_search]})
    assert only_server["tools"] == [web_search]
