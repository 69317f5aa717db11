"""End to end: `ToolService` drives `OpenAIChatModel` through a two-round conversation over HTTP."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from openai_support import Server, sse_response

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    FinalResultEvent,
    FinishReason,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolChatResult,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.loop._cost import prices_available


@tool
def get_weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: City name.
    """
    return f"{city}: 22℃, sunny"


def first_round(stream: bool) -> httpx.Response:
    if not stream:
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-r1",
                "object": "chat.completion",
                "created": 1726200100,
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_abc123",
                                    "type": "function",
                                    "function": {
                                        "name": "get_weather",
                                        "arguments": '{"city":"杭州"}',
                                    },
                                }
                            ],
                            "refusal": None,
                        },
                        "logprobs": None,
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 62, "completion_tokens": 18, "total_tokens": 80},
            },
        )
    chunk = '{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1726200100,"model":"gpt-4o-mini-2024-07-18","choices":%s,"usage":%s}'
    head = '[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc123","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]'
    args1 = '[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":"}}]},"finish_reason":null}]'
    args2 = '[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"杭州\\"}"}}]},"finish_reason":null}]'
    end = '[{"index":0,"delta":{},"finish_reason":"tool_calls"}]'
    usage = '{"prompt_tokens":62,"completion_tokens":18,"total_tokens":80}'
    lines = [chunk % (c, "null") for c in (head, args1, args2, end)] + [chunk % ("[]", usage)]
    return sse_response(
        ("".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n").encode()
    )


def second_round(stream: bool) -> httpx.Response:
    text = "杭州今天 22℃，天气晴。"  # noqa: RUF001 - Chinese punctuation
    if not stream:
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-r2",
                "object": "chat.completion",
                "created": 1726200101,
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 101, "completion_tokens": 12, "total_tokens": 113},
            },
        )
    base = {"id": "chatcmpl-r2", "object": "chat.completion.chunk", "created": 1726200101}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text[:5]}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": text[5:]}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 101, "completion_tokens": 12, "total_tokens": 113},
        },
    ]
    body = (
        "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks)
        + "data: [DONE]\n\n"
    )
    return sse_response(body.encode(), size=9)


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
async def test_two_round_tool_conversation(mode: str) -> None:
    streaming = mode.endswith("stream")
    server = Server(first_round(streaming), second_round(streaming))
    model = server.model(temperature=0.2)
    service = ToolService([get_weather])
    messages: list[ChatMessage] = [
        SystemMessage(text="Answer briefly."),
        UserMessage(content="杭州今天天气怎么样"),
    ]
    result: ToolChatResult[Any]
    if mode == "chat":
        result = await asyncio.to_thread(lambda: service.chat(model, messages))
    elif mode == "achat":
        result = await service.achat(model, messages)
    else:
        events = (
            [e async for e in service.astream(model, messages)]
            if mode == "astream"
            else await asyncio.to_thread(lambda: list(service.stream(model, messages)))
        )
        final = events[-1]
        assert isinstance(final, FinalResultEvent)
        result = final.result

    assert result.text == "杭州今天 22℃，天气晴。"  # noqa: RUF001
    assert result.final_response.finish_reason is FinishReason.STOP
    # Priced by genai-prices (the dev extra, Python 3.11+): gpt-4o-mini at $0.15 / $0.60 per
    # million tokens.
    cost = Decimal("0.00004245") if prices_available() else None
    assert result.usage == TokenUsage(
        input_tokens=163, output_tokens=30, total_tokens=193, cost=cost
    )
    call = ToolCall(id="call_abc123", name="get_weather", arguments='{"city":"杭州"}')
    assert list(result.messages) == [
        *messages,
        AiMessage(tool_calls=[call]),
        ToolResultMessage(
            tool_call_id="call_abc123", tool_name="get_weather", text="杭州: 22℃, sunny"
        ),
        AiMessage(text="杭州今天 22℃，天气晴。"),  # noqa: RUF001
    ]

    first, second = server.bodies
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather of a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "City name."}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    assert first["temperature"] == 0.2
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"杭州"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc123", "content": "杭州: 22℃, sunny"},
    ]
