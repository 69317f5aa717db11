"""Adversarial provider wire cases, through httpx.MockTransport with vendor-shaped bodies."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai_support import API_KEY, ChunkedStream, Server, call, collect, sse_response
from retry_waits import waiting

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    FinishReason,
    ModelError,
    ResponseComplete,
    TextDelta,
    ToolCall,
    UserMessage,
)
from agentforge_typed.providers.anthropic import AnthropicChatModel

REQUEST = ChatRequest(messages=[UserMessage(content="weather in Paris?")])
MODES = ["chat", "achat", "stream", "astream"]
CHUNK_HEAD = {
    "id": "chatcmpl-E1",
    "object": "chat.completion.chunk",
    "created": 1726200300,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_560af6e559",
}


def completion(message: dict[str, Any], finish_reason: str = "stop", **extra: Any) -> Any:
    return {
        "id": "chatcmpl-E1",
        "object": "chat.completion",
        "created": 1726200300,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        **extra,
    }


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {**CHUNK_HEAD, "choices": [choice]}


def sse(*payloads: Any, sep: str = "data: ", eol: str = "\n") -> bytes:
    lines = [f"{sep}{p if isinstance(p, str) else json.dumps(p)}{eol}{eol}" for p in payloads]
    return "".join(lines).encode()


# -- OpenAI blocking bodies ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_openai_empty_choices_is_a_model_error(mode: str) -> None:
    body = {**completion({}), "choices": []}
    server = Server(httpx.Response(200, json=body))
    with pytest.raises(ModelError, match="no choices") as info:
        await call(server.model(), REQUEST, mode)
    assert info.value.body == body


async def test_openai_empty_content_with_tool_calls_and_empty_arguments() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "now", "arguments": ""}}
        ],
        "refusal": None,
    }
    server = Server(httpx.Response(200, json=completion(message, "tool_calls")))
    response = await call(server.model(), REQUEST, "chat")
    assert response.ai_message == AiMessage(
        tool_calls=[ToolCall(id="call_1", name="now", arguments="")]
    )
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_http_200_with_a_non_json_body(mode: str) -> None:
    server = Server(httpx.Response(200, text="<html>gateway says hi</html>"))
    with pytest.raises(ModelError, match="malformed JSON") as info:
        await call(server.model(), REQUEST, mode)
    assert info.value.body == "<html>gateway says hi</html>"
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_500_with_an_html_body_is_retried_then_reported(mode: str) -> None:
    html = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    server = Server(*[httpx.Response(500, text=html) for _ in range(3)])
    with pytest.raises(ModelError) as info:
        await call(server.model(), REQUEST, mode)
    assert info.value.status_code == 500
    assert info.value.body == html and html in str(info.value)
    assert len(server.requests) == 3 and len(server.waits) == 2


async def test_retry_after_beyond_the_cap_is_capped() -> None:
    server = Server(
        httpx.Response(429, headers={"retry-after": "3600"}, json={"error": {"message": "slow"}}),
        httpx.Response(200, json=completion({"role": "assistant", "content": "hi"})),
    )
    response = await call(server.model(), REQUEST, "chat")
    assert response.ai_message.text == "hi"
    assert server.waits == [60.0]


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_stream_failing_after_bytes_were_yielded_is_not_retried(mode: str) -> None:
    first = sse(chunk({"role": "assistant", "content": "Hel"}))
    broken = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=ChunkedStream([first], error=httpx.ReadError("connection reset")),
    )
    server = Server(broken, httpx.Response(200, json=completion({"content": "never"})))
    model = server.model()
    seen: list[Any] = []
    with pytest.raises(ModelError, match="stream was interrupted"):
        if mode == "stream":
            for event in model.stream(REQUEST):
                seen.append(event)
        else:
            async for event in model.astream(REQUEST):
                seen.append(event)
    assert seen == [TextDelta(text="Hel")]
    assert len(server.requests) == 1 and server.waits == []


# -- OpenAI streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_emoji_split_across_chunks_and_data_without_space(mode: str) -> None:
    data = sse(
        chunk({"role": "assistant", "content": "Sunny 🌤️ 晴"}),
        chunk({}, "stop"),
        "[DONE]",
        sep="data:",
    )
    server = Server(sse_response(data, size=1))
    events = await collect(server.model(), REQUEST, is_async=mode == "astream")
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.ai_message.text == "Sunny 🌤️ 晴"


async def test_lone_surrogate_escape_in_a_chunk_is_a_model_error() -> None:
    # Pinned: pydantic-core refuses a lone UTF-16 surrogate escape, so the chunk is malformed.
    data = sse(
        '{"id":"x","choices":[{"index":0,"delta":{"content":"a\\ud83d"}}]}', chunk({}, "stop")
    )
    server = Server(sse_response(data))
    with pytest.raises(ModelError, match="malformed stream chunk"):
        await collect(server.model(), REQUEST, is_async=False)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_done_twice_and_events_after_done_are_ignored(mode: str) -> None:
    data = sse(
        chunk({"role": "assistant", "content": "ok"}),
        chunk({}, "stop"),
        "[DONE]",
        chunk({"content": " late"}),
        "[DONE]",
    )
    server = Server(sse_response(data))
    events = await collect(server.model(), REQUEST, is_async=mode == "astream")
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="ok")]
    assert isinstance(events[-1], ResponseComplete)
    assert events[-1].response.ai_message.text == "ok"


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_crlf_line_endings(mode: str) -> None:
    data = sse(
        chunk({"role": "assistant", "content": "a\r\nb"}), chunk({}, "stop"), "[DONE]", eol="\r\n"
    )
    server = Server(sse_response(data, size=3))
    events = await collect(server.model(), REQUEST, is_async=mode == "astream")
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.ai_message.text == "a\r\nb"


# -- Anthropic -------------------------------------------------------------------------------------


def anthropic(handler: Any) -> AnthropicChatModel:
    transport = httpx.MockTransport(handler)
    waits: list[float] = []
    model = AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key=API_KEY,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    return waiting(model, waits.append)


def anthropic_sse(*events: dict[str, Any], eol: str = "\n") -> bytes:
    return "".join(
        f"event: {e['type']}{eol}data: {json.dumps(e)}{eol}{eol}" for e in events
    ).encode()


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_01Edge",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 1},
    },
}


def tool_use_stream(eol: str) -> bytes:
    return anthropic_sse(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "now", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "mystery_block", "payload": 1},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}},
        {"type": "message_stop"},
        eol=eol,
    )


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
@pytest.mark.parametrize("is_async", [False, True])
async def test_anthropic_tool_use_without_deltas_unknown_block_no_usage(
    eol: str, is_async: bool
) -> None:
    data = tool_use_stream(eol)
    model = anthropic(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=ChunkedStream([data])
        )
    )
    request = ChatRequest(messages=[UserMessage(content="time?")])
    if is_async:
        events = [e async for e in model.astream(request)]
    else:
        events = list(model.stream(request))
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    response = final.response
    assert response.ai_message.tool_calls == (ToolCall(id="toolu_01A", name="now", arguments="{}"),)
    assert response.finish_reason is FinishReason.TOOL_EXECUTION
    # message_delta carried no usage: message_start's counts stand.
    assert response.token_usage is not None and response.token_usage.output_tokens == 1
    # The unknown block is kept verbatim for the next request, not dropped.
    kept = response.ai_message.attributes
    assert any(block.get("type") == "mystery_block" for block in next(iter(kept.values())))


def test_anthropic_http_200_non_json_body() -> None:
    model = anthropic(lambda request: httpx.Response(200, text="upstream connect error"))
    with pytest.raises(ModelError, match="malformed JSON"):
        model.chat(ChatRequest(messages=[UserMessage(content="hi")]))


def test_the_former_wait_options_still_work_and_warn() -> None:
    waits: list[float] = []
    replies = iter([httpx.Response(503, text="busy")])

    def flaky(request: httpx.Request) -> httpx.Response:
        return next(replies, None) or httpx.Response(
            200, json={"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}
        )

    former: Any = {"sleep": waits.append}  # no longer an option mypy takes
    with pytest.warns(DeprecationWarning, match=r"AnthropicChatModel\(sleep=...\) is deprecated"):
        model = AnthropicChatModel(
            "claude-sonnet-4-5",
            api_key=API_KEY,
            http_client=httpx.Client(transport=httpx.MockTransport(flaky)),
            **former,
        )
    assert model.chat(ChatRequest(messages=[UserMessage(text="hi")])).ai_message.text == "ok"
    assert len(waits) == 1
