"""Shared pydantic building blocks for the immutable contract types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict

__all__ = ["FrozenModel", "FrozenSeq"]

T = TypeVar("T")

FrozenSeq = Annotated[Sequence[T], AfterValidator(tuple)]
"""Accepts any sequence (a list is fine for callers and mypy) and stores an immutable tuple."""


class FrozenModel(BaseModel):
    """Base of every contract type: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
