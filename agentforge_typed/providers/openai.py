"""`OpenAIChatModel`: the OpenAI Chat Completions API and every server compatible with it."""

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
from ._openai_wire import PROVIDER, StreamAccumulator, build_payload, parse_response
from ._retry import RetryPolicy

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatModel(HttpChatModel):
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

    _path = "chat/completions"

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
        self.model = model
        self.defaults = default_parameters("OpenAIChatModel", defaults, model=model)
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

    def _build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        return build_payload(messages, parameters, stream=stream)

    def _parse_response(self, body: Any) -> ChatResponse:
        return parse_response(body)

    def _stream_parser(self) -> StreamAccumulator:
        return StreamAccumulator()
