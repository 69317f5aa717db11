"""The same `ToolService` conversation over OpenAI Chat Completions-, OpenAI Responses-,
Anthropic- and Gemini-shaped transports gives the same tool executions and the same final text:
the providers only translate the wire format."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Literal

import httpx
import pytest

from agentforge_typed import (
    AnthropicChatModel,
    ChatMessage,
    ChatModel,
    GeminiChatModel,
    SystemMessage,
    ToolChatResult,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel

FINAL = "Paris: 18°C, Rome: 24°C — both sunny."
# What the model "decides" each round, provider-neutral: (call id, name, raw arguments).
ROUNDS: list[list[tuple[str, str, str]]] = [
    [("c1", "get_weather", '{"city": "Paris"}'), ("c2", "get_weather", '{"city": 5}')],
    [("c3", "get_weather", '{"city": "Rome", "unit": "celsius"}')],
    [],
]


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather of a city.

    Args:
        city: The city name.
        unit: Temperature unit.
    """
    return f"{city}: {18 if city == 'Paris' else 24}°{unit[0].upper()}, sunny"


def openai_body(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else FINAL}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-9x1",
        "object": "chat.completion",
        "created": 1718000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100},
    }


def anthropic_body(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    content = [
        {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in calls
    ] or [{"type": "text", "text": FINAL}]
    return {
        "id": "msg_01Neutral",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 80, "output_tokens": 20},
    }


def gemini_body(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    # Newer Gemini models send short call ids; they come back in `functionResponse.id`.
    parts: list[dict[str, Any]] = [
        {"functionCall": {"id": i, "name": n, "args": json.loads(a)}} for i, n, a in calls
    ] or [{"text": FINAL}]
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 80,
            "candidatesTokenCount": 20,
            "totalTokenCount": 100,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "gEm1n1Neutral",
    }


def responses_body(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "id": f"fc_{i}",
            "type": "function_call",
            "status": "completed",
            "arguments": a,
            "call_id": i,
            "name": n,
        }
        for i, n, a in calls
    ] or [
        {
            "id": "msg_neutral",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": FINAL}],
        }
    ]
    return {
        "id": "resp_neutral",
        "object": "response",
        "created_at": 1718000000,
        "status": "completed",
        "error": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "usage": {"input_tokens": 80, "output_tokens": 20, "total_tokens": 100},
    }


def tool_results_sent(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The (call id, text) of every tool result in a request body."""
    if provider == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    if provider == "gemini":
        return [
            (part["functionResponse"]["id"], *part["functionResponse"]["response"].values())
            for content in body["contents"]
            for part in content["parts"]
            if "functionResponse" in part
        ]
    if provider == "responses":
        return [
            (item["call_id"], item["output"])
            for item in body["input"]
            if item.get("type") == "function_call_output"
        ]
    return [
        (block["tool_use_id"], block["content"])
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "tool_result"
    ]


def scripted(provider: str) -> tuple[ChatModel, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    to_body: Callable[[list[tuple[str, str, str]]], dict[str, Any]] = {
        "openai": openai_body,
        "responses": responses_body,
        "anthropic": anthropic_body,
        "gemini": gemini_body,
    }[provider]

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=to_body(ROUNDS[len(sent) - 1]))

    clients: dict[str, Any] = {
        "http_client": httpx.Client(transport=httpx.MockTransport(handler)),
        "async_http_client": httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    }
    if provider == "openai":
        return OpenAIChatModel("gpt-4o-mini", api_key="sk-test", **clients), sent
    if provider == "gemini":
        return GeminiChatModel("gemini-2.5-flash", api_key="AIza-test", **clients), sent
    if provider == "responses":
        return OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", **clients), sent
    return AnthropicChatModel("claude-sonnet-4-5", api_key="sk-ant-test", **clients), sent


def summary(result: ToolChatResult[None]) -> list[tuple[str, str, Any, str, bool]]:
    return [
        (e.call.id, e.call.name, json.loads(e.call.arguments), e.result.text, e.result.is_error)
        for e in result.tool_executions
    ]


MESSAGES: list[ChatMessage] = [
    SystemMessage(text="You report the weather."),
    UserMessage(content="Paris and Rome?"),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_same_conversation_same_outcome(mode: str) -> None:
    service = ToolService([get_weather])
    outcomes = {}
    for provider in ("openai", "responses", "anthropic", "gemini"):
        model, sent = scripted(provider)
        if mode == "sync":

            def blocking(model: ChatModel = model) -> ToolChatResult[None]:
                return service.chat(model, MESSAGES)

            result = await asyncio.to_thread(blocking)
        else:
            result = await service.achat(model, MESSAGES)
        assert result.final_response.ai_message.text == FINAL
        assert len(sent) == 3
        if provider == "anthropic":
            # The arguments error travels as an error result on Anthropic's wire.
            blocks = sent[1]["messages"][-1]["content"]
            assert [b.get("is_error", False) for b in blocks] == [False, True]
        if provider == "gemini":
            # ... and on Gemini's as an `error` response, both results in one user turn.
            parts = sent[1]["contents"][-1]["parts"]
            assert [list(p["functionResponse"]["response"]) for p in parts] == [
                ["output"],
                ["error"],
            ]
        # The results the model got back, as each wire format carries them.
        results_sent = tool_results_sent(provider, sent[-1])
        outcomes[provider] = (summary(result), results_sent, len(result.messages))

    assert outcomes["openai"] == outcomes["responses"] == outcomes["anthropic"]
    assert outcomes["anthropic"] == outcomes["gemini"]
    executions, results_sent, _ = outcomes["anthropic"]
    assert [(e[0], e[4]) for e in executions] == [("c1", False), ("c2", True), ("c3", False)]
    assert executions[0][3] == "Paris: 18°C, sunny"
    assert executions[2][3] == "Rome: 24°C, sunny"
    assert [r[0] for r in results_sent] == ["c1", "c2", "c3"]
    assert results_sent[1][1].startswith("Invalid arguments for tool `get_weather`")
