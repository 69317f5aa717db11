"""What a model returns: the message, token usage, finish reason and provider metadata."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Any

from pydantic import Field, NonNegativeInt

from ._content import FrozenModel
from ._messages import AiMessage

__all__ = ["NO_USAGE", "ChatResponse", "FinishReason", "TokenUsage"]


class FinishReason(str, enum.Enum):
    """Why the model stopped, normalised across providers."""

    STOP = "stop"
    LENGTH = "length"
    TOOL_EXECUTION = "tool_execution"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


class TokenUsage(FrozenModel):
    """Token counts of one or more model calls; `+` adds them up.

    Counts are whole and never negative: a provider that reports otherwise sent a malformed body
    (a `ModelError`), and a count that could go down would let a run slip under its usage limits.
    """

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    total_tokens: NonNegativeInt = 0
    cost: Decimal | None = None
    """Estimated price in US dollars of a `ToolService` run (`ToolChatResult.usage`), when
    `genai-prices` (the optional extra `[prices]`) knows the model at its endpoint; `None` when
    unknown. A sum is unknown when any of its parts that used tokens is."""

    def __add__(self, other: TokenUsage | None) -> TokenUsage:
        if other is None:
            return self
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=_add_costs(self, other),
        )

    __radd__ = __add__

    def _used(self) -> bool:
        return bool(self.input_tokens or self.output_tokens or self.total_tokens)


NO_USAGE = TokenUsage.model_construct()
"""Zero usage, shared (immutable); built without validation, so that no validator is built at
import (see `FrozenModel`)."""


def _add_costs(left: TokenUsage, right: TokenUsage) -> Decimal | None:
    if left.cost is not None and right.cost is not None:
        return left.cost + right.cost
    # A part that used no tokens cost nothing, so `sum(..., TokenUsage())` keeps a known cost.
    if left.cost is None and not left._used():
        return right.cost
    if right.cost is None and not right._used():
        return left.cost
    return None


class ChatResponse(FrozenModel):
    """One complete model answer, identical whether it was streamed or not."""

    ai_message: AiMessage
    token_usage: TokenUsage | None = None
    finish_reason: FinishReason | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Provider metadata the contract does not model (id, model, created, …)."""
