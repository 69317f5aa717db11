"""Anthropic prompt caching, sans-IO: `cache_control` breakpoints placed on a built Messages API
payload (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).

A breakpoint caches the request's prefix up to and including the block it marks, in the order
`tools`, `system`, `messages`; a later request with the same prefix reads it at a tenth of the
input price, and writing it costs a quarter more (5-minute entries; twice the price for 1-hour
ones). A request takes at most 4 breakpoints, and a prefix under the model's minimum (1,024
tokens for most models, 2,048 or 4,096 for some) is not cached at all, at no cost.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from pydantic_core import to_json

__all__ = ["AUTO_MIN_CHARS", "CacheTTL", "PromptCache", "place_breakpoints"]

CachePoint = Literal["tools", "system", "messages"]
PromptCache = Literal["auto", "off"] | Collection[CachePoint]
"""Where `AnthropicChatModel` puts breakpoints: `"auto"`, `"off"`, or the places to mark."""
CacheTTL = Literal["5m", "1h"]

AUTO_MIN_CHARS = 4096
"""The size of JSON (in characters, about 1,024 tokens) from which `"auto"` marks a prefix: the
smallest prefix Anthropic caches for most models. Below it a breakpoint would cache nothing."""
MAX_BREAKPOINTS = 4
"""The most `cache_control` markers one request may carry (the API's limit)."""

_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
"""Blocks that cannot carry `cache_control` (they are cached as part of the prefix around them)."""


def place_breakpoints(payload: dict[str, Any], cache: PromptCache, ttl: CacheTTL) -> dict[str, Any]:
    """`payload` with `cache_control` breakpoints on the last tool, the system prompt and the
    last block of the conversation, as `cache` says.

    `"auto"` marks each place whose prefix is at least `AUTO_MIN_CHARS` long: the tools and the
    system prompt (stable across rounds and runs), and the conversation once it has an earlier
    answer (a loop's next round, a chat's next turn re-sends it). It leaves the payload alone
    when `custom` asked for Anthropic's own automatic caching (a top-level `cache_control`).
    Places already marked (in `custom` tools or raw messages) count against the limit of 4.
    The payload's own lists and blocks are copied where marked, never changed in place.
    """
    if cache == "off" or (cache == "auto" and "cache_control" in payload):
        return payload
    marker: dict[str, str] = (
        {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    )
    tools, system, messages = payload.get("tools"), payload.get("system"), payload["messages"]
    if cache == "auto":
        places = _auto(tools, system, messages)
    else:
        places = [place for place in ("tools", "system", "messages") if place in cache]
    room = MAX_BREAKPOINTS - _marked(tools, system, messages)
    marked = dict(payload)
    for place in places[: max(room, 0)]:
        if place == "tools" and tools:
            marked["tools"] = [*tools[:-1], {**tools[-1], "cache_control": marker}]
        elif place == "system" and system:
            blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
            marked["system"] = [*blocks[:-1], {**blocks[-1], "cache_control": marker}]
        elif place == "messages" and messages:
            marked["messages"] = _mark_last(messages, marker)
    return marked


def _auto(tools: Any, system: Any, messages: list[dict[str, Any]]) -> list[CachePoint]:
    places: list[CachePoint] = []
    size = len(to_json(tools)) if tools else 0
    if size >= AUTO_MIN_CHARS:
        places.append("tools")
    if system:
        size += len(to_json(system))
        if size >= AUTO_MIN_CHARS:
            places.append("system")
    if any(message["role"] == "assistant" for message in messages):
        # From the end, and only until the threshold: a long history is not serialised whole.
        for message in reversed(messages):
            size += len(to_json(message))
            if size >= AUTO_MIN_CHARS:
                places.append("messages")
                break
    return places


def _marked(tools: Any, system: Any, messages: list[dict[str, Any]]) -> int:
    """The breakpoints the payload already has."""
    blocks = list(tools or ()) + (system if isinstance(system, list) else [])
    for message in messages:
        if isinstance(message["content"], list):
            blocks += message["content"]
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)


def _mark_last(messages: list[dict[str, Any]], marker: dict[str, str]) -> list[dict[str, Any]]:
    """`messages` with the last block that can carry a breakpoint marked."""
    for position in range(len(messages) - 1, -1, -1):
        content = messages[position]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        for index in range(len(blocks) - 1, -1, -1):
            if blocks[index].get("type") not in _UNCACHEABLE:
                blocks[index] = {**blocks[index], "cache_control": marker}
                changed = {**messages[position], "content": blocks}
                return [*messages[:position], changed, *messages[position + 1 :]]
    return messages
