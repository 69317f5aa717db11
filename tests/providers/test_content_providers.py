"""A tool that returns an image, replayed over each provider's wire, blocking and streaming: where
the image goes in the next request (exactly as each vendor documents it), the history, and the
tool-result event. Round one replays the recorded-style fixtures (two calls of `get_weather`);
round two a text answer.

Pages used: Anthropic https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
(image blocks in a `tool_result`'s content); OpenAI Responses
https://platform.openai.com/docs/api-reference/responses/create (`function_call_output.output` as
a list of `input_text` / `input_image` / `input_file`); Chat Completions
https://platform.openai.com/docs/api-reference/chat/create (tool messages carry text; a user
message carries `image_url` parts); Gemini
https://ai.google.dev/gemini-api/docs/function-calling#multimodal-function-responses
(`functionResponse.parts` with `inlineData`).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_support import ChunkedStream, chunks
from test_stream_loop_providers import anthropic_final

from agentforge_typed import (
    AnthropicChatModel,
    ChatModel,
    FinalResultEvent,
    ImageContent,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden"
PNG = b"\x89PNG\r\n\x1a\nfake-image-bytes"
PNG64 = base64.b64encode(PNG).decode()


@tool
def get_weather(city: str, unit: str = "celsius") -> list[str | ImageContent]:
    """A weather map of a city."""
    return [f"Map of {city} ({unit}):", ImageContent(data=PNG, media_type="image/png")]


@tool
def get_time(zone: str) -> str:
    """Time in a zone."""
    return f"{zone}: 09:00"


ROUNDS = {
    "openai": ("openai/parallel_interleaved", "openai/thinking"),
    "responses": ("openai_responses/parallel_tool_calls", "openai_responses/thinking"),
    "anthropic": ("anthropic/parallel_tool_calls", None),
    "gemini": ("gemini/parallel_tool_calls", "gemini/text"),
}


def recorded(name: str, stream: bool) -> httpx.Response:
    path = FIXTURES / name / ("stream.sse" if stream else "response.json")
    if stream:
        pieces = chunks(path.read_bytes(), 7)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=ChunkedStream(pieces))
    return httpx.Response(200, json=json.loads(path.read_text(encoding="utf-8")))


def make_model(provider: str, stream: bool) -> tuple[ChatModel, list[dict[str, Any]]]:
    first, final = ROUNDS[provider]
    responses = [
        recorded(first, stream),
        anthropic_final(stream) if final is None else recorded(final, stream),
    ]
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return responses.pop(0)

    transport = httpx.MockTransport(handler)
    clients: dict[str, Any] = {
        "http_client": httpx.Client(transport=transport),
        "async_http_client": httpx.AsyncClient(transport=transport),
    }
    if provider == "openai":
        return OpenAIChatModel("gpt-4.1", api_key="sk-test", **clients), bodies
    if provider == "responses":
        return OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", **clients), bodies
    if provider == "anthropic":
        return AnthropicChatModel("claude-sonnet-4-5", api_key="sk-ant-test", **clients), bodies
    return GeminiChatModel("gemini-2.5-flash", api_key="gm-test", **clients), bodies


def sent_results(provider: str, body: dict[str, Any]) -> Any:
    """What the second request carries for the tool results (and what follows them)."""
    if provider == "openai":
        return body["messages"][-3:]
    if provider == "responses":
        return [item for item in body["input"] if item.get("type") == "function_call_output"]
    if provider == "anthropic":
        return body["messages"][-1]["content"]
    return body["contents"][-1]["parts"]


def expected(provider: str) -> Any:
    image_url = f"data:image/png;base64,{PNG64}"
    if provider == "openai":
        # Tool messages take text only: the image follows in a user message naming the call.
        return [
            {
                "role": "tool",
                "tool_call_id": "call_Paris01",
                "content": "Map of Paris (c):\n[image: image/png, 24 bytes] (in the next user message)",
            },
            {"role": "tool", "tool_call_id": "call_Tokyo2", "content": "Asia/Tokyo: 09:00"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "Content returned by the tool call call_Paris01 (get_weather):",
                    },
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            },
        ]
    if provider == "responses":
        return [
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": [
                    {"type": "input_text", "text": f"Map of {city} (celsius):"},
                    {"type": "input_image", "image_url": image_url, "detail": "auto"},
                ],
            }
            for call_id, city in [
                ("call_Kc4QpZ1mS9wT2vN7xR3bY8eL", "Paris"),
                ("call_Hq8VnB2xM5tR9cW1zK6pJ3dF", "Rome — Città"),
            ]
        ]
    if provider == "anthropic":
        return [
            {
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": [
                    {"type": "text", "text": f"Map of {city} (celsius):"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                    },
                ],
            }
            for tool_use_id, city in [
                ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "杭州"),
                ("toolu_01CQxLhGzVaRfKuCH2Pk2xrB", "Zürich"),
            ]
        ]
    return [
        {
            "functionResponse": {
                "name": "get_weather",
                "response": {"output": f"Map of {city} (celsius):\n[image: image/png, 24 bytes]"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG64}}],
            }
        }
        for city in ["Paris", "Zürich"]
    ]


PROVIDERS = list(ROUNDS)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_returning_an_image_blocking_and_streaming(provider: str) -> None:
    service = ToolService([get_weather, get_time])
    question = [UserMessage(content="What does the weather look like?")]

    model, bodies = make_model(provider, stream=False)
    blocking = await service.achat(model, question)

    model, streamed_bodies = make_model(provider, stream=True)
    events = [event async for event in service.astream(model, question)]

    assert sent_results(provider, bodies[1]) == expected(provider)
    assert sent_results(provider, streamed_bodies[1]) == expected(provider)
    # The history keeps the image, in the result it belongs to, blocking or streaming.
    results = [m for m in blocking.messages if isinstance(m, ToolResultMessage)]
    image = ImageContent(data=PNG, media_type="image/png")
    assert [m.content[-1] for m in results if m.tool_name == "get_weather"] == [image] * len(
        [m for m in results if m.tool_name == "get_weather"]
    )
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    assert [m for m in final.result.messages if isinstance(m, ToolResultMessage)] == results
    shown = [e.execution.result.content for e in events if isinstance(e, ToolResultEvent)]
    assert [parts[-1] for parts in shown if parts] == [image] * len(
        [m for m in results if m.tool_name == "get_weather"]
    )
