"""Call a user's handler — sync or async — from sync or async code, under an optional timeout.

The one implementation behind every tool kind (`Tool`, `SchemaTool`). Sync handlers never block
an event loop (they run in a worker thread under `ainvoke`); async handlers called from blocking
code get an event loop of their own (`run_sync`'s policy: on a thread when one is already running
here).

`timeout` bounds the call from the caller's side. A timed-out async handler is cancelled and gets
`CANCEL_GRACE` seconds for its cleanup; one that ignores the cancellation is abandoned (left to
finish on its loop). An async handler that blocks its event loop (`time.sleep` in `async def`)
cannot be interrupted at all, but when it finishes past its limit its result is discarded: the
call timed out all the same. A timed-out sync handler cannot be killed: its thread is abandoned (a
daemon thread, so it never blocks interpreter exit). The raised `HandlerTimeoutError` says what
was abandoned, so that the caller can log it.

The async paths import `asyncio` where they run (it is loaded by then): a blocking program never
pays for importing it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from types import GeneratorType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._sync import run_sync, start_daemon_thread

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "CANCEL_GRACE",
    "NEVER_AWAITABLE",
    "HandlerTimeoutError",
    "ainvoke",
    "invoke",
    "is_async_callable",
    "is_awaitable",
]

T = TypeVar("T")

_NO_KWARGS: Mapping[str, Any] = {}

CANCEL_GRACE = 0.25
"""Seconds a timed-out async handler gets, once cancelled, to finish before it is abandoned."""


class HandlerTimeoutError(Exception):
    """The handler did not finish within its timeout (kept apart from a `TimeoutError` the handler
    itself raises, which is an ordinary failure).

    Attributes:
        timeout: The limit, in seconds.
        abandoned: Whether the handler still runs with nobody waiting for it.
        left_running: What was abandoned: `"thread"` (a sync handler's worker thread, or the
            thread running an async handler's loop), `"task"` (an async handler that ignored its
            cancellation), or `None`.
    """

    def __init__(
        self, timeout: float, *, abandoned: bool | Literal["thread", "task"] = False
    ) -> None:
        super().__init__(f"timed out after {timeout:g} seconds")
        self.timeout = timeout
        self.left_running: Literal["thread", "task"] | None = (
            "thread" if abandoned is True else abandoned or None
        )
        self.abandoned = self.left_running is not None


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine (async functions, partials, async `__call__`)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - we need the bound method, not callable()
    )


def is_awaitable(value: Any) -> bool:
    """Whether a sync handler returned an awaitable, which is then awaited (`inspect.isawaitable`,
    answered from a per-type cache first: it is asked after every call of a sync tool)."""
    cls = value.__class__
    maybe = _MAYBE_AWAITABLE.get(cls)
    if maybe is None:
        if len(_MAYBE_AWAITABLE) > 4096:  # classes made on the fly must not grow it forever
            _MAYBE_AWAITABLE.clear()
        maybe = _MAYBE_AWAITABLE[cls] = cls is GeneratorType or issubclass(cls, Awaitable)
    return maybe and inspect.isawaitable(value)


_MAYBE_AWAITABLE: dict[type, bool] = {}

NEVER_AWAITABLE: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), dict, list, tuple, bytes}
)
"""Classes whose instances are never awaitable: what most tools return, ruled out without a call."""


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
        if timeout is None:
            return run_sync(lambda: fn(*args, **kwargs))
        # On a thread of its own, so that a handler that ignores its cancellation cannot hold
        # us: its loop would wait for it when it shuts down.
        limit = timeout + CANCEL_GRACE
        factory = functools.partial(_with_timeout, fn(*args, **kwargs), timeout)
        return _wait_thread(start_daemon_thread(run_sync, (factory,), _NO_KWARGS), limit, timeout)
    if timeout is None:
        result = fn(*args, **kwargs)
        return run_sync(lambda: result) if is_awaitable(result) else result
    future = start_daemon_thread(invoke, (fn, args, kwargs), {"is_async": False})
    return _wait_thread(future, timeout, timeout)


def _wait_thread(future: concurrent.futures.Future[T], limit: float, timeout: float) -> T:
    # `wait`, not `result(timeout)`: a `TimeoutError` the handler raises must stay its own.
    concurrent.futures.wait([future], limit)
    if not future.done():
        raise HandlerTimeoutError(timeout, abandoned="thread")
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
    import asyncio

    if timeout is None:
        returned, result = await asyncio.to_thread(_settled_call, fn, args, kwargs)
        if not returned:
            raise result
        return await result if is_awaitable(result) else result
    loop = asyncio.get_running_loop()
    started = loop.time()
    # A daemon thread, not `to_thread`: the loop's executor would wait for an abandoned handler
    # when the loop shuts down.
    future = asyncio.wrap_future(start_daemon_thread(_settled_call, (fn, args, kwargs), _NO_KWARGS))
    done, _ = await asyncio.wait({future}, timeout=timeout)
    if not done:
        raise HandlerTimeoutError(timeout, abandoned="thread")
    returned, result = future.result()
    if not returned:
        raise result
    if not is_awaitable(result):
        return result
    # Whatever the sync part left of the limit bounds the awaitable it returned.
    return await _with_timeout(result, max(timeout - (loop.time() - started), 0.0), timeout)


async def _with_timeout(
    awaitable: Awaitable[T], timeout: float | None, reported: float | None = None
) -> T:
    if timeout is None:
        return await awaitable
    reported = reported if reported is not None else timeout
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    task = asyncio.ensure_future(_settled(awaitable, loop))
    try:
        # `asyncio.wait`, not `wait_for`: a `TimeoutError` the handler raises must stay its own.
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE)  # its cleanup
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        _ABANDONED.add(task)
        task.add_done_callback(_ABANDONED.discard)
        raise HandlerTimeoutError(reported, abandoned="task")
    if task.cancelled():
        raise HandlerTimeoutError(reported)
    finished, ok, value = task.result()
    if finished > deadline:
        # It blocked the loop past its limit, so nothing could interrupt it: late is timed out.
        raise HandlerTimeoutError(reported)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _settled_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[bool, Any]:
    """`(True, value)` or `(False, exception)`: an exception crosses to the awaiting coroutine as
    a value, since an asyncio future holding a `GeneratorExit` closes the coroutines awaiting it
    instead of raising it in them."""
    try:
        return True, fn(*args, **kwargs)
    except BaseException as exc:
        return False, exc


_ABANDONED: set[asyncio.Future[Any]] = set()
"""Tasks of handlers that ignored their cancellation: held until they end, as the loop does not."""


async def _settled(
    awaitable: Awaitable[Any], loop: asyncio.AbstractEventLoop
) -> tuple[float, bool, Any]:
    """`(finish time, whether it returned, value or exception)`: even a `SystemExit` is returned,
    as raised out of a task it would stop the event loop, and a `GeneratorExit` would close the
    awaiting coroutines (`_with_timeout` re-raises it in the caller, where the tool's containment
    applies)."""
    import asyncio

    try:
        value = await awaitable
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise
    except BaseException as exc:
        return loop.time(), False, exc
    return loop.time(), True, value
