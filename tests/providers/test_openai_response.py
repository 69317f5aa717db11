"""OpenAI response mapping beyond the golden cases (`tests/fixtures/golden/openai/`): finish reasons,
usage gaps, compatible servers' quirks and error bodies, through `chat` and `achat`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai_support import Server, call

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ModelError,
    TokenUsage,
    ToolCall,
    UserMessage,
)
from agentforge_typed.providers._openai_wire import parse_response

THINKING = "用户问的是杭州天气\uff0c需要调用 get_weather。"
REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


def completion(
    message: dict[str, Any],
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion",
        "created": 1726200000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage
        or {
            "prompt_tokens": 28,
            "completion_tokens": 38,
            "total_tokens": 66,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_f85bea6784",
    }
    body.update(extra)
    return body


async def parsed(body: dict[str, Any], mode: str) -> ChatResponse:
    server = Server(httpx.Response(200, json=body))
    return await call(server.model(), REQUEST, mode)


@pytest.fixture(params=["chat", "achat"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_reasoning_and_tool_call(mode: str) -> None:
    body = completion(
        {
            "content": "",
            "reasoning_content": THINKING,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_00_fJ9nFb3",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "杭州"}'},
                }
            ],
        },
        "tool_calls",
        model="deepseek-reasoner",
    )
    response = await parsed(body, mode)
    assert response.ai_message == AiMessage(
        thinking=THINKING,
        tool_calls=[
            ToolCall(id="call_00_fJ9nFb3", name="get_weather", arguments='{"city": "杭州"}')
        ],
    )
    assert response.metadata["model"] == "deepseek-reasoner"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        # stop, length, content_filter and tool_calls: the golden cases
        ("function_call", FinishReason.TOOL_EXECUTION),
        ("eos_token", FinishReason.OTHER),
        (None, FinishReason.STOP),
    ],
)
async def test_finish_reasons(raw: str | None, reason: FinishReason, mode: str) -> None:
    response = await parsed(completion({"content": "partial"}, raw), mode)
    assert response.finish_reason is reason
    if reason is FinishReason.OTHER:
        assert response.metadata["finish_reason"] == raw
    else:
        assert "finish_reason" not in response.metadata


async def test_content_filter_with_no_content(mode: str) -> None:
    response = await parsed(completion({"content": None}, "content_filter"), mode)
    assert response.ai_message == AiMessage()
    assert response.finish_reason is FinishReason.CONTENT_FILTER


async def test_usage_without_a_total_or_without_usage(mode: str) -> None:
    no_total = {"prompt_tokens": 3, "completion_tokens": 4}
    response = await parsed(completion({"content": "x"}, usage=no_total), mode)
    assert response.token_usage == TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7)
    body = completion({"content": "x"})
    del body["usage"]
    assert (await parsed(body, mode)).token_usage is None


async def test_compatible_server_quirks(mode: str) -> None:
    body = completion(
        {
            "content": [{"type": "text", "text": "Calling "}, {"type": "text", "text": "tools."}],
            "tool_calls": [
                {"type": "function", "function": {"name": "a", "arguments": {"x": [1, 2]}}},
                {"id": "", "type": "function", "function": {"name": "b"}},
            ],
        },
        "stop",
        id="chatcmpl-q1",
    )
    response = await parsed(body, mode)
    assert response.ai_message == AiMessage(
        text="Calling tools.",
        tool_calls=[
            ToolCall(id="call_chatcmpl-q1_0", name="a", arguments='{"x":[1,2]}'),
            ToolCall(id="call_chatcmpl-q1_1", name="b", arguments=""),
        ],
    )
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


async def test_error_object_with_200_status(mode: str) -> None:
    body = {"error": {"message": "upstream model crashed", "type": "server_error", "code": 500}}
    with pytest.raises(ModelError) as info:
        await parsed(body, mode)
    assert info.value.message == "OpenAI returned an error: upstream model crashed"
    # A numeric code repeats the status: the error's class is the code that says more.
    assert info.value.code == "server_error"


async def test_a_numeric_code_without_a_type_is_the_code(mode: str) -> None:
    body = {"error": {"message": "upstream model crashed", "code": 500}}
    with pytest.raises(ModelError) as info:
        await parsed(body, mode)
    assert info.value.code == "500"


async def test_llama_cpp_error_class_is_the_code(mode: str) -> None:
    # llama.cpp's body for a prompt over the context window.
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }
    }
    with pytest.raises(ModelError) as info:
        await parsed(body, mode)
    assert info.value.code == "exceed_context_size_error"


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"id": "x", "choices": []},
        {"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]},
        {"id": "x", "choices": [{"message": {"content": 5, "tool_calls": "nope"}}]},
    ],
)
def test_malformed_bodies(body: Any) -> None:
    with pytest.raises(ModelError):
        parse_response(body)
