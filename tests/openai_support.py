"""Shared helpers for the OpenAI provider tests: a scripted MockTransport and both client paths."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
from retry_waits import waiting

from agentforge_typed import ChatModel, ChatRequest, ChatResponse, ResponseComplete, StreamEvent
from agentforge_typed.providers._base import HttpModelOptions
from agentforge_typed.providers.openai import OpenAIChatModel

FIXTURES = Path(__file__).parent / "fixtures" / "golden" / "openai"
API_KEY = "sk-proj-TESTKEY0123456789abcdefXYZ"


class Recorder:
    """A MockTransport handler answering scripted responses in turn and recording each request."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    def json(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


M = TypeVar("M")


def mock_options(handler: Callable[[httpx.Request], httpx.Response]) -> HttpModelOptions:
    """Options giving a provider sync and async clients served by `handler`."""
    return {
        "http_client": httpx.Client(transport=httpx.MockTransport(handler)),
        "async_http_client": httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    }


def recording(model: M, sleeps: list[float] | None = None) -> M:
    """`model`, its retry waits recorded into `sleeps` instead of slept."""
    recorded = [] if sleeps is None else sleeps

    async def asleep(seconds: float) -> None:
        recorded.append(seconds)

    return waiting(model, recorded.append, asleep)


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


class ChunkedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body delivered in the given pieces, optionally dropping the connection after."""

    def __init__(self, pieces: list[bytes], error: Exception | None = None) -> None:
        self.pieces = pieces
        self.error = error

    def __iter__(self) -> Iterator[bytes]:
        yield from self.pieces
        if self.error is not None:
            raise self.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.error is not None:
            raise self.error


def sse_response(data: bytes, *, size: int | None = None) -> httpx.Response:
    pieces = chunks(data, size) if size else [data]
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=ChunkedStream(pieces)
    )


class Server:
    """Plays scripted responses in order and records every request's JSON body and headers."""

    def __init__(self, *responses: httpx.Response | Callable[[], httpx.Response]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.waits: list[float] = []

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0)
        return item() if callable(item) else item

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def model(self, name: str = "gpt-4o-mini", **kwargs: Any) -> OpenAIChatModel:
        transport = httpx.MockTransport(self.handler)
        kwargs.setdefault("api_key", API_KEY)
        model = OpenAIChatModel(
            name,
            http_client=httpx.Client(transport=transport),
            async_http_client=httpx.AsyncClient(transport=transport),
            **kwargs,
        )
        return waiting(model, self.sleep, self.asleep)


async def call(model: ChatModel, request: ChatRequest, mode: str) -> ChatResponse:
    """`chat`, `achat`, `stream` or `astream`, all reduced to the final response."""
    if mode == "chat":
        return model.chat(request)
    if mode == "achat":
        return await model.achat(request)
    events = await collect(model, request, is_async=mode == "astream")
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    return final.response


async def collect(model: ChatModel, request: ChatRequest, *, is_async: bool) -> list[StreamEvent]:
    if is_async:
        return [event async for event in model.astream(request)]
    return list(model.stream(request))
