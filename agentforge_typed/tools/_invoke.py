"""Call a user's handler — sync or async — from sync or async code, under an optional timeout.

The one implementation behind every tool kind (`Tool`, `SchemaTool`). Sync handlers never block
an event loop (they run in a worker thread under `ainvoke`); async handlers called from blocking
code get an event loop of their own (`run_sync`'s policy: on a thread when one is already running
here). A timed-out
async handler is cancelled and may run its cleanup; a timed-out sync handler cannot be killed: its
thread is abandoned (a daemon thread, so it never blocks interpreter exit), which the raised
`HandlerTimeoutError` says (`abandoned`) so that the caller can log it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .._sync import run_sync, start_daemon_thread

__all__ = ["HandlerTimeoutError", "ainvoke", "invoke", "is_async_callable"]

T = TypeVar("T")

_NO_KWARGS: Mapping[str, Any] = {}


class HandlerTimeoutError(Exception):
    """The handler did not finish within its timeout (kept apart from a `TimeoutError` the handler
    itself raises, which is an ordinary failure).

    Attributes:
        timeout: The limit, in seconds.
        abandoned: Whether the handler still runs on a worker thread nobody waits for (a sync
            handler; an async one is cancelled instead).
    """

    def __init__(self, timeout: float, *, abandoned: bool = False) -> None:
        super().__init__(f"timed out after {timeout:g} seconds")
        self.timeout = timeout
        self.abandoned = abandoned


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine (async functions, partials, async `__call__`)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - we need the bound method, not callable()
    )


def invoke(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] = _NO_KWARGS,
    *,
    timeout: float | None = None,
    is_async: bool | None = None,
) -> Any:
    """Call `fn(*args, **kwargs)` blocking; an async `fn` runs to completion on a private loop.

    Args:
        fn: The handler; a sync one may also return an awaitable, which is awaited.
        args: Positional arguments.
        kwargs: Keyword arguments (passed as they are: no name is taken by `invoke` itself).
        timeout: Seconds before `HandlerTimeoutError`; `None` for no limit.
        is_async: Whether `fn` is async, when the caller already knows (else detected).

    Raises:
        HandlerTimeoutError: The handler ran past `timeout`.
    """
    if is_async if is_async is not None else is_async_callable(fn):
        return run_sync(lambda: _with_timeout(fn(*args, **kwargs), timeout))
    if timeout is None:
        result = fn(*args, **kwargs)
        return run_sync(lambda: result) if inspect.isawaitable(result) else result
    future = start_daemon_thread(invoke, (fn, args, kwargs), {"is_async": False})
    # `wait`, not `result(timeout)`: a `TimeoutError` the handler raises must stay its own.
    concurrent.futures.wait([future], timeout)
    if not future.done():
        raise HandlerTimeoutError(timeout, abandoned=True)
    return future.result()


async def ainvoke(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] = _NO_KWARGS,
    *,
    timeout: float | None = None,
    is_async: bool | None = None,
) -> Any:
    """Call `fn(*args, **kwargs)` without blocking the running loop: a sync `fn` runs in a
    worker thread (an awaitable it returns is awaited here). Arguments as for `invoke`.

    Raises:
        HandlerTimeoutError: The handler ran past `timeout`.
    """
    if is_async if is_async is not None else is_async_callable(fn):
        return await _with_timeout(fn(*args, **kwargs), timeout)
    if timeout is None:
        result = await asyncio.to_thread(fn, *args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    loop = asyncio.get_running_loop()
    started = loop.time()
    # A daemon thread, not `to_thread`: the loop's executor would wait for an abandoned handler
    # when the loop shuts down.
    future = start_daemon_thread(fn, args, kwargs)
    done, _ = await asyncio.wait({asyncio.wrap_future(future)}, timeout=timeout)
    if not done:
        raise HandlerTimeoutError(timeout, abandoned=True)
    result = future.result()
    if not inspect.isawaitable(result):
        return result
    # Whatever the sync part left of the limit bounds the awaitable it returned.
    return await _with_timeout(result, max(timeout - (loop.time() - started), 0.0), timeout)


async def _with_timeout(
    awaitable: Awaitable[T], timeout: float | None, reported: float | None = None
) -> T:
    if timeout is None:
        return await awaitable
    # `asyncio.wait`, not `wait_for`: a `TimeoutError` the handler raises must stay its own.
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.wait({task})  # let the handler run its cleanup, as `wait_for` would
        raise HandlerTimeoutError(reported if reported is not None else timeout)
    return task.result()
