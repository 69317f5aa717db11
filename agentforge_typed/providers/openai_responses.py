"""`OpenAIResponsesModel`: OpenAI's Responses API (`POST /responses`)."""

from __future__ import annotations

from typing_extensions import Unpack

from ._base import HttpChatModel
from ._responses_wire import OpenAIResponsesWire
from .openai import OpenAIOptions, cache_options

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
        max_tokens: Default `max_tokens` of every request (sent as `max_output_tokens`).
        **options: `OpenAIOptions`: `organization=`, `project=` and the shared
            `HttpModelOptions` (`api_key=`, default `OPENAI_API_KEY`; `base_url=`, default
            `OPENAI_BASE_URL`, else `https://api.openai.com/v1`; `http_client=`,
            `max_retries=`, `timeout=`, …); and default `ChatRequestParameters` fields; a
            request's own parameters win.

    Raises:
        ModelError: no API key for the OpenAI endpoint.
        TypeError: a keyword that is not a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        **options: Unpack[OpenAIOptions],
    ) -> None:
        wire = OpenAIResponsesWire(
            organization=options.pop("organization", None), project=options.pop("project", None)
        )
        super().__init__(wire, model, cache_options(options), max_tokens=max_tokens)
