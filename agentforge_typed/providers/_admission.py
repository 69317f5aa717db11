"""Admission control: at most `limit` requests of one model in flight, the others waiting their
turn, in order, before they reach httpx.

httpx's connection pool (httpcore) rescans every queued request against every connection on each
pool event, so thousands of requests started together cost the event loop O(N² x connections)
before the first one is sent (at 10,000 concurrent conversations, none reached the server in
minutes). Admitting no more requests than the pool has connections keeps its queue empty; the
wait moves here, to a FIFO whose cost per waiter is O(1), cancellation included.

A gate belongs to one event loop, as its waiters' futures do; the shell keeps one per loop (with
the async client it created for that loop, closed when the loop shuts down).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

import httpx

__all__ = ["DEFAULT_MAX_CONNECTIONS", "AsyncGate", "SyncGate", "close_with_loop", "pool_size"]

DEFAULT_MAX_CONNECTIONS = 100
"""Connections of a client the shell creates, all kept alive (httpx keeps 20 of 100 by default,
so a busy loop opened a new connection for nearly every request)."""


class AsyncGate:
    """FIFO admission for one event loop: `acquire` waits for a slot, `release` hands it to the
    longest waiter (a slot freed never goes to a newcomer while others wait)."""

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> float:
        """Take a slot; the seconds spent waiting for it."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return 0.0
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        started = time.monotonic()
        try:
            await waiter
        except BaseException:
            # A cancelled waiter stays in the queue (removing it would cost O(N)); `release`
            # skips it. One handed a slot just as it was cancelled passes the slot on.
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise
        return time.monotonic() - started

    def release(self) -> None:
        """Give a slot back: to the longest waiter still waiting, else to the pool of free ones."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot (cancelled ones not yet skipped included)."""
        return len(self._waiters)


class SyncGate:
    """Admission for blocking calls from several threads: at most `limit` at once (threads wake
    in the order they began to wait)."""

    __slots__ = ("_semaphore",)

    def __init__(self, limit: int) -> None:
        self._semaphore = threading.Semaphore(limit)

    def acquire(self) -> float:
        """Take a slot; the seconds spent waiting for it."""
        if self._semaphore.acquire(blocking=False):
            return 0.0
        started = time.monotonic()
        self._semaphore.acquire()
        return time.monotonic() - started

    def release(self) -> None:
        """Give a slot back."""
        self._semaphore.release()


def pool_size(client: httpx.Client | httpx.AsyncClient) -> int | None:
    """The connection limit of a client's pool, where it can be read (httpx's default transport);
    `None` for a transport of another kind, or an unbounded pool."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    size = getattr(pool, "_max_connections", None)
    return size if isinstance(size, int) and size > 0 else None


async def _closing(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()


def close_with_loop(client: httpx.AsyncClient) -> Any:
    """Have the running event loop close `client` when it shuts down (`asyncio.run` does so after
    the main coroutine ends), so that no connection outlives the loop its sockets belong to.

    Returns the handle to keep (the loop holds it weakly); closing it early is `await
    handle.aclose()`.
    """
    # An async generator first iterated under a running loop is registered with that loop, which
    # closes every unfinished one at shutdown (`loop.shutdown_asyncgens`): its `finally` runs
    # there, on the right loop. Its first step runs here, synchronously, as it awaits nothing.
    handle = _closing(client)
    step = handle.asend(None)
    try:
        step.send(None)
    except StopIteration:
        pass
    return handle
