"""Bounded work per model call: `total_timeout` ends a call whose server never finishes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from itertools import cycle
from typing import Any

import httpx
import pytest
from http_server import Reply, ScriptedServer
from openai_support import call

from agentforge_typed import ChatRequest, ModelError, UserMessage
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel

CLASSES: dict[str, Callable[..., HttpChatModel]] = {
    "openai": OpenAIChatModel,
    "anthropic": AnthropicChatModel,
    "gemini": GeminiChatModel,
}
REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
GIVE_UP = 10.0  # the slow server stops by itself after this, so a broken bound cannot hang


class SlowStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that never ends: `pieces` over and over, `pause` seconds apart."""

    def __init__(self, pieces: list[bytes], pause: float = 0.01) -> None:
        self.pieces = pieces
        self.pause = pause

    def __iter__(self) -> Iterator[bytes]:
        started = time.monotonic()
        for piece in cycle(self.pieces):
            if time.monotonic() - started > GIVE_UP:
                return
            time.sleep(self.pause)
            yield piece

    async def __aiter__(self) -> AsyncIterator[bytes]:
        started = time.monotonic()
        for piece in cycle(self.pieces):
            if time.monotonic() - started > GIVE_UP:
                return
            await asyncio.sleep(self.pause)
            yield piece


KEEP_ALIVES = [b": keep-alive\n\n"]
ONE_BYTE_AT_A_TIME = [bytes([byte]) for byte in b": still thinking\n"]


def _model(provider: str, body: SlowStream, **options: Any) -> HttpChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        stream = b'"stream":true' in request.content
        kind = "text/event-stream" if stream else "application/json"
        return httpx.Response(200, headers={"content-type": kind}, stream=body)

    transport = httpx.MockTransport(handler)
    cls = CLASSES[provider]
    return cls(
        "m",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **options,
    )


CASES = [
    ("keep-alives", KEEP_ALIVES, "stream"),
    ("keep-alives", KEEP_ALIVES, "astream"),
    *[("one byte at a time", ONE_BYTE_AT_A_TIME, mode) for mode in ("chat", "achat")],
    *[("one byte at a time", ONE_BYTE_AT_A_TIME, mode) for mode in ("stream", "astream")],
]


@pytest.mark.parametrize("provider", list(CLASSES))
@pytest.mark.parametrize(
    ("server", "pieces", "mode"), CASES, ids=[f"{c[0]}, {c[2]}" for c in CASES]
)
async def test_total_timeout_ends_a_call_that_never_finishes(
    provider: str, server: str, pieces: list[bytes], mode: str
) -> None:
    model = _model(provider, SlowStream(pieces), total_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"call took longer than total_timeout=0\.2s"):
        await call(model, REQUEST, mode)
    elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 3.0, elapsed


async def test_total_timeout_caps_every_wait_of_the_attempt() -> None:
    """No single wait (headers, next bytes) is allowed longer than the whole call."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(400, json={"error": {"message": "no"}})

    client = httpx.Client(
        transport=httpx.MockTransport(handler), timeout=httpx.Timeout(60, read=0.1)
    )
    model = OpenAIChatModel("m", api_key="sk-test", http_client=client, total_timeout=2.5)
    with pytest.raises(ModelError):
        model.chat(REQUEST)
    assert seen == [{"connect": 2.5, "read": 0.1, "write": 2.5, "pool": 2.5}]
    unbounded = OpenAIChatModel("m", api_key="sk-test", http_client=client)
    with pytest.raises(ModelError):
        unbounded.chat(REQUEST)
    assert seen[1] == {"connect": 60, "read": 0.1, "write": 60, "pool": 60}


def test_a_call_within_its_total_timeout_is_untouched() -> None:
    body = {
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
    }
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    model = OpenAIChatModel("m", api_key="sk-test", http_client=client, total_timeout=30)
    assert model.chat(REQUEST).ai_message.text == "ok"


@pytest.fixture
def keep_alive_server(http_server: ScriptedServer) -> str:
    """A real server that answers every request with an event stream of keep-alives only (for
    `GIVE_UP` seconds)."""
    keep_alives = [b": keep-alive\n\n"] * int(GIVE_UP / 0.05)
    headers = {"content-type": "text/event-stream"}
    http_server.route("*", Reply(body=keep_alives, headers=headers, delay=0.05))
    return http_server.url


@pytest.mark.parametrize("provider", list(CLASSES))
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_total_timeout_over_a_real_socket(
    keep_alive_server: str, provider: str, mode: str
) -> None:
    """With the clients the model creates itself, over a real connection."""
    cls = CLASSES[provider]
    model = cls("m", base_url=keep_alive_server, total_timeout=0.4, max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError, match=r"took longer than total_timeout=0\.4s"):
            await call(model, REQUEST, mode)
    finally:
        await model.aclose()
    assert 0.4 <= time.monotonic() - started < 3.0


@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_total_timeout_ends_a_blocking_call_once_not_after_each_retry(
    mode: str, http_server: ScriptedServer
) -> None:
    http_server.route("*", Reply(wait=GIVE_UP))  # silent until the client gives up
    model = OpenAIChatModel("m", base_url=http_server.url, total_timeout=0.4, max_retries=2)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError, match=r"took longer than total_timeout=0\.4s"):
            await call(model, REQUEST, mode)
    finally:
        await model.aclose()
    # One attempt's bound, not one per retry (a timeout it caused is not retried).
    assert 0.4 <= time.monotonic() - started < 0.8


@pytest.mark.parametrize("provider", list(CLASSES))
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_max_line_length_reaches_the_decoder(provider: str, mode: str) -> None:
    line = b"data: " + b"x" * 100 + b"\n\n"
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=line
        )
    )
    cls = CLASSES[provider]
    model = cls(
        "m",
        api_key="sk-test",
        max_line_length=50,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    with pytest.raises(ModelError, match="line longer than the limit of 50 characters"):
        await call(model, REQUEST, mode)
