"""`OpenAIChatModel`: the OpenAI Chat Completions API and every server compatible with it."""

from __future__ import annotations

from typing_extensions import Unpack

from ._base import HttpChatModel, HttpModelOptions
from ._openai_wire import OpenAIWire

__all__ = ["OpenAIChatModel"]


class OpenAIChatModel(HttpChatModel):
    """A `ChatModel` over `POST /chat/completions`, blocking and streaming, sync and async.

    Works against OpenAI and any compatible server (vLLM, Ollama, DeepSeek, LiteLLM, …) through
    `base_url`. `api_key` defaults to `OPENAI_API_KEY` (required only for the OpenAI endpoint),
    `base_url` to `OPENAI_BASE_URL`, else `https://api.openai.com/v1`.

    Args:
        model: The model name, e.g. `"gpt-4o-mini"`; a request's `parameters.model` overrides it.
        max_tokens: Default `max_tokens` of every request.
        organization: Sent as `OpenAI-Organization`.
        project: Sent as `OpenAI-Project`.
        **options: The shared `HttpModelOptions` (`api_key=`, `base_url=`, `http_client=`,
            `max_retries=`, `timeout=`, …) and default `ChatRequestParameters` fields
            (`temperature=0.2`, `custom={...}`, …); a request's own parameters win.

    Raises:
        ModelError: no API key for the OpenAI endpoint.
        TypeError: a keyword that is not an option or a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        organization: str | None = None,
        project: str | None = None,
        **options: Unpack[HttpModelOptions],
    ) -> None:
        wire = OpenAIWire(organization=organization, project=project)
        super().__init__(wire, model, options, max_tokens=max_tokens)
