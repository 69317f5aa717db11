"""`AnthropicChatModel`: the Anthropic Messages API over httpx, blocking and streaming, sync and async."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any

import httpx

from .._events import StreamEvent
from .._exceptions import ModelError
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse
from ._anthropic_wire import AnthropicStreamAccumulator, build_payload, parse_response
from ._http import HttpShell
from ._retry import RetryPolicy
from ._sse import ServerSentEvent

__all__ = ["AnthropicChatModel"]

_DEFAULT_BASE_URL = "https://api.anthropic.com"
_PATH = "/v1/messages"
_PARAMETER_NAMES = frozenset(ChatRequestParameters.model_fields) - {"model", "max_tokens"}


class AnthropicChatModel:
    """A `ChatModel` for Anthropic's Messages API (`POST /v1/messages`).

    Args:
        model: The model name, e.g. `"claude-sonnet-4-5"`; a request's `parameters.model` overrides it.
        api_key: Sent as `x-api-key`; defaults to the `ANTHROPIC_API_KEY` environment variable.
        base_url: The API root (without `/v1`); defaults to `ANTHROPIC_BASE_URL`, then
            `https://api.anthropic.com`.
        max_tokens: Sent with every request (the API requires it) unless the request sets its own.
        anthropic_version: The `anthropic-version` header.
        http_client: The `httpx.Client` to use (not closed by this model); one is created otherwise.
        async_http_client: The `httpx.AsyncClient` to use, likewise.
        max_retries: Retries of transient failures (connect errors, 408, 409, 429, 5xx incl. 529
            overloaded), with backoff honouring `Retry-After`.
        timeout: Timeout of the clients this model creates.
        sleep: How to wait between sync retries (tests inject a recorder).
        asleep: How to wait between async retries.
        **parameters: Default `ChatRequestParameters` fields (`temperature=`, `tools=`,
            `custom={"thinking": {...}}`, …); each request's parameters override them.

    Raises:
        ModelError: no API key was given and `ANTHROPIC_API_KEY` is not set.
        TypeError: a keyword that is not a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        anthropic_version: str = "2023-06-01",
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        max_retries: int = 2,
        timeout: float | httpx.Timeout | None = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **parameters: Any,
    ) -> None:
        unknown = sorted(set(parameters) - _PARAMETER_NAMES)
        if unknown:
            raise TypeError(
                f"AnthropicChatModel() got unexpected keyword arguments: {', '.join(unknown)} "
                f"(default parameters are: {', '.join(sorted(_PARAMETER_NAMES))})"
            )
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ModelError(
                "no Anthropic API key: pass api_key=... to AnthropicChatModel "
                "or set the ANTHROPIC_API_KEY environment variable"
            )
        self.model = model
        self.defaults = ChatRequestParameters(model=model, max_tokens=max_tokens, **parameters)
        """Request parameters every request starts from."""
        self._http = HttpShell(
            provider="Anthropic",
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or _DEFAULT_BASE_URL,
            headers={"x-api-key": api_key, "anthropic-version": anthropic_version},
            secrets=[api_key],
            http_client=http_client,
            async_http_client=async_http_client,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            sleep=sleep,
            asleep=asleep,
        )

    def __repr__(self) -> str:
        return f"AnthropicChatModel({self.model!r}, base_url={self._http.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._http.base_url

    def _payload(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        parameters = self.defaults.merge(request.parameters)
        return build_payload(request.messages, parameters, stream=stream)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the whole answer.

        Raises:
            ModelError: HTTP error status (after retries), network failure, or a malformed answer.
        """
        return parse_response(self._http.post_json(_PATH, self._payload(request, stream=False)))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        body = await self._http.apost_json(_PATH, self._payload(request, stream=False))
        return parse_response(body)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` with `stream: true`; yield deltas, then `ResponseComplete`.

        Raises:
            ModelError: as `chat`, plus an `error` event in the stream (e.g. `overloaded_error`)
                or a stream that ends before `message_stop`.
        """
        payload = self._payload(request, stream=True)
        accumulator = AnthropicStreamAccumulator()
        for event in self._http.stream_sse(_PATH, payload):
            yield from accumulator.feed(event.event, _data(event))
            if accumulator.response is not None:
                break
        accumulator.finish()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        payload = self._payload(request, stream=True)
        accumulator = AnthropicStreamAccumulator()
        events = self._http.astream_sse(_PATH, payload)
        try:
            async for event in events:
                for stream_event in accumulator.feed(event.event, _data(event)):
                    yield stream_event
                if accumulator.response is not None:
                    break
        finally:
            await events.aclose()
        accumulator.finish()

    def close(self) -> None:
        """Close the sync HTTP client if this model created it (an injected one stays open)."""
        self._http.close()

    async def aclose(self) -> None:
        """Close the HTTP clients this model created (injected ones stay open)."""
        await self._http.aclose()

    def __enter__(self) -> AnthropicChatModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> AnthropicChatModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _data(event: ServerSentEvent) -> Any:
    try:
        return event.json()
    except ValueError as exc:
        raise ModelError(
            f"Anthropic sent malformed SSE data in a {event.event!r} event: {exc}",
            body=event.data,
        ) from exc
