"""`AnthropicChatModel`: the Anthropic Messages API over httpx, blocking and streaming, sync and async."""

from __future__ import annotations

from typing_extensions import Unpack

from ._anthropic_wire import AnthropicWire
from ._base import HttpChatModel, HttpModelOptions

__all__ = ["AnthropicChatModel"]


class AnthropicChatModel(HttpChatModel):
    """A `ChatModel` for Anthropic's Messages API (`POST /v1/messages`).

    `api_key` (sent as `x-api-key`) defaults to `ANTHROPIC_API_KEY` and is required only for
    Anthropic's own endpoint; `base_url` (the API root, with or without `/v1`) defaults to
    `ANTHROPIC_BASE_URL`, then `https://api.anthropic.com`.

    Args:
        model: The model name, e.g. `"claude-sonnet-4-5"`; a request's `parameters.model` overrides it.
        max_tokens: Sent with every request (the API requires it) unless the request sets its own.
        anthropic_version: The `anthropic-version` header.
        **options: The shared `HttpModelOptions` (`api_key=`, `base_url=`, `http_client=`,
            `max_retries=`, `timeout=`, …) and default `ChatRequestParameters` fields
            (`temperature=`, `tools=`, `custom={"thinking": {...}}`, …); each request's
            parameters override them.

    Raises:
        ModelError: no API key for Anthropic's endpoint.
        TypeError: a keyword that is not an option or a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 1024,
        anthropic_version: str = "2023-06-01",
        **options: Unpack[HttpModelOptions],
    ) -> None:
        wire = AnthropicWire(anthropic_version=anthropic_version)
        super().__init__(wire, model, options, max_tokens=max_tokens)
