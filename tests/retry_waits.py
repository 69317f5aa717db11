"""How an HTTP model waits between retries, recorded by a test (`retry_waits`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["waiting"]

M = TypeVar("M")


def waiting(
    model: M,
    sleep: Callable[[float], Any] | None = None,
    asleep: Callable[[float], Awaitable[None]] | None = None,
) -> M:
    """`model` (any HTTP provider's, or a `FallbackModel` of them), its retries waiting through
    `sleep` and `asleep`."""
    each: Any
    for each in getattr(model, "models", (model,)):
        each.retry_waits(sleep, asleep)
    return model
