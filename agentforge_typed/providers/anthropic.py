"""`AnthropicChatModel`: the Anthropic Messages API over httpx, blocking and streaming, sync and async."""

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
from ._anthropic_wire import AnthropicStreamAccumulator, build_payload, parse_response
from ._base import HttpChatModel, default_parameters
from ._http import HttpShell
from ._retry import RetryPolicy

__all__ = ["AnthropicChatModel"]

_DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicChatModel(HttpChatModel):
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

    _path = "/v1/messages"

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
        defaults = default_parameters(
            "AnthropicChatModel", parameters, model=model, max_tokens=max_tokens
        )
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ModelError(
                "no Anthropic API key: pass api_key=... to AnthropicChatModel "
                "or set the ANTHROPIC_API_KEY environment variable"
            )
        self.model = model
        self.defaults = defaults
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

    def _build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        return build_payload(messages, parameters, stream=stream)

    def _parse_response(self, body: Any) -> ChatResponse:
        return parse_response(body)

    def _stream_parser(self) -> AnthropicStreamAccumulator:
        return AnthropicStreamAccumulator()
