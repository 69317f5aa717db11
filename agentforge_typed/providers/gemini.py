"""`GeminiChatModel`: Google's Gemini API (`generateContent`) over httpx, blocking and streaming."""

from __future__ import annotations

import os

from typing_extensions import Unpack

from ._base import HttpChatModel, HttpModelOptions
from ._gemini_wire import FunctionSchema, GeminiWire

__all__ = ["GeminiChatModel"]


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
