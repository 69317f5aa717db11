"""`OpenAIResponsesModel`: OpenAI's Responses API (`POST /responses`)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from .._exceptions import ModelError
from .._messages import ChatMessage
from .._request import ChatRequestParameters
from .._response import ChatResponse
from ._base import HttpChatModel, default_parameters
from ._http import HttpShell
from ._responses_wire import OpenAIResponsesWire, ResponsesStreamAccumulator
from ._retry import RetryPolicy

__all__ = ["OpenAIResponsesModel"]


class OpenAIResponsesModel(HttpChatModel):
    """A `ChatModel` over OpenAI's Responses API, blocking and streaming, sync and async.

    Pick it over `OpenAIChatModel` (Chat Completions) for OpenAI's reasoning models: their
    reasoning is carried from turn to turn (encrypted, with `store: false`), and hosted tools are
    declared through `custom={"tools": [...]}`. Chat Completions stays the choice for compatible
    servers that do not implement Responses. Keyword arguments beyond the named ones are default
    `ChatRequestParameters`; a request's own parameters win.

    Args:
        model: The model name, e.g. `"gpt-5-mini"`; a request's `parameters.model` overrides it.
        api_key: Defaults to `OPENAI_API_KEY`. Required for the default OpenAI endpoint only.
        base_url: Defaults to `OPENAI_BASE_URL`, else `https://api.openai.com/v1`.
        http_client: The `httpx.Client` to use; its own timeout applies and it is not closed by
            `close()`. One is created when omitted.
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

    _path = OpenAIResponsesWire.path

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
        wire = self._wire = OpenAIResponsesWire(organization=organization, project=project)
        self.model = model
        self.defaults = default_parameters(type(self).__name__, defaults, model=model)
        if api_key is None:
            api_key = os.environ.get(wire.api_key_env)
        base_url = base_url or os.environ.get(wire.base_url_env) or wire.default_base_url
        if not api_key and base_url.rstrip("/") == wire.default_base_url:
            raise ModelError(
                f"OpenAI API key missing: pass api_key=... to {type(self).__name__} or set the "
                f"{wire.api_key_env} environment variable (a custom base_url may go without one)"
            )
        self._http = HttpShell(
            provider=wire.provider,
            base_url=base_url,
            headers=wire.headers(api_key),
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
        return self._wire.build_payload(messages, parameters, stream=stream)

    def _parse_response(self, body: Any) -> ChatResponse:
        return self._wire.parse_response(body)

    def _stream_parser(self) -> ResponsesStreamAccumulator:
        return self._wire.stream_parser()
