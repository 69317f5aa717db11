"""`AnthropicChatModel`: the Anthropic Messages API over httpx, blocking and streaming, sync and async."""

from __future__ import annotations

from typing_extensions import Unpack

from ._anthropic_cache import CacheTTL, PromptCache
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
        prompt_cache: Where to put prompt-cache breakpoints (`cache_control`): `"auto"` (the
            default) marks the tools, the system prompt and, once the conversation has an
            answer, its last block, each where its prefix is long enough to be cached (about
            1,024 tokens); `"off"` marks nothing; or a collection of `"tools"`, `"system"` and
            `"messages"` marks those always.
        cache_ttl: How long a cached prefix lives: `"5m"` (the default) or `"1h"` (its writes
            cost twice the input price instead of 1.25 times).
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
        prompt_cache: PromptCache = "auto",
        cache_ttl: CacheTTL = "5m",
        **options: Unpack[HttpModelOptions],
    ) -> None:
        if cache_ttl not in ("5m", "1h"):
            raise ValueError(f'cache_ttl must be "5m" or "1h", got {cache_ttl!r}')
        if isinstance(prompt_cache, str):
            if prompt_cache not in ("auto", "off"):
                raise ValueError(
                    'prompt_cache must be "auto", "off" or a collection of "tools", "system" '
                    f'and "messages", got {prompt_cache!r}'
                )
        else:
            prompt_cache = frozenset(prompt_cache)
            unknown = sorted(prompt_cache - {"tools", "system", "messages"})
            if unknown:
                raise ValueError(
                    f'prompt_cache places are "tools", "system" and "messages", not {unknown}'
                )
        wire = AnthropicWire(
            anthropic_version=anthropic_version, prompt_cache=prompt_cache, cache_ttl=cache_ttl
        )
        super().__init__(wire, model, options, max_tokens=max_tokens)
