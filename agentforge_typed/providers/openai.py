"""`OpenAIChatModel`: the OpenAI Chat Completions API and every server compatible with it."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any

import httpx

from .._events import ResponseComplete, StreamEvent
from .._exceptions import ModelError
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse
from ._http import HttpShell
from ._openai_wire import PROVIDER, StreamAccumulator, build_payload, parse_response
from ._retry import RetryPolicy

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_PATH = "chat/completions"
_PARAMETER_NAMES = frozenset(ChatRequestParameters.model_fields) - {"model"}


class OpenAIChatModel:
    """A `ChatModel` over `POST /chat/completions`, blocking and streaming, sync and async.

    Works against OpenAI and any compatible server (vLLM, Ollama, DeepSeek, LiteLLM, …) through
    `base_url`. Keyword arguments beyond the named ones are default `ChatRequestParameters`
    (`temperature=0.2`, `max_tokens=512`, `custom={...}`, …); a request's own parameters win.

    Args:
        model: The model name, e.g. `"gpt-4o-mini"`; a request's `parameters.model` overrides it.
        api_key: Defaults to `OPENAI_API_KEY`. Required for the default OpenAI endpoint; with a
            custom `base_url` (a local server) it may be absent, and no `Authorization` is sent.
        base_url: Defaults to `OPENAI_BASE_URL`, else `https://api.openai.com/v1`.
        http_client: The `httpx.Client` to use (e.g. with a `MockTransport` in tests); its own
            timeout applies and it is not closed by `close()`. One is created when omitted.
        async_http_client: The `httpx.AsyncClient` to use, likewise.
        max_retries: Retries of transient failures (connect/read errors, timeouts, 408, 409, 429,
            5xx), with exponential backoff and jitter, honouring `Retry-After`.
        timeout: Seconds, or an `httpx.Timeout`, for the clients created here.
        organization: Sent as `OpenAI-Organization`.
        project: Sent as `OpenAI-Project`.
        sleep: How to wait between sync retries (tests pass a recorder).
        asleep: How to wait between async retries.
        **defaults: Default `ChatRequestParameters` fields.

    Raises:
        ModelError: no API key for the OpenAI endpoint.
        TypeError: a keyword that is not a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        max_retries: int = 2,
        timeout: float | httpx.Timeout | None = 60.0,
        organization: str | None = None,
        project: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **defaults: Any,
    ) -> None:
        unknown = sorted(set(defaults) - _PARAMETER_NAMES)
        if unknown:
            raise TypeError(
                f"OpenAIChatModel() got unexpected keyword arguments: {', '.join(unknown)} "
                f"(default parameters are: {', '.join(sorted(_PARAMETER_NAMES))})"
            )
        self.model = model
        self.defaults = ChatRequestParameters(model=model, **defaults)
        """Default parameters; a request's parameters are merged over them."""
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not api_key and base_url.rstrip("/") == DEFAULT_BASE_URL:
            raise ModelError(
                "OpenAI API key missing: pass api_key=... to OpenAIChatModel or set the "
                "OPENAI_API_KEY environment variable (a custom base_url, e.g. a local server, "
                "may go without one)"
            )
        headers: dict[str, str] = {}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        if organization:
            headers["openai-organization"] = organization
        if project:
            headers["openai-project"] = project
        self._http = HttpShell(
            provider=PROVIDER,
            base_url=base_url,
            headers=headers,
            secrets=[api_key],
            http_client=http_client,
            async_http_client=async_http_client,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            sleep=sleep,
            asleep=asleep,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model!r}, base_url={self._http.base_url!r})"

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
            ModelError: HTTP error (after retries), network failure, or a malformed answer.
        """
        return parse_response(self._http.post_json(_PATH, self._payload(request, stream=False)))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        payload = self._payload(request, stream=False)
        return parse_response(await self._http.apost_json(_PATH, payload))

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` and yield text, thinking and tool-call deltas, then `ResponseComplete`.

        Raises:
            ModelError: as `chat`, plus an error sent inside the stream, or a stream cut off
                before the answer was complete.
        """
        payload = self._payload(request, stream=True)
        accumulator = StreamAccumulator()
        for event in self._http.stream_sse(_PATH, payload):
            yield from accumulator.feed(event)
            if accumulator.done:
                break
        yield ResponseComplete(response=accumulator.finish())

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        payload = self._payload(request, stream=True)
        accumulator = StreamAccumulator()
        events = self._http.astream_sse(_PATH, payload)
        try:
            async for event in events:
                for stream_event in accumulator.feed(event):
                    yield stream_event
                if accumulator.done:
                    break
        finally:
            await events.aclose()
        yield ResponseComplete(response=accumulator.finish())

    def close(self) -> None:
        """Close the HTTP client this model created (an injected one stays open)."""
        self._http.close()

    async def aclose(self) -> None:
        """Close the HTTP clients this model created (injected ones stay open)."""
        await self._http.aclose()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
