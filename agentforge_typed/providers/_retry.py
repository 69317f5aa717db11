"""When to retry a provider request, and how long to wait first.

Pure policy, no I/O: the HTTP shell asks `RetryPolicy` whether a failure is transient and how long
to sleep, and does the sleeping itself (injectable, so tests record the waits instead of waiting).
"""

from __future__ import annotations

import math
import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx

__all__ = ["RETRYABLE_STATUS_CODES", "RetryPolicy", "retry_after"]

RETRYABLE_STATUS_CODES = frozenset({408, 409, 429})
"""Retryable below 500: request timeout, conflict (lock contention), rate limit. Every 5xx is too."""

_TRANSIENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, honouring the server's `Retry-After`.

    The n-th retry (n from 0) waits `min(initial_delay * 2**n, max_delay)`, shortened by up to
    `jitter` of itself at random so that clients do not retry in lockstep. A `retry-after-ms` or
    `Retry-After` header (seconds or an HTTP date) replaces that computed wait, capped at
    `max_retry_after`.
    """

    max_retries: int = 2
    """Retries after the first attempt; `0` disables retrying."""
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    random: Callable[[], float] = field(default=_random.random, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def is_retryable_status(self, status_code: int) -> bool:
        """Whether an HTTP status signals a transient failure: 408, 409, 429 or any 5xx (incl. 529)."""
        return status_code in RETRYABLE_STATUS_CODES or status_code >= 500

    def is_retryable_response(self, response: httpx.Response) -> bool:
        """Whether to retry after `response`; the server's `x-should-retry` header has the last word."""
        should_retry = response.headers.get("x-should-retry")
        if should_retry == "true":
            return True
        if should_retry == "false":
            return False
        return self.is_retryable_status(response.status_code)

    def is_retryable_error(self, exc: BaseException) -> bool:
        """Whether a transport error is transient: connect/read/write errors, timeouts, dropped connections."""
        return isinstance(exc, _TRANSIENT_ERRORS)

    def delay(self, retries_taken: int, headers: httpx.Headers | None = None) -> float:
        """Seconds to wait before retry number `retries_taken + 1`."""
        if headers is not None:
            server_delay = retry_after(headers)
            if server_delay is not None:
                return min(server_delay, self.max_retry_after)
        backoff = min(self.initial_delay * 2.0**retries_taken, self.max_delay)
        return backoff * (1.0 - self.jitter * self.random())


def retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """The wait the server asked for, in seconds: `retry-after-ms`, else `Retry-After` as seconds or
    as an HTTP date; `None` when absent or unparsable."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return max(number, 0.0) if math.isfinite(number) else None
