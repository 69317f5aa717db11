"""Request mapping of the Gemini provider: the exact JSON each conversation produces, and the
thought-signature round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    CustomMessage,
    ImageContent,
    ModelError,
    ResponseFormat,
    SchemaDialectError,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    ToolSpecification,
    UserMessage,
)
from agentforge_typed.providers._gemini_wire import (
    build_payload,
    map_tool,
    parse_response,
    request_path,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "gemini"
PARAMS = ChatRequestParameters(model="gemini-2.5-flash")
WEATHER = ToolSpecification(
    name="get_weather",
    description="Current weather of a city.",
    parameters={
        "type": "object",
        "title": "get_weather",
        "properties": {
            "city": {"type": "string", "title": "City"},
            "unit": {"anyOf": [{"enum": ["celsius", "fahrenheit"]}, {"type": "null"}]},
        },
        "required": ["city"],
    },
)
HISTORY = TypeAdapter(list[ChatMessage])


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def payload(messages: list[ChatMessage], **parameters: Any) -> dict[str, Any]:
    return build_payload(messages, PARAMS.model_copy(update=parameters))


def test_system_user_and_generation_config() -> None:
    body = payload(
        [
            SystemMessage(text="You are a weather bot."),
            UserMessage(content="Weather in Paris?"),
            SystemMessage(text="Answer in Celsius."),
        ],
        temperature=0.2,
        top_p=0.9,
        max_tokens=512,
        stop=["END"],
    )
    assert body == {
        "systemInstruction": {
            "parts": [{"text": "You are a weather bot."}, {"text": "Answer in Celsius."}]
        },
        "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "maxOutputTokens": 512,
            "stopSequences": ["END"],
        },
    }


def test_images_as_inline_data_and_file_data() -> None:
    body = payload(
        [
            UserMessage(
                content=[
                    TextContent(text="What is in these?"),
                    ImageContent(url="data:image/png;base64,iVBORw0KGgo="),
                    ImageContent(url="gs://bucket/cat.jpeg"),
                    ImageContent(url="https://example.com/render"),
                ]
            )
        ]
    )
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is in these?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/cat.jpeg"}},
                {"fileData": {"fileUri": "https://example.com/render"}},
            ],
        }
    ]


def test_image_data_url_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ModelError, match="data:<media type>;base64"):
        payload([UserMessage(content=[ImageContent(url="data:image/png,rawbytes")])])


def test_tools_as_full_json_schema_and_tool_choice() -> None:
    body = payload([UserMessage(content="Hi")], tools=[WEATHER], tool_choice=ToolChoice.REQUIRED)
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather of a city.",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "unit": {
                                "anyOf": [{"enum": ["celsius", "fahrenheit"]}, {"type": "null"}]
                            },
                        },
                        "required": ["city"],
                    },
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (ToolChoice.AUTO, {"mode": "AUTO"}),
        (ToolChoice.NONE, {"mode": "NONE"}),
        (ToolChoice.REQUIRED, {"mode": "ANY"}),
        ("get_weather", {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_tool_choice(choice: ToolChoice | str, config: dict[str, Any]) -> None:
    body = payload([UserMessage(content="Hi")], tools=[WEATHER], tool_choice=choice)
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_no_tool_config_without_tools_and_parallel_flag_not_sent() -> None:
    body = payload([UserMessage(content="Hi")], tool_choice="auto", parallel_tool_calls=False)
    assert body == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}


def test_recursive_schema_is_sent_whole_by_default_and_refused_by_the_subset() -> None:
    tree = ToolSpecification(
        name="walk",
        parameters={
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                    },
                }
            },
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "required": ["root"],
        },
    )
    assert map_tool(tree)["parametersJsonSchema"]["$defs"]["Node"]["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
    }
    with pytest.raises(SchemaDialectError, match="recursive"):
        map_tool(tree, "gemini")


def test_a_tool_without_parameters_declares_none() -> None:
    ping = ToolSpecification(name="ping", parameters={"type": "object", "properties": {}})
    assert map_tool(ping) == map_tool(ping, "gemini") == {"name": "ping"}


def test_the_openapi_subset_option() -> None:
    body = build_payload(
        [UserMessage(content="Hi")],
        PARAMS.model_copy(update={"tools": [WEATHER, ToolSpecification(name="ping")]}),
        function_schema="gemini",
    )
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather of a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "unit": {
                                "type": "string",
                                "enum": ["celsius", "fahrenheit"],
                                "nullable": True,
                            },
                        },
                        "required": ["city"],
                    },
                },
                # A tool without parameters declares none: the subset refuses an empty object.
                {"name": "ping"},
            ]
        }
    ]


def test_native_structured_output() -> None:
    schema = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
    body = payload(
        [UserMessage(content="Hi")],
        response_format=ResponseFormat(name="Weather", json_schema=schema),
        temperature=0.0,
    )
    assert body["generationConfig"] == {
        "temperature": 0.0,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


def test_custom_merges_into_existing_objects() -> None:
    body = payload(
        [UserMessage(content="Hi")],
        temperature=0.5,
        custom={
            "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}],
        },
    )
    assert body["generationConfig"] == {
        "temperature": 0.5,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert body["safetySettings"] == [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}]


def test_custom_tools_join_the_function_declarations() -> None:
    search: dict[str, Any] = {"googleSearch": {}}
    body = payload([UserMessage(content="Hi")], tools=[WEATHER], custom={"tools": [search]})
    assert [list(entry) for entry in body["tools"]] == [["functionDeclarations"], ["googleSearch"]]
    alone = payload([UserMessage(content="Hi")], custom={"tools": [search]})
    assert alone["tools"] == [search]


def test_signatures_survive_json_and_go_back_on_the_same_parts() -> None:
    """Only the first of two parallel calls is signed: each part goes back exactly as received."""
    answer = fixture("parallel_tool_calls/response.json")
    message = parse_response(answer).ai_message
    calls = message.tool_calls
    # Persisted and loaded again, as a resumed conversation would be.
    history = HISTORY.validate_json(
        HISTORY.dump_json(
            [
                UserMessage(content="Paris and Zürich?"),
                message,
                ToolResultMessage(tool_call_id=calls[0].id, tool_name="get_weather", text="18°C"),
                ToolResultMessage(
                    tool_call_id=calls[1].id, tool_name="get_weather", text="boom", is_error=True
                ),
            ]
        )
    )
    body = payload(history)
    assert body["contents"][1] == answer["candidates"][0]["content"]
    # Ids generated here are never sent; the results of the round share one user turn.
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "18°C"}}},
            {"functionResponse": {"name": "get_weather", "response": {"error": "boom"}}},
        ],
    }
    assert len(body["contents"]) == 3


def test_signed_empty_text_part_goes_back() -> None:
    answer = fixture("text/response.json")
    message = parse_response(answer).ai_message
    body = payload([UserMessage(content="Weather?"), message, UserMessage(content="Thanks")])
    assert body["contents"][1] == answer["candidates"][0]["content"]
    assert body["contents"][1]["parts"][1] == {
        "text": "",
        "thoughtSignature": answer["candidates"][0]["content"]["parts"][1]["thoughtSignature"],
    }


def test_gemini_call_ids_are_echoed_in_function_responses() -> None:
    answer = fixture("call_with_id/response.json")
    message = parse_response(answer).ai_message
    assert message.tool_calls[0].id == "k3x9q2ab"
    body = payload(
        [
            UserMessage(content="Time?"),
            message,
            ToolResultMessage(tool_call_id="k3x9q2ab", tool_name="get_time", text="09:00"),
        ]
    )
    assert body["contents"][1] == answer["candidates"][0]["content"]
    assert body["contents"][2]["parts"] == [
        {
            "functionResponse": {
                "id": "k3x9q2ab",
                "name": "get_time",
                "response": {"output": "09:00"},
            }
        }
    ]


def test_another_providers_messages_send_no_signature_and_no_foreign_id() -> None:
    history: list[ChatMessage] = [
        UserMessage(content="Weather?"),
        AiMessage(
            text="Checking.",
            thinking="unsigned reasoning from elsewhere",
            tool_calls=[ToolCall(id="toolu_01", name="get_weather", arguments='{"city": "Rome"}')],
        ),
        ToolResultMessage(tool_call_id="toolu_01", tool_name="get_weather", text="24°C"),
        UserMessage(content="And tomorrow?"),
    ]
    assert payload(history)["contents"] == [
        {"role": "user", "parts": [{"text": "Weather?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "24°C"}}}
            ],
        },
        {"role": "user", "parts": [{"text": "And tomorrow?"}]},
    ]


def test_an_edited_message_keeps_only_the_signatures_of_unchanged_calls() -> None:
    answer = fixture("parallel_tool_calls/response.json")
    message = parse_response(answer).ai_message
    first, second = message.tool_calls
    edited = message.model_copy(
        update={"tool_calls": (first, second.model_copy(update={"arguments": '{"city": "Bern"}'}))}
    )
    parts = payload([UserMessage(content="?"), edited])["contents"][1]["parts"]
    raw = answer["candidates"][0]["content"]["parts"]
    # The thought summary is not sent once its message changed; the signature is not moved.
    assert parts == [raw[1], {"functionCall": {"name": "get_weather", "args": {"city": "Bern"}}}]


def test_assistant_without_content_sends_one_empty_text_part() -> None:
    body = payload([UserMessage(content="Hi"), AiMessage(), UserMessage(content="?")])
    assert body["contents"][1] == {"role": "model", "parts": [{"text": ""}]}


def test_tool_arguments_that_are_not_an_object_are_refused() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments="[1, 2]")
    with pytest.raises(ModelError, match="not a JSON object"):
        payload([UserMessage(content="Hi"), AiMessage(tool_calls=[call])])


def test_malformed_parts_attribute_is_a_model_error() -> None:
    message = AiMessage(text="x", attributes={"gemini_parts": [{"functionCall": {"args": {}}}]})
    with pytest.raises(ModelError, match="malformed 'gemini_parts'"):
        payload([UserMessage(content="Hi"), message])


def test_custom_message() -> None:
    raw = {"role": "model", "parts": [{"executableCode": {"language": "PYTHON", "code": "1+1"}}]}
    body = payload([UserMessage(content="Hi"), CustomMessage(attributes={"gemini_content": raw})])
    assert body["contents"][1] == raw
    with pytest.raises(ModelError, match="gemini_content"):
        payload([CustomMessage(attributes={"anthropic_message": {"role": "user"}})])


@pytest.mark.parametrize(
    ("model", "stream", "path"),
    [
        ("gemini-2.5-flash", False, "models/gemini-2.5-flash:generateContent"),
        ("models/gemini-2.5-flash", True, "models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
        # A hostile name cannot add a path segment or a query (and so never a key=).
        (
            "../../v1/files?key=x#",
            False,
            "models/..%2F..%2Fv1%2Ffiles%3Fkey%3Dx%23:generateContent",
        ),
    ],
)
def test_request_path(model: str, stream: bool, path: str) -> None:
    assert request_path(model, stream=stream) == path


def test_request_path_needs_a_model() -> None:
    with pytest.raises(ModelError, match="model name"):
        request_path("models/ ", stream=False)
