"""`GeminiChatModel`: Google's Gemini API (`generateContent`) over httpx, blocking and streaming."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import pydantic_core

from .._events import StreamEvent
from .._exceptions import ModelError
from .._messages import ChatMessage
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse
from ._base import HttpChatModel, default_parameters
from ._gemini_wire import (
    PROVIDER,
    FunctionSchema,
    GeminiStreamAccumulator,
    build_payload,
    error_from_gemini,
    parse_response,
    request_path,
    retry_delay,
)
from ._http import HttpShell
from ._retry import RetryPolicy, retry_after
from ._sse import ServerSentEvent

__all__ = ["GeminiChatModel"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


class _GeminiShell(HttpShell):
    """The shared shell, reading Gemini's error bodies: `status` as the error code, and the
    `RetryInfo` delay as the wait before a retry when no `Retry-After` header says otherwise."""

    def _retry_delay(
        self,
        retries: int,
        path: str,
        *,
        response: httpx.Response | None = None,
        error: httpx.HTTPError | None = None,
    ) -> float | None:
        if response is not None and retry_after(response.headers) is None:
            try:
                hint = retry_delay(pydantic_core.from_json(response.content))
            except ValueError:
                hint = None
            if hint is not None:
                # Handed to the shared policy as the header it already honours (and caps).
                response.headers["retry-after"] = str(hint)
        return super()._retry_delay(retries, path, response=response, error=error)

    def _status_error(self, response: httpx.Response) -> ModelError:
        error = super()._status_error(response)
        return error_from_gemini(
            self._scrub(error.body), status_code=error.status_code, fallback=response.reason_phrase
        )

    def scrubbed(self, error: ModelError) -> ModelError:
        """`error` with every secret replaced in its message and body (`error` itself when it
        holds none): for errors the wire core raises from what the server sent."""
        message, body = self._redact(error.message), self._scrub(error.body)
        if message == error.message and body == error.body:
            return error
        return ModelError(message, status_code=error.status_code, body=body, code=error.code)

    def _scrub(self, value: Any) -> Any:
        # As `_redact`, and object keys too: a server may echo the key anywhere.
        if isinstance(value, dict):
            return {self._redact(str(k)): self._scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrub(item) for item in value]
        return self._redact(value)

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """Re-raise a `ModelError` raised inside without the secrets it echoes (and without its
        cause, which may echo them too)."""
        try:
            yield
        except ModelError as exc:
            clean = self.scrubbed(exc)
            if clean is exc:
                raise
            raise clean from None


class _ScrubbingParser:
    """The Gemini stream accumulator behind the shell's `scrubbing`."""

    def __init__(self, parser: GeminiStreamAccumulator, shell: _GeminiShell) -> None:
        self._parser = parser
        self._shell = shell

    @property
    def done(self) -> bool:
        return self._parser.done

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        with self._shell.scrubbing():
            return self._parser.take(event)

    def end(self) -> list[StreamEvent]:
        with self._shell.scrubbing():
            return self._parser.end()


class GeminiChatModel(HttpChatModel):
    """A `ChatModel` for the Gemini API: `models/{model}:generateContent`, and
    `:streamGenerateContent?alt=sse` for streams.

    Args:
        model: The model name, e.g. `"gemini-2.5-flash"`; a request's `parameters.model` overrides it.
        api_key: Sent as `x-goog-api-key` (never in the URL); defaults to `GEMINI_API_KEY`, then
            `GOOGLE_API_KEY`. Required for Google's endpoint; a custom `base_url` may go without.
        base_url: The API root including the version; defaults to `GEMINI_BASE_URL`, then
            `https://generativelanguage.googleapis.com/v1beta`.
        http_client: The `httpx.Client` to use (not closed by this model); one is created otherwise.
        async_http_client: The `httpx.AsyncClient` to use, likewise.
        max_retries: Retries of transient failures (connect errors, 408, 409, 429, 5xx), with
            backoff honouring `Retry-After` and the `retryDelay` of Gemini's `RetryInfo`.
        timeout: Timeout of the clients this model creates.
        function_schema: `"json-schema"` declares tool parameters as full JSON Schema
            (`parametersJsonSchema`); `"gemini"` uses the older OpenAPI subset (`parameters`, the
            `gemini` schema dialect) for models and endpoints without it.
        sleep: How to wait between sync retries (tests inject a recorder).
        asleep: How to wait between async retries.
        **parameters: Default `ChatRequestParameters` fields (`temperature=`, `max_tokens=`,
            `custom={"generationConfig": {"thinkingConfig": ...}}`, …); requests override them.

    Raises:
        ModelError: no API key for Google's endpoint.
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
        function_schema: FunctionSchema = "json-schema",
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **parameters: Any,
    ) -> None:
        if function_schema not in ("json-schema", "gemini"):
            raise ValueError(
                f"function_schema must be 'json-schema' or 'gemini', got {function_schema!r}"
            )
        self.model = model
        self.defaults = default_parameters("GeminiChatModel", parameters, model=model)
        self.function_schema: FunctionSchema = function_schema
        if api_key is None:
            api_key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        base_url = base_url or os.environ.get("GEMINI_BASE_URL") or DEFAULT_BASE_URL
        if not api_key and base_url.rstrip("/") == DEFAULT_BASE_URL:
            raise ModelError(
                "no Gemini API key: pass api_key=... to GeminiChatModel or set the "
                "GEMINI_API_KEY (or GOOGLE_API_KEY) environment variable"
            )
        self._http: _GeminiShell = _GeminiShell(
            provider=PROVIDER,
            base_url=base_url,
            headers={"x-goog-api-key": api_key} if api_key else {},
            secrets=[api_key],
            http_client=http_client,
            async_http_client=async_http_client,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            sleep=sleep,
            asleep=asleep,
        )

    def _build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        return build_payload(messages, parameters, function_schema=self.function_schema)

    # A server may echo the key in a 200 answer or inside a stream; the wire core does not know
    # the key, so what it raises is scrubbed here, like the shell's own HTTP errors.

    def _parse_response(self, body: Any) -> ChatResponse:
        with self._http.scrubbing():
            return parse_response(body)

    def _stream_parser(self) -> _ScrubbingParser:
        return _ScrubbingParser(GeminiStreamAccumulator(), self._http)

    # The model name is part of the path, and streaming has a path of its own, so each call
    # works out its path before handing the payload to the shared shell.

    def _call(self, request: ChatRequest, *, stream: bool) -> tuple[str, dict[str, Any]]:
        parameters = self.defaults.merge(request.parameters)
        path = request_path(parameters.model or self.model, stream=stream)
        return path, self._build_payload(request.messages, parameters, stream=stream)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the whole answer.

        Raises:
            ModelError: HTTP error status (after retries), network failure, or a malformed answer.
        """
        return self._parse_response(self._http.post_json(*self._call(request, stream=False)))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        body = await self._http.apost_json(*self._call(request, stream=False))
        return self._parse_response(body)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` as a stream; yield text, thinking and tool-call deltas, then
        `ResponseComplete` with the same response `chat` would return.

        Raises:
            ModelError: as `chat`, plus an error sent inside the stream, or a stream cut off
                before its finish reason.
        """
        parser = self._stream_parser()
        for event in self._http.stream_sse(*self._call(request, stream=True)):
            yield from parser.take(event)
        yield from parser.end()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        parser = self._stream_parser()
        events = self._http.astream_sse(*self._call(request, stream=True))
        try:
            async for event in events:
                for stream_event in parser.take(event):
                    yield stream_event
        finally:
            await events.aclose()
        for stream_event in parser.end():
            yield stream_event
