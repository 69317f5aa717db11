"""Admission control: at most `limit` requests of one model in flight, the others waiting their
turn, in order, before they reach httpx.

httpx's connection pool (httpcore) rescans every queued request against every connection on each
pool event, so thousands of requests started together cost the event loop O(N² x connections)
before the first one is sent (at 10,000 concurrent conversations, none reached the server in
minutes). Admitting no more requests than the pool has connections keeps its queue empty; the
wait moves here, to a FIFO whose cost per waiter is O(1), cancellation included: a cancelled
waiter leaves the queue at once, so it holds the live waiters only, however many come and go
while every slot is held.

A gate belongs to one event loop, as its waiters' futures do; the shell keeps one per loop (with
the async client it created for that loop, closed when the loop shuts down).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Any

import httpx

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "SHARD_CONNECTIONS",
    "AsyncGate",
    "LoopClients",
    "SyncGate",
    "close_with_loop",
    "pool_size",
]

DEFAULT_MAX_CONNECTIONS = 100
"""Connections the shell's own clients have, all kept alive (httpx keeps 20 of 100 by default,
so a busy loop opened a new connection for nearly every request)."""

SHARD_CONNECTIONS = 16
"""Connections per async client the shell creates: `max_connections` is spread over several
clients of this size. httpcore's pool does work quadratic in its number of connections on every
pool event (its clean-up pass counts all connections for each idle one), so one pool of 100
costs the loop several times what seven of 16 do for the same requests."""


class AsyncGate:
    """FIFO admission for one event loop: `acquire` waits for a slot, `release` hands it to the
    longest waiter (a slot freed never goes to a newcomer while others wait)."""

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        self._free = limit
        # An ordered dict rather than a deque: a cancelled waiter is removed in O(1).
        self._waiters: OrderedDict[asyncio.Future[None], None] = OrderedDict()

    async def acquire(self) -> float:
        """Take a slot; the seconds spent waiting for it."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return 0.0
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = None
        started = time.monotonic()
        try:
            await waiter
        except BaseException:
            # A cancelled waiter leaves the queue; one handed a slot just as it was cancelled
            # (`release` took it out already) passes the slot on.
            self._waiters.pop(waiter, None)
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise
        return time.monotonic() - started

    def release(self) -> None:
        """Give a slot back: to the longest waiter still waiting, else to the pool of free ones."""
        waiters = self._waiters
        while waiters:
            # A waiter cancelled but not yet resumed is still queued: skipped.
            waiter = waiters.popitem(last=False)[0]
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot (one cancelled leaves at once, as soon as its task runs)."""
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


class LoopClients:
    """The async clients of one event loop behind one admission gate.

    With a client passed in, that client alone. Otherwise `shards` clients of `SHARD_CONNECTIONS`
    connections, each created at first use and closed when the loop shuts down (or by `aclose`);
    a request admitted goes to the least loaded, so no pool holds more requests than connections.
    """

    __slots__ = ("_closers", "_make", "clients", "gate", "loads")

    def __init__(
        self,
        gate: AsyncGate,
        *,
        client: httpx.AsyncClient | None = None,
        make: Callable[[], httpx.AsyncClient] | None = None,
        shards: int = 1,
    ) -> None:
        self.gate = gate
        self._make = make
        self.clients: list[httpx.AsyncClient | None] = [client] if client else [None] * shards
        self.loads = [0] * len(self.clients)
        self._closers: list[Any] = []

    async def acquire(self) -> tuple[float, int]:
        """Wait for a slot: the seconds waited, and the index of the client to send through."""
        waited = await self.gate.acquire()
        loads = self.loads
        index = loads.index(min(loads)) if len(loads) > 1 else 0
        loads[index] += 1
        return waited, index

    def release(self, index: int) -> None:
        """Give back the slot `acquire` gave with `index`."""
        self.loads[index] -= 1
        self.gate.release()

    def client(self, index: int) -> httpx.AsyncClient:
        """The client at `index`, created now if it was not yet."""
        client = self.clients[index]
        if client is None:
            assert self._make is not None
            client = self.clients[index] = self._make()
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass  # read outside any loop: closed by `aclose` only
            else:
                self._closers.append(close_with_loop(client))
        return client

    async def aclose(self) -> None:
        """Close the clients created here."""
        if self._make is None:
            return
        for closer in self._closers:
            await closer.aclose()
        for client in self.clients:
            if client is not None:
                await client.aclose()  # closing twice is harmless
        self._closers = []


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
