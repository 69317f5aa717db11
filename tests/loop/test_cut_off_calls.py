"""A tool call cut off by the token limit is never executed, and arguments that are not JSON never
reach a server (llama.cpp parses every historical call and answers 500 to one that is not JSON)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FinishReason,
    FunctionModel,
    GeminiChatModel,
    ModelError,
    OpenAIChatModel,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)

ran: list[str] = []


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"sunny in {city}"


def cut_after(arguments: str, reason: FinishReason = FinishReason.LENGTH) -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        if isinstance(messages[-1], ToolResultMessage):
            return ChatResponse(ai_message=AiMessage(text="done"), finish_reason=FinishReason.STOP)
        call = ToolCall(id="c1", name="weather", arguments=arguments)
        return ChatResponse(ai_message=AiMessage(tool_calls=[call]), finish_reason=reason)

    return FunctionModel(reply)


@pytest.fixture(autouse=True)
def fresh() -> None:
    ran.clear()


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_call_cut_off_by_the_token_limit_is_not_executed(driver: str) -> None:
    with pytest.raises(ModelError, match="cut off by the token limit") as info:
        drive(driver, ToolService([weather]), cut_after('{"city":'), "weather?")
    assert info.value.code == "cut_off_tool_call" and ran == []
    # The run carries its history, every call answered: it can be resumed.
    *_, call, answer = info.value.messages
    assert isinstance(call, AiMessage) and call.tool_calls[0].arguments == '{"city":'
    assert isinstance(answer, ToolResultMessage) and answer.is_error
    assert "did not complete" in answer.text


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_whole_call_at_the_token_limit_runs(driver: str) -> None:
    result = drive(driver, ToolService([weather]), cut_after('{"city": "Oslo"}'), "weather?")
    assert result.text == "done" and ran == ["Oslo"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_malformed_arguments_without_the_limit_are_an_arguments_error(driver: str) -> None:
    model = cut_after('{"city":', FinishReason.TOOL_EXECUTION)
    result = drive(driver, ToolService([weather]), model, "weather?")
    assert result.text == "done" and ran == []
    assert result.tool_executions[0].result.error_kind == "arguments"


HISTORY: list[ChatMessage] = [
    UserMessage(content="weather?"),
    AiMessage(tool_calls=[ToolCall(id="c1", name="weather", arguments='{"city":')]),
    ToolResultMessage(tool_call_id="c1", tool_name="weather", text="bad arguments", is_error=True),
]


def test_the_server_never_gets_arguments_that_are_not_json() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": "ok"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [choice],
            },
        )

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", http_client=client)
    response = model.chat(ChatRequest(messages=HISTORY))
    [sent] = bodies[0]["messages"][1]["tool_calls"]
    assert json.loads(sent["function"]["arguments"]) == {"INVALID_JSON": '{"city":'}
    assert response.metadata["adaptations"] == [
        {
            "feature": "tool_call_arguments",
            "rule": 'arguments that are not JSON sent as {"INVALID_JSON": <the text>}',
        }
    ]
    # The history the program holds keeps what the model wrote.
    assert HISTORY[1].tool_calls[0].arguments == '{"city":'  # type: ignore[union-attr]


def test_gemini_takes_a_history_with_arguments_that_are_not_json() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        candidate = {
            "content": {"role": "model", "parts": [{"text": "ok"}]},
            "finishReason": "STOP",
        }
        return httpx.Response(200, json={"candidates": [candidate], "responseId": "r1"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = GeminiChatModel("gemini-2.5-flash", api_key="k", http_client=client)
    assert model.chat(ChatRequest(messages=HISTORY)).ai_message.text == "ok"
    call = bodies[0]["contents"][1]["parts"][0]["functionCall"]
    assert call == {"name": "weather", "args": {"INVALID_JSON": '{"city":'}}
