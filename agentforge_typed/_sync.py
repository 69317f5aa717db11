"""Running async code from blocking code: the one place that asks "is an event loop running here,
and what then".

The policy, for every caller (async tool handlers under `execute`, async `FunctionModel`
functions under `chat`, anything else a blocking API has to await): with no event loop running in
this thread, the awaitable runs under `asyncio.run`; with one running (blocking code called from
async code), that loop is busy waiting for us, so the awaitable runs to completion on a fresh loop
in a worker thread, and this thread blocks until it is done. It never raises for a running loop.

`asyncio` is imported only by code that runs a loop: a blocking program never pays for it.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ["run_sync", "running_loop", "start_daemon_thread"]

T = TypeVar("T")


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or `None`."""
    loaded = sys.modules.get("asyncio")
    if loaded is None:  # nothing imported asyncio: no loop can be running
        return None
    try:
        return loaded.get_running_loop()  # type: ignore[no-any-return]
    except RuntimeError:
        return None


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the awaitable `factory()` returns to completion, blocking (see the module's policy).

    `factory` is called on the loop that runs it, so an awaitable bound to a loop is made there.
    """

    import asyncio

    async def main() -> T:
        return await factory()

    if running_loop() is None:
        return asyncio.run(main())
    # `main()` is created here but first run on the worker's loop: a coroutine is not bound yet.
    future: concurrent.futures.Future[T] = start_daemon_thread(asyncio.run, (main(),), {})
    return future.result()


def start_daemon_thread(
    fn: Callable[..., T], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> concurrent.futures.Future[T]:
    """Run `fn` in a daemon thread, in a copy of this context: a thread that timed out can be
    abandoned without blocking interpreter exit."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn, *args, **kwargs))
        except BaseException as exc:  # handed to the waiting caller
            future.set_exception(exc)

    threading.Thread(target=run, name="agentforge-handler", daemon=True).start()
    return future
