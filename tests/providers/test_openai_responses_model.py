"""`OpenAIResponsesModel` over HTTP: construction, retries, errors and key hygiene, `get_model`,
and a whole `ToolService` loop whose reasoning survives from turn to turn."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from openai_support import API_KEY, call, sse_response
from pydantic import BaseModel
from responses_support import ResponsesServer, fixture_bytes, fixture_json

from agentforge_typed import (
    ChatMessage,
    ChatRequest,
    FinalResultEvent,
    ModelError,
    OpenAIResponsesModel,
    OutputSpec,
    SystemMessage,
    ToolService,
    UserMessage,
    get_model,
    tool,
)
from agentforge_typed.providers._responses_wire import parse_response

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
MODES = ["chat", "achat", "stream", "astream"]


def success(mode: str, name: str = "thinking") -> httpx.Response:
    if mode.endswith("stream"):
        return sse_response(fixture_bytes(f"{name}/stream.sse"), size=512)
    return httpx.Response(200, json=fixture_json(f"{name}/response.json"))


def test_missing_key_for_the_openai_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="to OpenAIResponsesModel or set the OPENAI_API_KEY"):
        OpenAIResponsesModel("gpt-5-mini")
    local = OpenAIResponsesModel("gpt-oss:20b", base_url="http://localhost:11434/v1/")
    assert local.base_url == "http://localhost:11434/v1"
    assert (
        repr(local) == "OpenAIResponsesModel('gpt-oss:20b', base_url='http://localhost:11434/v1')"
    )


def test_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"OpenAIResponsesModel\(\) got unexpected keyword"):
        OpenAIResponsesModel("gpt-5-mini", api_key="k", reasoning_effort="low")  # type: ignore[call-arg]


def test_get_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://llm.example.com/v1")
    server = ResponsesServer(success("chat"))
    with httpx.Client(transport=httpx.MockTransport(server.handler)) as client:
        model = get_model("openai-responses:gpt-5-mini", http_client=client, temperature=0.5)
        assert isinstance(model, OpenAIResponsesModel)
        assert model.model == "gpt-5-mini"
        model.chat(REQUEST)
    [request] = server.requests
    assert str(request.url) == "https://llm.example.com/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-env"
    assert server.bodies[0]["temperature"] == 0.5


@pytest.mark.parametrize("mode", MODES)
async def test_429_and_503_are_retried_honouring_retry_after(mode: str) -> None:
    limited = {
        "error": {
            "message": "Rate limit reached for gpt-5-mini. Please try again in 20s.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    server = ResponsesServer(
        httpx.Response(429, headers={"retry-after": "20"}, json=limited),
        httpx.Response(503, headers={"retry-after-ms": "1500"}, text="Service Unavailable"),
        success(mode),
    )
    response = await call(server.model(), REQUEST, mode)
    assert response == parse_response(fixture_json("thinking/response.json"))
    assert server.waits == [20.0, 1.5]
    assert server.bodies[0] == server.bodies[2]


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_model_is_a_400_not_retried(mode: str) -> None:
    body = {
        "error": {
            "message": "The requested model 'gpt-9' does not exist.",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    server = ResponsesServer(httpx.Response(400, json=body), success(mode))
    with pytest.raises(ModelError) as info:
        await call(server.model("gpt-9"), REQUEST, mode)
    assert str(info.value) == "OpenAI API error 400: The requested model 'gpt-9' does not exist."
    assert (info.value.status_code, info.value.code) == (400, "model_not_found")
    assert len(server.requests) == 1 and server.waits == []


@pytest.mark.parametrize("mode", MODES)
async def test_api_key_never_in_errors_or_logs(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = {
        "error": {
            "message": f"Incorrect API key provided: {API_KEY}.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    server = ResponsesServer(httpx.Response(500), httpx.Response(401, json=body))
    model = server.model()
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    for text in (str(info.value), repr(info.value), str(info.value.body), repr(model)):
        assert API_KEY not in text
    assert "[redacted]" in str(info.value)
    assert any("retry 1 of 2" in record.getMessage() for record in caplog.records)
    assert all(API_KEY not in record.getMessage() for record in caplog.records)


# -- a ToolService loop -------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: The city name.
    """
    return f"{city}: {18 if city == 'Paris' else 24} °C, sunny"


@pytest.mark.parametrize("mode", MODES)
async def test_tool_service_loop_carries_reasoning_to_the_next_turn(mode: str) -> None:
    server = ResponsesServer(success(mode, "parallel_tool_calls"), success(mode, "thinking"))
    model = server.model()
    service = ToolService([get_weather])
    messages: list[ChatMessage] = [
        SystemMessage(text="You report the weather."),
        UserMessage(content="Paris, Rome?"),
    ]
    if mode == "chat":
        result = await asyncio.to_thread(lambda: service.chat(model, messages))
    elif mode == "achat":
        result = await service.achat(model, messages)
    else:
        if mode == "stream":
            events = await asyncio.to_thread(lambda: list(service.stream(model, messages)))
        else:
            events = [event async for event in service.astream(model, messages)]
        final = events[-1]
        assert isinstance(final, FinalResultEvent)
        result = final.result
    assert result.final_response.ai_message.text == (
        "Paris: 18 °C, sunny. Rome — Città: 24 °C, sunny. 晴れ ☀️"
    )
    assert [(e.call.id, e.result.text) for e in result.tool_executions] == [
        ("call_Kc4QpZ1mS9wT2vN7xR3bY8eL", "Paris: 18 °C, sunny"),
        ("call_Hq8VnB2xM5tR9cW1zK6pJ3dF", "Rome — Città: 24 °C, sunny"),
    ]
    first, second = server.bodies
    assert first["tools"][0]["name"] == "get_weather" and first["tools"][0]["strict"] is False
    output = fixture_json("parallel_tool_calls/response.json")["output"]
    assert second["instructions"] == "You report the weather."
    assert second["input"] == [
        {"role": "user", "content": "Paris, Rome?"},
        *output,  # reasoning (final encrypted content), then both calls, as received
        {
            "type": "function_call_output",
            "call_id": "call_Kc4QpZ1mS9wT2vN7xR3bY8eL",
            "output": "Paris: 18 °C, sunny",
        },
        {
            "type": "function_call_output",
            "call_id": "call_Hq8VnB2xM5tR9cW1zK6pJ3dF",
            "output": "Rome — Città: 24 °C, sunny",
        },
    ]
    assert json.dumps(second).count("gAAAAABosaPzFINAL") == 1
    assert result.usage is not None and result.usage.total_tokens == 531 + 493


async def test_native_structured_output_through_text_format() -> None:
    class City(BaseModel):
        name: str
        population: int

    body = fixture_json("finish_length/response.json")
    body["status"], body["incomplete_details"] = "completed", None
    body["output"][0]["content"][0]["text"] = '{"name": "Paris", "population": 2102650}'
    server = ResponsesServer(httpx.Response(200, json=body))
    result = await ToolService().achat(
        server.model(),
        [UserMessage(content="Largest French city?")],
        output_type=OutputSpec(City, native=True),
    )
    assert result.output == City(name="Paris", population=2102650)
    text_format = server.bodies[0]["text"]["format"]
    assert (text_format["type"], text_format["strict"]) == ("json_schema", True)
    assert text_format["schema"]["required"] == ["name", "population"]
    assert "tools" not in server.bodies[0]
