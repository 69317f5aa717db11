"""`AnthropicChatModel` over httpx.MockTransport: headers, sync/async, streaming, errors, retries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_support import Recorder, mock_options, recording

from agentforge_typed import (
    AnthropicChatModel,
    ChatRequest,
    ChatRequestParameters,
    ModelError,
    ResponseComplete,
    UserMessage,
)
from agentforge_typed.providers._anthropic_wire import parse_response

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "anthropic"
KEY = "sk-ant-api03-SECRET-do-not-leak"
TEXT_BODY = {
    "id": "msg_01AbCdEfGh",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 42},
}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
REQUEST = ChatRequest(messages=[UserMessage(content="Hi")])
SSE = {"content-type": "text/event-stream"}

Handler = Callable[[httpx.Request], httpx.Response]


class Chunks(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body delivered in the given chunks, sync or async."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def sse_response(chunks: list[bytes]) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=Chunks(chunks))


def make(handler: Handler, sleeps: list[float] | None = None, **kwargs: Any) -> AnthropicChatModel:
    kwargs.setdefault("api_key", KEY)
    return recording(
        AnthropicChatModel("claude-sonnet-4-5", **mock_options(handler), **kwargs), sleeps
    )


async def test_achat_with_defaults_and_request_override() -> None:
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY), httpx.Response(200, json=TEXT_BODY))
    model = make(recorder, max_tokens=256, temperature=0.3, anthropic_version="2024-01-01")
    assert await model.achat(REQUEST) == parse_response(TEXT_BODY)
    assert recorder.json() == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "temperature": 0.3,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    assert recorder.requests[0].headers["anthropic-version"] == "2024-01-01"
    overridden = ChatRequest(
        messages=[UserMessage(content="Hi")],
        parameters=ChatRequestParameters(model="claude-opus-4-1", max_tokens=4096),
    )
    await model.achat(overridden)
    assert recorder.json()["model"] == "claude-opus-4-1"
    assert recorder.json()["max_tokens"] == 4096
    assert recorder.json()["temperature"] == 0.3


def test_environment_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.test/anthropic/")
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    make(recorder, api_key=None).chat(REQUEST)
    assert str(recorder.requests[0].url) == "https://proxy.test/anthropic/v1/messages"
    assert recorder.requests[0].headers["x-api-key"] == "sk-from-env"


def test_missing_key_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY") as info:
        AnthropicChatModel("claude-sonnet-4-5")
    assert "api_key=" in str(info.value)


def test_gateway_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    make(recorder, api_key=None, base_url="https://gateway.test/anthropic").chat(REQUEST)
    assert str(recorder.requests[0].url) == "https://gateway.test/anthropic/v1/messages"
    assert "x-api-key" not in recorder.requests[0].headers


def test_unknown_default_parameter_is_rejected() -> None:
    with pytest.raises(TypeError, match="temprature"):
        AnthropicChatModel(
            "claude-sonnet-4-5",
            api_key=KEY,
            temprature=0.1,  # type: ignore[call-arg]
        )


def test_key_never_leaks() -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
    }
    recorder = Recorder(httpx.Response(401, json=body))
    model = make(recorder)
    assert KEY not in repr(model)
    with pytest.raises(ModelError) as info:
        model.chat(REQUEST)
    error = info.value
    assert (error.status_code, error.code) == (401, "authentication_error")
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in json.dumps(error.body)
    assert len(recorder.requests) == 1  # 401 is not retried


def test_529_overloaded_is_retried_honouring_retry_after() -> None:
    sleeps: list[float] = []
    recorder = Recorder(
        httpx.Response(529, json=OVERLOADED),
        httpx.Response(429, json=OVERLOADED, headers={"retry-after": "7"}),
        httpx.Response(200, json=TEXT_BODY),
    )
    assert make(recorder, sleeps).chat(REQUEST).ai_message.text == "Hello!"
    assert len(recorder.requests) == 3
    assert len(sleeps) == 2 and 0 < sleeps[0] <= 0.5 and sleeps[1] == 7


async def test_retries_exhausted_async() -> None:
    sleeps: list[float] = []
    recorder = Recorder(*[httpx.Response(529, json=OVERLOADED) for _ in range(4)])
    with pytest.raises(ModelError, match="Overloaded") as info:
        await make(recorder, sleeps, max_retries=3).achat(REQUEST)
    assert (info.value.status_code, info.value.code) == (529, "overloaded_error")
    assert len(recorder.requests) == 4 and len(sleeps) == 3


def test_network_error_is_retried_then_reported() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ModelError, match="ConnectError"):
        make(handler, max_retries=1).chat(REQUEST)


def test_malformed_json_body() -> None:
    recorder = Recorder(httpx.Response(200, content=b"<html>gateway</html>"))
    with pytest.raises(ModelError, match="malformed JSON"):
        make(recorder).chat(REQUEST)


def split_mid_utf8(stream: bytes) -> list[bytes]:
    cut = stream.index("杭".encode()) + 1
    return [stream[:cut], stream[cut : cut + 7], stream[cut + 7 :]]


async def test_astream_over_http_after_a_529() -> None:
    stream = (FIXTURES / "parallel_tool_calls/stream.sse").read_bytes()
    sleeps: list[float] = []
    recorder = Recorder(httpx.Response(529, json=OVERLOADED), sse_response(split_mid_utf8(stream)))
    events = [event async for event in make(recorder, sleeps).astream(REQUEST)]
    assert len(sleeps) == 1 and len(recorder.requests) == 2
    assert events == list(make(Recorder(sse_response([stream]))).stream(REQUEST))
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert (
        final.response.ai_message.tool_calls[0].arguments == '{"city": "杭州", "unit": "celsius"}'
    )


async def test_truncated_stream_over_http_async() -> None:
    stream = (FIXTURES / "parallel_tool_calls/stream.sse").read_bytes()
    head = stream[: stream.index(b"event: message_stop")]
    with pytest.raises(ModelError, match="ended before message_stop"):
        async for _ in make(Recorder(sse_response([head]))).astream(REQUEST):
            pass


def test_malformed_sse_data() -> None:
    body = b'event: message_start\ndata: {"type": "message_start", "message": \n\n'
    with pytest.raises(ModelError, match="malformed SSE data"):
        list(make(Recorder(sse_response([body]))).stream(REQUEST))


def test_stream_http_error_before_start() -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }
    with pytest.raises(ModelError, match="max_tokens: Field required") as info:
        list(make(Recorder(httpx.Response(400, json=body))).stream(REQUEST))
    assert (info.value.status_code, info.value.code) == (400, "invalid_request_error")


async def test_created_clients_are_closed_injected_ones_stay_open() -> None:
    async with AnthropicChatModel("claude-sonnet-4-5", api_key=KEY) as model:
        client, async_client = model._http.client, model._http.async_client
    assert client.is_closed and async_client.is_closed
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    with make(recorder) as injected:
        injected.chat(REQUEST)
    assert not injected._http.client.is_closed
