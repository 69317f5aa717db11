"""The streaming tool loop over real provider wire formats: event order for a two-round
conversation with parallel tool calls, and the same final result as the blocking loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_support import ChunkedStream, chunks

from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    ChatModel,
    FinalResultEvent,
    OutputSpec,
    ResponseComplete,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolLoopEvent,
    ToolResultEvent,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers.openai import OpenAIChatModel

FIXTURES = Path(__file__).parents[1] / "fixtures"


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Weather of a city."""
    return f"{city}: 20 {unit}"


@tool
def get_time(zone: str) -> str:
    """Time in a zone."""
    return f"{zone}: 09:00"


def openai_final(stream: bool) -> httpx.Response:
    base = {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1739000001,
        "model": "gpt-4.1-2025-04-14",
    }
    if not stream:
        body = {
            **base,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Paris 20°, Tokyo 9am."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 200, "completion_tokens": 9, "total_tokens": 209},
        }
        return httpx.Response(200, json=body)
    events = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "Paris 20°, "},
                    "finish_reason": None,
                }
            ],
        },
        {
            **base,
            "choices": [{"index": 0, "delta": {"content": "Tokyo 9am."}, "finish_reason": None}],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 200, "completion_tokens": 9, "total_tokens": 209},
        },
    ]
    data = (
        "".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events)
        + "data: [DONE]\n\n"
    )
    return sse(data.encode())


def anthropic_final(stream: bool) -> httpx.Response:
    message = {
        "id": "msg_02",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "杭州 and Zürich: mild."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 600, "output_tokens": 12},
    }
    if not stream:
        return httpx.Response(200, json=message)
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 600, "output_tokens": 1},
    }
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "杭州 and "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Zürich: mild."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 12},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    data = "".join(
        f"event: {name}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n" for name, body in events
    )
    return sse(data.encode())


def sse(data: bytes) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=ChunkedStream(chunks(data, 7))
    )


def first_round(provider: str, stream: bool) -> httpx.Response:
    name = "parallel_interleaved" if provider == "openai" else "parallel_tool_calls"
    path = FIXTURES / "golden" / provider / name / ("stream.sse" if stream else "response.json")
    if stream:
        return sse(path.read_bytes())
    return httpx.Response(200, json=json.loads(path.read_text(encoding="utf-8")))


def make_model(provider: str, stream: bool) -> tuple[ChatModel, list[dict[str, Any]]]:
    final = openai_final if provider == "openai" else anthropic_final
    responses = [first_round(provider, stream), final(stream)]
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return responses.pop(0)

    transport = httpx.MockTransport(handler)
    client = httpx.Client(transport=transport)
    async_client = httpx.AsyncClient(transport=transport)
    if provider == "openai":
        return OpenAIChatModel(
            "gpt-4.1", api_key="sk-test", http_client=client, async_http_client=async_client
        ), bodies
    return AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=client,
        async_http_client=async_client,
    ), bodies


def shape(events: Sequence[ToolLoopEvent]) -> list[str]:
    out: list[str] = []
    for event in events:
        name = {
            ToolCallEvent: lambda e: f"call:{e.call.name}",
            ToolResultEvent: lambda e: f"result:{e.execution.call.name}",
            ResponseComplete: lambda e: "complete",
            FinalResultEvent: lambda e: "final",
            TextDelta: lambda e: "text",
            ToolCallDelta: lambda e: "delta",
        }.get(type(event), lambda e: None)(event)
        if name and not (out and out[-1] == name and name in ("text", "delta")):
            out.append(name)
    return out


EXPECTED = {
    "openai": [
        "text",
        "delta",
        "complete",
        "call:get_weather",
        "result:get_weather",
        "call:get_time",
        "result:get_time",
        "text",
        "complete",
        "final",
    ],
    "anthropic": [
        "text",
        "delta",
        "complete",
        "call:get_weather",
        "result:get_weather",
        "call:get_weather",
        "result:get_weather",
        "text",
        "complete",
        "final",
    ],
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_stream_loop_over_provider_matches_chat(provider: str) -> None:
    service = ToolService([get_weather, get_time])
    prompt = [UserMessage(content="Weather and time?")]

    model, _ = make_model(provider, stream=True)
    events = await asyncio.to_thread(lambda: list(service.stream(model, prompt)))
    assert shape(events) == EXPECTED[provider]

    model, _ = make_model(provider, stream=True)
    async_events = [e async for e in service.astream(model, prompt)]
    # Under astream all calls of a round are announced before results arrive.
    assert sorted(shape(async_events)) == sorted(EXPECTED[provider])

    model, _ = make_model(provider, stream=False)
    blocking = await service.achat(model, prompt)
    for streamed in (events[-1], async_events[-1]):
        assert isinstance(streamed, FinalResultEvent)
        result = streamed.result
        assert canonical(result.messages) == canonical(blocking.messages)
        assert result.final_response == blocking.final_response
        assert result.usage == blocking.usage
        assert [(canonical(e.call), e.result) for e in result.tool_executions] == [
            (canonical(e.call), e.result) for e in blocking.tool_executions
        ]


def canonical(value: Any) -> Any:
    """Tool-call arguments as compact JSON: a streamed Anthropic call keeps the model's own text
    (its spacing), the blocking answer has only the input object."""
    if isinstance(value, tuple | list):
        return [canonical(item) for item in value]
    if isinstance(value, ToolCall):
        return value.model_copy(update={"arguments": json.dumps(json.loads(value.arguments))})
    if isinstance(value, AiMessage):
        return value.model_copy(update={"tool_calls": canonical(value.tool_calls)})
    return value


def test_native_output_request_json_for_openai() -> None:
    body = {
        "id": "chatcmpl-3",
        "object": "chat.completion",
        "created": 1739000002,
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"city": "Paris", "celsius": 20}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
    }
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=body)

    from pydantic import BaseModel

    class Reading(BaseModel):
        city: str
        celsius: int

    model = OpenAIChatModel(
        "gpt-4.1",
        api_key="sk-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    result = ToolService().chat(
        model, [UserMessage(content="Paris?")], output_type=OutputSpec(Reading, native=True)
    )
    assert result.output == Reading(city="Paris", celsius=20)
    assert sent == [
        {
            "model": "gpt-4.1",
            "messages": [{"role": "user", "content": "Paris?"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "final_result",
                    "schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
                        "required": ["city", "celsius"],
                        "additionalProperties": False,
                    },
                    "strict": True,
                },
            },
        }
    ]
