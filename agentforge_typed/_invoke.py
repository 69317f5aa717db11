"""Call a user's handler — sync or async — from sync or async code, under an optional timeout.

Sync handlers never block an event loop (they run in a worker thread under `ainvoke`); async
handlers called from blocking code get an event loop of their own. A timed-out sync handler
cannot be killed: its thread is abandoned (a daemon thread, so it never blocks interpreter exit).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["HandlerTimeoutError", "ainvoke", "invoke", "is_async_callable"]

T = TypeVar("T")


class HandlerTimeoutError(Exception):
    """The handler did not finish within its timeout (kept apart from a `TimeoutError` the handler
    itself raises, which is an ordinary failure)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g} seconds")
        self.timeout = timeout


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine (async functions, partials, async `__call__`)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - we need the bound method, not callable()
    )


def invoke(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call `fn(*args)` blocking; an async `fn` runs to completion on a private event loop."""
    if is_async_callable(fn):
        return _run_coroutine(_with_timeout(fn(*args), timeout))
    if timeout is None:
        result = fn(*args)
        return _run_coroutine(result) if inspect.isawaitable(result) else result
    return _run_in_daemon_thread(lambda: invoke(fn, *args), timeout)


async def ainvoke(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call `fn(*args)` without blocking the running loop: sync `fn` runs in a worker thread."""
    if is_async_callable(fn):
        return await _with_timeout(fn(*args), timeout)

    async def in_thread() -> Any:
        result = await asyncio.to_thread(fn, *args)
        return await result if inspect.isawaitable(result) else result

    return await _with_timeout(in_thread(), timeout)


async def _with_timeout(awaitable: Awaitable[T], timeout: float | None) -> T:
    if timeout is None:
        return await awaitable
    # `asyncio.wait`, not `wait_for`: a `TimeoutError` the handler raises must stay its own.
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.wait({task})  # let the handler run its cleanup, as `wait_for` would
        raise HandlerTimeoutError(timeout)
    return task.result()


def _run_coroutine(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    # Called from inside a running loop (blocking code under async code): that loop is busy
    # waiting for us, so the coroutine gets a loop on another thread.
    return _run_in_daemon_thread(lambda: asyncio.run(main()), None)


def _run_in_daemon_thread(fn: Callable[[], T], timeout: float | None) -> T:
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the waiting caller
            future.set_exception(exc)

    context = contextvars.copy_context()
    threading.Thread(
        target=context.run, args=(target,), daemon=True, name="agentforge-handler"
    ).start()
    # `wait`, not `result(timeout)`: a `TimeoutError` the handler raises must stay its own.
    concurrent.futures.wait([future], timeout)
    if not future.done():
        assert timeout is not None
        raise HandlerTimeoutError(timeout)
    return future.result()
