"""`OpenAIChatModel`: the OpenAI Chat Completions API and every server compatible with it."""

from __future__ import annotations

import os
from typing import Literal

from typing_extensions import Unpack

from ._base import HttpChatModel, HttpModelOptions
from ._openai_wire import OpenAIWire
from ._profiles import ModelProfile, resolve_profile

__all__ = ["OpenAIChatModel", "OpenAIOptions", "cache_options"]


class OpenAIOptions(HttpModelOptions, total=False):
    """The keyword options of OpenAI's models (`OpenAIChatModel`, `OpenAIResponsesModel`): the
    shared `HttpModelOptions` plus the account headers."""

    organization: str | None
    """Sent as `OpenAI-Organization`."""
    project: str | None
    """Sent as `OpenAI-Project`."""
    prompt_cache_key: str | None
    """Sent as `prompt_cache_key` with every request: requests with one key and one prompt
    prefix are routed to the same cache (OpenAI caches prefixes of 1,024 tokens and more by
    itself)."""
    prompt_cache_retention: Literal["in_memory", "24h"] | None
    """Sent as `prompt_cache_retention`: `"24h"` keeps cached prefixes up to a day."""


def cache_options(options: OpenAIOptions) -> OpenAIOptions:
    """`options` with the prompt-cache options moved into the default `custom` fields (a
    request's own `custom` still wins, key by key)."""
    cache = {
        name: value
        for name in ("prompt_cache_key", "prompt_cache_retention")
        if (value := options.pop(name, None)) is not None  # type: ignore[misc]
    }
    if cache:
        options["custom"] = {**cache, **(options.get("custom") or {})}
    return options


class OpenAIChatModel(HttpChatModel):
    """A `ChatModel` over `POST /chat/completions`, blocking and streaming, sync and async.

    Works against OpenAI and any compatible server (vLLM, Ollama, DeepSeek, LiteLLM, …) through
    `base_url`. `api_key` defaults to `OPENAI_API_KEY` (required only for the OpenAI endpoint),
    `base_url` to `OPENAI_BASE_URL`, else `https://api.openai.com/v1`.

    Args:
        model: The model name, e.g. `"gpt-4o-mini"`; a request's `parameters.model` overrides it.
        max_tokens: Default `max_tokens` of every request.
        profile: What the model behind the endpoint supports: a `ModelProfile`, a built-in
            profile's name (`"ollama"`, `"deepseek"`, …) or the path of a profile file that
            `agentforge-typed probe --write` made. A request asking for something the profile
            lacks is adapted by a documented rule (recorded in the response's
            `metadata["adaptations"]`) or refused with `UnsupportedFeatureError`, as the
            profile's `policy` says. `None` (the default): everything is sent as asked.
        **options: `OpenAIOptions`: `organization=`, `project=` and the shared
            `HttpModelOptions` (`api_key=`, `base_url=`, `http_client=`, `max_retries=`,
            `timeout=`, …); and default `ChatRequestParameters` fields (`temperature=0.2`,
            `custom={...}`, …); a request's own parameters win.

    Raises:
        ModelError: no API key for the OpenAI endpoint.
        ValueError: a `profile` name that is neither built in nor a file.
        TypeError: a keyword that is not an option or a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        profile: ModelProfile | str | os.PathLike[str] | None = None,
        **options: Unpack[OpenAIOptions],
    ) -> None:
        resolved = resolve_profile(profile)
        wire = OpenAIWire(
            organization=options.pop("organization", None),
            project=options.pop("project", None),
            stream_usage=resolved is None or resolved.stream_usage,
        )
        super().__init__(
            wire, model, cache_options(options), profile=resolved, max_tokens=max_tokens
        )
