"""OpenAI Responses request mapping: the exact JSON sent, the reasoning round trip, refusals."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai_support import API_KEY, call
from pydantic import TypeAdapter
from responses_support import ResponsesServer, fixture_bytes, fixture_json

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    CustomMessage,
    ImageContent,
    ModelError,
    ResponseFormat,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    ToolSpecification,
    UserMessage,
)
from agentforge_typed.providers._responses_wire import (
    OUTPUT_ATTRIBUTE,
    build_payload,
    parse_response,
)

MODES = ["chat", "achat", "stream", "astream"]
WEATHER = ToolSpecification(
    name="get_weather",
    description="Current weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "title": "City"}},
        "required": ["city"],
    },
)
WEATHER_JSON = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather of a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "strict": False,
}
STATELESS = {"store": False, "include": ["reasoning.encrypted_content"]}


async def sent(
    request: ChatRequest, mode: str = "chat", **kwargs: Any
) -> tuple[Any, httpx.Request]:
    """The JSON body and the request the model sends for `request`."""
    if mode.endswith("stream"):
        answer = httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=fixture_bytes("thinking/stream.sse"),
        )
    else:
        answer = httpx.Response(200, json=fixture_json("thinking/response.json"))
    server = ResponsesServer(answer)
    await call(server.model(**kwargs), request, mode)
    (body,) = server.bodies
    return body, server.requests[0]


def payload(messages: list[ChatMessage], **parameters: Any) -> dict[str, Any]:
    return build_payload(
        messages, ChatRequestParameters(model="gpt-5-mini", **parameters), stream=False
    )


@pytest.mark.parametrize("mode", MODES)
async def test_plain_request_every_client_path(mode: str) -> None:
    request = ChatRequest(
        messages=[
            SystemMessage(text="You are concise."),
            UserMessage(content="What is a future?"),
        ],
        parameters=ChatRequestParameters(temperature=0.2, top_p=0.9, max_tokens=256),
    )
    body, http_request = await sent(request, mode, organization="org-1", project="proj-2")
    expected: dict[str, Any] = {
        "model": "gpt-5-mini",
        "instructions": "You are concise.",
        "input": [{"role": "user", "content": "What is a future?"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 256,
        **STATELESS,
    }
    if mode.endswith("stream"):
        expected["stream"] = True
    assert body == expected
    assert http_request.method == "POST"
    assert http_request.url == "https://api.openai.com/v1/responses"
    assert http_request.headers["authorization"] == f"Bearer {API_KEY}"
    assert http_request.headers["openai-organization"] == "org-1"
    assert http_request.headers["openai-project"] == "proj-2"


def test_a_whole_conversation_as_input_items() -> None:
    messages: list[ChatMessage] = [
        SystemMessage(text="You report the weather."),
        SystemMessage(text="Be brief."),
        UserMessage(
            content=[
                TextContent(text="Weather where this photo was taken?"),
                ImageContent(url="https://example.com/paris.jpg"),
                ImageContent(url="data:image/png;base64,iVBORw0KGgo=", detail="low"),
            ],
            name="ada",
        ),
        AiMessage(
            text="Checking.",
            thinking="Not sent: another provider's reasoning has no Responses item.",
            tool_calls=[ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')],
        ),
        ToolResultMessage(tool_call_id="call_1", tool_name="get_weather", text="18 °C"),
        SystemMessage(text="Answer in French."),
        AiMessage(),
    ]
    assert payload(messages)["instructions"] == "You report the weather.\n\nBe brief."
    assert payload(messages)["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather where this photo was taken?"},
                {
                    "type": "input_image",
                    "image_url": "https://example.com/paris.jpg",
                    "detail": "auto",
                },
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw0KGgo=",
                    "detail": "low",
                },
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18 °C"},
        {"role": "system", "content": "Answer in French."},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.AUTO, "auto"),
        (ToolChoice.NONE, "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "name": "get_weather"}),
    ],
)
def test_tools_tool_choice_and_parallel_calls(choice: ToolChoice | str, wire: Any) -> None:
    body = payload(
        [UserMessage(content="hi")], tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False
    )
    assert body == {
        "model": "gpt-5-mini",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [WEATHER_JSON],
        "tool_choice": wire,
        "parallel_tool_calls": False,
        **STATELESS,
    }


def test_tool_choice_is_only_sent_with_tools() -> None:
    body = payload([UserMessage(content="hi")], tool_choice="auto", parallel_tool_calls=True)
    assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_strict_is_always_sent_and_strict_tools_get_the_strict_dialect() -> None:
    # The Responses API enforces a schema whose `strict` is absent, so `false` must be explicit.
    spec = WEATHER.model_copy(
        update={
            "strict_schema": True,
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "default": 1},
                },
                "required": ["city"],
            },
        }
    )
    (plain, strict) = payload([UserMessage(content="hi")], tools=[WEATHER, spec])["tools"]
    assert plain["strict"] is False
    assert strict["strict"] is True
    assert strict["parameters"]["required"] == ["city", "days"]
    assert strict["parameters"]["additionalProperties"] is False


def test_native_structured_output_goes_to_text_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    body = payload(
        [UserMessage(content="hi")],
        response_format=ResponseFormat(name="answer", json_schema=schema),
        custom={"text": {"verbosity": "low"}},
    )
    assert body["text"] == {
        "verbosity": "low",
        "format": {
            "type": "json_schema",
            "name": "answer",
            "schema": {**schema, "additionalProperties": False},
            "strict": True,
        },
    }


def test_reasoning_effort_hosted_tools_and_custom() -> None:
    hosted = {"type": "web_search_preview"}
    body = payload(
        [UserMessage(content="hi")],
        tools=[WEATHER],
        tool_choice="auto",
        custom={
            "reasoning_effort": "low",
            "reasoning": {"summary": "auto"},
            "tools": [hosted],
            "include": ["web_search_call.action.sources"],
            "service_tier": "flex",
        },
    )
    assert body == {
        "model": "gpt-5-mini",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [WEATHER_JSON, hosted],
        "tool_choice": "auto",
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": False,
        "include": ["web_search_call.action.sources", "reasoning.encrypted_content"],
        "service_tier": "flex",
    }


def test_hosted_tools_alone_still_carry_tool_choice() -> None:
    body = payload(
        [UserMessage(content="hi")],
        tool_choice=ToolChoice.REQUIRED,
        custom={"tools": [{"type": "web_search_preview"}]},
    )
    assert body["tools"] == [{"type": "web_search_preview"}]
    assert body["tool_choice"] == "required"


def test_stored_responses_do_not_ask_for_encrypted_reasoning() -> None:
    body = payload([UserMessage(content="hi")], custom={"store": True})
    assert body["store"] is True and "include" not in body


def test_stop_sequences_are_refused() -> None:
    with pytest.raises(ModelError, match="Responses API has no stop sequences"):
        payload([UserMessage(content="hi")], stop=["###"])


def test_custom_message_carries_raw_input_items() -> None:
    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    body = payload([CustomMessage(attributes={"openai_responses_input": [approval]})])
    assert body["input"] == [approval]
    for attributes in ({}, {"openai_responses_input": "x"}, {"openai_responses_input": [1]}):
        with pytest.raises(ModelError, match="list of raw input items"):
            payload([CustomMessage(attributes=attributes)])


# -- the reasoning round trip -------------------------------------------------------------------


def replayed(first_answer: AiMessage) -> list[dict[str, Any]]:
    """The input items of the turn after `first_answer` got its tool results."""
    history: list[ChatMessage] = [
        UserMessage(content="Paris and Rome?"),
        first_answer,
        *(
            ToolResultMessage(tool_call_id=c.id, tool_name=c.name, text=f"{c.id} done")
            for c in first_answer.tool_calls
        ),
    ]
    items: list[dict[str, Any]] = payload(history)["input"][1:]
    return items


def test_reasoning_items_are_replayed_before_their_calls_then_the_outputs() -> None:
    body = fixture_json("parallel_tool_calls/response.json")
    answer = parse_response(body).ai_message
    reasoning, *calls = body["output"]
    assert replayed(answer) == [
        reasoning,  # same id, same (final) encrypted_content, its summary
        *calls,
        {
            "type": "function_call_output",
            "call_id": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL",
            "output": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL done",
        },
        {
            "type": "function_call_output",
            "call_id": "call_Hq8VnB2xM5tR9cW1zK6pJ3dF",
            "output": "call_Hq8VnB2xM5tR9cW1zK6pJ3dF done",
        },
    ]
    assert reasoning["encrypted_content"].startswith("gAAAAABosaPzFINAL")


def test_reasoning_survives_a_json_round_trip_of_the_history() -> None:
    answer = parse_response(fixture_json("parallel_tool_calls/response.json")).ai_message
    adapter = TypeAdapter(AiMessage)
    restored = adapter.validate_json(adapter.dump_json(answer))
    assert restored == answer
    assert replayed(restored) == replayed(answer)


def test_a_reasoning_item_without_summary_gets_an_empty_one() -> None:
    reasoning = {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAA-x"}
    call_item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    answer = AiMessage(
        tool_calls=[ToolCall(id="call_1", name="f", arguments="{}")],
        attributes={OUTPUT_ATTRIBUTE: [reasoning, call_item]},
    )
    assert replayed(answer)[:2] == [{**reasoning, "summary": []}, call_item]


def test_an_edited_message_is_replayed_as_plain_items() -> None:
    answer = parse_response(fixture_json("parallel_tool_calls/response.json")).ai_message
    edited = answer.model_copy(update={"tool_calls": answer.tool_calls[:1]})
    assert replayed(edited) == [
        {
            "type": "function_call",
            "call_id": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL",
            "output": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL done",
        },
    ]


def test_hosted_tool_items_are_replayed() -> None:
    body = fixture_json("web_search/response.json")
    answer = parse_response(body).ai_message
    assert payload([UserMessage(content="Paris?"), answer])["input"][1:] == body["output"]


def test_malformed_output_attribute_is_a_model_error() -> None:
    answer = AiMessage(text="hi", attributes={OUTPUT_ATTRIBUTE: [{"type": "message"}]})
    with pytest.raises(ModelError, match="malformed 'openai_responses_output' attribute"):
        payload([UserMessage(content="x"), answer])


def test_a_non_message_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="not a chat message: str"):
        payload(["hi"])  # type: ignore[list-item]
