"""`GeminiChatModel`: Google's Gemini API (`generateContent`) over httpx, blocking and streaming."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pydantic_core
from typing_extensions import Unpack

from .._events import StreamEvent
from .._exceptions import ModelError
from .._request import ChatRequest
from .._response import ChatResponse
from ._base import HttpChatModel, HttpModelOptions
from ._gemini_wire import FunctionSchema, GeminiWire, request_path, retry_delay, with_gemini_status
from ._http import HttpShell
from ._retry import retry_after

__all__ = ["GeminiChatModel"]


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
        return with_gemini_status(super()._status_error(response))


class GeminiChatModel(HttpChatModel):
    """A `ChatModel` for the Gemini API: `models/{model}:generateContent`, and
    `:streamGenerateContent?alt=sse` for streams.

    `api_key` is sent as `x-goog-api-key` (never in the URL); it defaults to `GEMINI_API_KEY`, then
    `GOOGLE_API_KEY`, and is required only for Google's endpoint. `base_url` (the API root with
    its version) defaults to `GOOGLE_GEMINI_BASE_URL`, then
    `https://generativelanguage.googleapis.com/v1beta`. Retries of 429 and 5xx honour the
    `retryDelay` of Gemini's `RetryInfo` when no `Retry-After` header is sent.

    Args:
        model: The model name, e.g. `"gemini-2.5-flash"`; a request's `parameters.model` overrides it.
        max_tokens: Default `max_tokens` of every request (`generationConfig.maxOutputTokens`).
        function_schema: `"json-schema"` declares tool parameters as full JSON Schema
            (`parametersJsonSchema`); `"gemini"` uses the older OpenAPI subset (`parameters`, the
            `gemini` schema dialect) for models and endpoints without it.
        **options: The shared `HttpModelOptions` (`api_key=`, `base_url=`, `http_client=`,
            `max_retries=`, `timeout=`, …) and default `ChatRequestParameters` fields
            (`temperature=`, `custom={"generationConfig": {"thinkingConfig": ...}}`, …); each
            request's parameters override them.

    Raises:
        ModelError: no API key for Google's endpoint.
        TypeError: a keyword that is not an option or a `ChatRequestParameters` field.
        ValueError: an unknown `function_schema`.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        function_schema: FunctionSchema = "json-schema",
        **options: Unpack[HttpModelOptions],
    ) -> None:
        if function_schema not in ("json-schema", "gemini"):
            raise ValueError(
                f"function_schema must be 'json-schema' or 'gemini', got {function_schema!r}"
            )
        if options.get("api_key") is None and not os.environ.get(GeminiWire.api_key_env):
            # Google's own libraries read either name.
            options["api_key"] = os.environ.get("GOOGLE_API_KEY")
        super().__init__(GeminiWire(function_schema), model, options, max_tokens=max_tokens)
        # The shell as built above, reading Gemini's error bodies too (it only adds overrides).
        self._http.__class__ = _GeminiShell

    # The model name is part of the path, and streaming has a path of its own, so each call
    # works out its path before handing the payload to the shared shell.

    def _call(self, request: ChatRequest, *, stream: bool) -> tuple[str, dict[str, Any]]:
        parameters = self.defaults.merge(request.parameters)
        path = request_path(parameters.model or self.model, stream=stream)
        return path, self._wire.build_payload(request.messages, parameters, stream=stream)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the whole answer.

        Raises:
            ModelError: HTTP error status (after retries), network failure, or a malformed answer.
        """
        path, payload = self._call(request, stream=False)
        return self._http.post_json(path, payload, self._wire.parse_response)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        path, payload = self._call(request, stream=False)
        return await self._http.apost_json(path, payload, self._wire.parse_response)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` as a stream; yield text, thinking and tool-call deltas, then
        `ResponseComplete` with the same response `chat` would return.

        Raises:
            ModelError: as `chat`, plus an error sent inside the stream, or a stream cut off
                before its finish reason.
        """
        path, payload = self._call(request, stream=True)
        yield from self._http.stream(path, payload, self._wire.stream_parser())

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        path, payload = self._call(request, stream=True)
        events = self._http.astream(path, payload, self._wire.stream_parser())
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()
