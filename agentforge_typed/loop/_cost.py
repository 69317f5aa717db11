"""Estimated cost of a run, from the `genai-prices` package (optional extra `[prices]`).

A response is priced only when the model that answered it is known at the endpoint it was sent
to: `genai-prices` identifies the provider from the model's API base URL (so a local server's
model, even one named like a hosted one, is never priced as the hosted one) and the model from the
name the response reports (or the model's configured name). Anything it does not know leaves the
cost unknown (`None`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeGuard

from .._response import ChatResponse, TokenUsage

__all__ = ["priced", "prices_available"]

logger = logging.getLogger("agentforge_typed")


@functools.cache
def prices_available() -> bool:
    """Whether `genai-prices` is installed."""
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return False
    return True


def priced(model: object, responses: Sequence[ChatResponse], total: TokenUsage) -> TokenUsage:
    """`total`, the usage summed over `responses` that `model` answered, with its estimated
    `cost` when every response that used tokens can be priced. A model of several models (a
    `FallbackModel`) names the one that answered each response (`answering(response)`), and each
    is priced at that one's endpoint.

    Whatever the pricing tables, their code or the model's own attributes (`answering`,
    `base_url`) raise, an estimate never breaks the run it prices (its tools have run; its
    messages must come back): the cost is then unknown."""
    if not total.total_tokens:
        return total
    try:
        return _priced(model, responses, total)
    except Exception:
        logger.debug("no price for the run of %s", type(model).__name__, exc_info=True)
        return total


def _priced(model: object, responses: Sequence[ChatResponse], total: TokenUsage) -> TokenUsage:
    answering = getattr(model, "answering", None)
    endpoints: list[tuple[object, str]] = []
    for response in responses:
        answered = answering(response) if callable(answering) else model
        base_url = getattr(answered, "base_url", None)
        if not isinstance(base_url, str):
            return total
        endpoints.append((answered, base_url))
    if not prices_available():
        return total
    cost = Decimal(0)
    for (answered, base_url), response in zip(endpoints, responses, strict=True):
        price = _price(answered, base_url, response)
        if price is None:
            return total
        cost += price
    return total.model_copy(update={"cost": cost})


def _price(model: object, base_url: str, response: ChatResponse) -> Decimal | None:
    from genai_prices import Usage, calc_price

    usage = response.token_usage
    if usage is None or not (usage.input_tokens or usage.output_tokens):
        return Decimal(0)
    name = response.metadata.get("model") or getattr(model, "model", None)
    if not isinstance(name, str):
        return None
    try:
        calculation = calc_price(
            Usage(output_tokens=usage.output_tokens, **_input_counts(usage, response.metadata)),
            name,
            provider_api_url=base_url,
        )
        price = calculation.total_price
    except Exception:
        # Not only `LookupError`: see `priced`.
        logger.debug("no price for %r at %s", name, base_url, exc_info=True)
        return None
    return price if isinstance(price, Decimal) else None


def _input_counts(usage: TokenUsage, metadata: Mapping[str, Any]) -> dict[str, int]:
    """The input tokens as `genai-prices` counts them (cached ones included, as the contract's
    `input_tokens` does on every wire), and of those the ones read from and written to the prompt
    cache, from what each wire keeps in `metadata`: Anthropic's `cache_read_input_tokens` /
    `cache_creation_input_tokens` (with `cache_creation`'s split of the writes by lifetime, priced
    apart: one-hour writes cost more), OpenAI's `cached_tokens` and Gemini's
    `cachedContentTokenCount`. Cache counts larger than the input, or a split that does not add
    up, are not believed."""
    counts = {"input_tokens": usage.input_tokens}
    read, write = (
        metadata.get("cache_read_input_tokens"),
        metadata.get("cache_creation_input_tokens"),
    )
    if _is_count(read) or _is_count(write):
        read, write = read if _is_count(read) else 0, write if _is_count(write) else 0
        if read + write <= usage.input_tokens:
            counts |= {"cache_read_tokens": read, "cache_write_tokens": write}
            counts |= _write_lifetimes(metadata.get("cache_creation"), write)
        return counts
    cached = metadata.get("cached_tokens")
    gemini = metadata.get("usage_metadata")
    if not _is_count(cached) and isinstance(gemini, Mapping):
        cached = gemini.get("cachedContentTokenCount")
    if _is_count(cached) and cached <= usage.input_tokens:
        counts["cache_read_tokens"] = cached
    return counts


def _write_lifetimes(split: object, write: int) -> dict[str, int]:
    """Anthropic's `cache_creation` (`ephemeral_5m_input_tokens`, `ephemeral_1h_input_tokens`)
    as `genai-prices` keys, when both are counts that add up to the writes."""
    if not isinstance(split, Mapping):
        return {}
    five, hour = split.get("ephemeral_5m_input_tokens"), split.get("ephemeral_1h_input_tokens")
    if not (_is_count(five) and _is_count(hour)) or five + hour != write:
        return {}
    return {"cache_write_5m_tokens": five, "cache_write_1h_tokens": hour}


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
