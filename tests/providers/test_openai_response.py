"""OpenAI response mapping: realistic `chat.completion` bodies through `chat` and `achat`."""

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


METADATA = {
    "id": "chatcmpl-AbC123",
    "model": "gpt-4o-mini-2024-07-18",
    "created": 1726200000,
    "system_fingerprint": "fp_f85bea6784",
}
USAGE = TokenUsage(input_tokens=28, output_tokens=38, total_tokens=66)


async def parsed(body: dict[str, Any], mode: str) -> ChatResponse:
    server = Server(httpx.Response(200, json=body))
    return await call(server.model(), REQUEST, mode)


@pytest.fixture(params=["chat", "achat"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_plain_text(mode: str) -> None:
    body = completion({"content": "CompletableFuture 是 Java 8 引入的异步编程工具。"})
    assert await parsed(body, mode) == ChatResponse(
        ai_message=AiMessage(text="CompletableFuture 是 Java 8 引入的异步编程工具。"),
        token_usage=USAGE,
        finish_reason=FinishReason.STOP,
        # The usage details that say more than the counts, as the Responses API's are kept.
        metadata={**METADATA, "cached_tokens": 0, "reasoning_tokens": 0},
    )


async def test_single_tool_call(mode: str) -> None:
    body = completion(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"杭州"}'},
                }
            ],
        },
        "tool_calls",
    )
    response = await parsed(body, mode)
    assert response.ai_message == AiMessage(
        tool_calls=[ToolCall(id="call_abc123", name="get_weather", arguments='{"city":"杭州"}')]
    )
    assert response.ai_message.text is None
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


async def test_parallel_tool_calls_keep_order_and_raw_arguments(mode: str) -> None:
    body = completion(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{ "city" : "Paris" }'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"zone":"Asia/Tokyo"}'},
                },
            ],
        },
        "tool_calls",
    )
    assert (await parsed(body, mode)).ai_message.tool_calls == (
        ToolCall(id="call_1", name="get_weather", arguments='{ "city" : "Paris" }'),
        ToolCall(id="call_2", name="get_time", arguments='{"zone":"Asia/Tokyo"}'),
    )


async def test_text_and_tool_call(mode: str) -> None:
    body = completion(
        {
            "content": "Let me look that up.",
            "tool_calls": [
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":"pydantic"}'},
                }
            ],
        },
        "tool_calls",
    )
    message = (await parsed(body, mode)).ai_message
    assert message.text == "Let me look that up."
    assert message.tool_calls == (
        ToolCall(id="call_x", name="search", arguments='{"q":"pydantic"}'),
    )


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


async def test_reasoning_field_of_openrouter_and_vllm(mode: str) -> None:
    body = completion({"content": "4", "reasoning": "2 + 2 = 4"})
    assert (await parsed(body, mode)).ai_message == AiMessage(text="4", thinking="2 + 2 = 4")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("function_call", FinishReason.TOOL_EXECUTION),
        ("tool_calls", FinishReason.TOOL_EXECUTION),
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


async def test_stop_with_tool_calls_means_tool_execution(mode: str) -> None:
    body = completion(
        {
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        "stop",
    )
    assert (await parsed(body, mode)).finish_reason is FinishReason.TOOL_EXECUTION


async def test_usage_mapping(mode: str) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 192},
    }
    response = await parsed(completion({"content": "x"}, usage=usage), mode)
    assert response.token_usage == TokenUsage(
        input_tokens=1200, output_tokens=300, total_tokens=1500
    )
    no_total = {"prompt_tokens": 3, "completion_tokens": 4}
    response = await parsed(completion({"content": "x"}, usage=no_total), mode)
    assert response.token_usage == TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7)
    body = completion({"content": "x"})
    del body["usage"]
    assert (await parsed(body, mode)).token_usage is None


async def test_refusal_goes_to_metadata(mode: str) -> None:
    body = completion({"content": None, "refusal": "I can't help with that."})
    response = await parsed(body, mode)
    assert response.ai_message.text is None
    assert response.metadata["refusal"] == "I can't help with that."


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
