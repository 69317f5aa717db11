"""OpenAI request mapping: the exact JSON sent, headers, configuration errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai_support import API_KEY, Server, call, fixture_bytes, sse_response

from agentforge_typed import (
    AiMessage,
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
from agentforge_typed.providers._openai_wire import build_payload
from agentforge_typed.providers.openai import OpenAIChatModel

OK_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1726200000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}

WEATHER = ToolSpecification(
    name="get_weather",
    description="查询指定城市的当前天气",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "城市名"}},
        "required": ["city"],
    },
)
WEATHER_JSON = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "查询指定城市的当前天气",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "城市名"}},
            "required": ["city"],
        },
    },
}
MODES = ["chat", "achat", "stream", "astream"]


async def sent(
    request: ChatRequest, mode: str = "chat", **model_kwargs: Any
) -> tuple[Any, httpx.Request]:
    """The JSON body and the request the model sends for `request`."""
    if mode in ("stream", "astream"):
        server = Server(sse_response(fixture_bytes("thinking/stream.sse")))
    else:
        server = Server(httpx.Response(200, json=OK_BODY))
    await call(server.model(**model_kwargs), request, mode)
    (body,) = server.bodies
    return body, server.requests[0]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.AUTO, "auto"),
        (ToolChoice.NONE, "none"),
        (ToolChoice.REQUIRED, "required"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tools_with_each_tool_choice(choice: ToolChoice | str, wire: Any) -> None:
    request = ChatRequest(
        messages=[UserMessage(content="杭州今天天气怎么样")],
        parameters=ChatRequestParameters(
            tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False
        ),
    )
    body, _ = await sent(request)
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "杭州今天天气怎么样"}],
        "tools": [WEATHER_JSON],
        "tool_choice": wire,
        "parallel_tool_calls": False,
    }


async def test_tool_choice_and_parallel_calls_are_only_sent_with_tools() -> None:
    request = ChatRequest(
        messages=[UserMessage(content="hi")],
        parameters=ChatRequestParameters(tool_choice="auto", parallel_tool_calls=True),
    )
    body, _ = await sent(request)
    assert body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


async def test_strict_tool() -> None:
    spec = ToolSpecification(
        name="book",
        parameters={
            "type": "object",
            "properties": {"room": {"type": "string"}},
            "required": ["room"],
        },
        strict_schema=True,
    )
    request = ChatRequest(
        messages=[UserMessage(content="book room A")],
        parameters=ChatRequestParameters(tools=[spec]),
    )
    body, _ = await sent(request)
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "book",
                "parameters": {
                    "type": "object",
                    "properties": {"room": {"type": "string"}},
                    "required": ["room"],
                    "additionalProperties": False,
                },
                "strict": True,
            },
        }
    ]


async def test_multi_round_history_with_tool_calls_and_results() -> None:
    request = ChatRequest(
        messages=[
            SystemMessage(text="Be brief."),
            UserMessage(
                content=[
                    TextContent(text="Weather where this photo was taken, and in Paris?"),
                    ImageContent(url="https://example.com/hangzhou.jpg", detail="low"),
                    ImageContent(url="data:image/png;base64,iVBORw0KGgo="),
                ],
                name="alice",
            ),
            AiMessage(
                thinking="I should call the tool twice.",
                tool_calls=[
                    ToolCall(id="call_1", name="get_weather", arguments='{"city":"杭州"}'),
                    ToolCall(id="call_2", name="get_weather", arguments='{"city": "Paris"}'),
                ],
            ),
            ToolResultMessage(tool_call_id="call_1", tool_name="get_weather", text="22℃, sunny"),
            ToolResultMessage(
                tool_call_id="call_2",
                tool_name="get_weather",
                text="Error: service unavailable",
                is_error=True,
            ),
            AiMessage(text="Hangzhou: 22℃. Paris: unknown."),
            AiMessage(thinking="only thinking"),
            UserMessage(content=[TextContent(text="Thanks!")]),
        ],
        parameters=ChatRequestParameters(tools=[WEATHER]),
    )
    body, _ = await sent(request)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather where this photo was taken, and in Paris?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/hangzhou.jpg", "detail": "low"},
                },
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
            "name": "alice",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"杭州"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "22℃, sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: service unavailable"},
        {"role": "assistant", "content": "Hangzhou: 22℃. Paris: unknown."},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ]
    assert body["tools"] == [WEATHER_JSON]


@pytest.mark.parametrize("mode", ["chat", "stream"])
async def test_custom_parameters_spread_at_top_level(mode: str) -> None:
    request = ChatRequest(
        messages=[UserMessage(content="hi")],
        parameters=ChatRequestParameters(
            top_p=0.9,
            stop=["\n\n", "END"],
            custom={
                "seed": 7,
                "response_format": {"type": "json_object"},
                "stream_options": {"include_usage": False},
                "model": "gpt-4o",
            },
        ),
    )
    body, _ = await sent(request, mode)
    expected: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "top_p": 0.9,
        "stop": ["\n\n", "END"],
        "seed": 7,
        "response_format": {"type": "json_object"},
        "stream_options": {"include_usage": False},
    }
    if mode == "stream":
        expected["stream"] = True
    assert body == expected


async def test_model_defaults_merged_under_request_parameters() -> None:
    request = ChatRequest(
        messages=[UserMessage(content="hi")],
        parameters=ChatRequestParameters(model="gpt-4.1", temperature=0.0, custom={"user": "u-1"}),
    )
    body, _ = await sent(
        request,
        temperature=0.9,
        max_tokens=100,
        stop=["###"],
        custom={"seed": 1, "user": "default"},
    )
    assert body == {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 100,
        "stop": ["###"],
        "seed": 1,
        "user": "u-1",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_custom_message_is_refused(mode: str) -> None:
    server = Server()
    request = ChatRequest(
        messages=[UserMessage(content="hi"), CustomMessage(attributes={"role": "developer"})]
    )
    with pytest.raises(ModelError, match="OpenAI does not support CustomMessage"):
        await call(server.model(), request, mode)
    assert server.requests == []


def test_missing_api_key_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")


async def test_environment_and_keyless_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    server = Server(httpx.Response(200, json=OK_BODY))
    model = server.model("llama3.1", api_key=None)
    assert repr(model) == "OpenAIChatModel('llama3.1', base_url='http://localhost:11434/v1')"
    await call(model, ChatRequest(messages=[UserMessage(content="hi")]), "chat")
    (request,) = server.requests
    assert request.url == "http://localhost:11434/v1/chat/completions"
    assert "authorization" not in request.headers

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = Server(httpx.Response(200, json=OK_BODY))
    model = server.model(api_key=None, organization="org-1", project="proj_1")
    await call(model, ChatRequest(messages=[UserMessage(content="hi")]), "chat")
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-from-env"
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj_1")


def test_unknown_default_parameter_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="temprature"):
        OpenAIChatModel("gpt-4o-mini", api_key="sk-x", temprature=0.2)  # type: ignore[call-arg]


def test_api_key_not_in_repr() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key=API_KEY)
    assert API_KEY not in repr(model)
    assert repr(model) == "OpenAIChatModel('gpt-4o-mini', base_url='https://api.openai.com/v1')"


def test_response_format_maps_to_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
        "required": ["city"],
    }
    parameters = ChatRequestParameters(
        model="gpt-4o", response_format=ResponseFormat(name="forecast", json_schema=schema)
    )
    body = build_payload([UserMessage(content="hi")], parameters, stream=False)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "forecast",
            "schema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": ["integer", "null"], "description": "default: 1"},
                },
                "required": ["city", "days"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    loose = parameters.model_copy(
        update={"response_format": ResponseFormat(name="f", json_schema=schema, strict=False)}
    )
    sent = build_payload([UserMessage(content="hi")], loose, stream=False)["response_format"]
    assert sent["json_schema"] == {"name": "f", "schema": schema, "strict": False}
