"""The one handler-calling implementation (`_invoke`) and the shared result builders, as every
tool kind sees them: keyword arguments, timeouts (abandoned threads, cancellation), contexts."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from agentforge_typed import SchemaTool, ToolCall, ToolContext, ToolSpecification, tool
from agentforge_typed.tools._invoke import HandlerTimeoutError, ainvoke, invoke

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def call(name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


def context(name: str) -> ToolContext[None]:
    return ToolContext(deps=None, tool_call_id="call_1", tool_name=name)


def echo(first: str, *, timeout: float, retries: int = 0) -> tuple[str, float, int]:
    return first, timeout, retries


async def aecho(first: str, *, timeout: float) -> tuple[str, float]:
    await asyncio.sleep(0)
    return first, timeout


# --- arguments ---------------------------------------------------------------------------------


def test_keyword_arguments_never_lose_a_name_to_invoke() -> None:
    assert invoke(echo, ("a",), {"timeout": 7.0}) == ("a", 7.0, 0)
    assert invoke(echo, ("a",), {"timeout": 7.0, "retries": 2}, timeout=5) == ("a", 7.0, 2)
    assert invoke(aecho, ("b",), {"timeout": 8.0}, timeout=5) == ("b", 8.0)


async def test_keyword_arguments_under_ainvoke() -> None:
    assert await ainvoke(echo, ("a",), {"timeout": 7.0}) == ("a", 7.0, 0)
    assert await ainvoke(echo, ("a",), {"timeout": 7.0}, timeout=5) == ("a", 7.0, 0)
    assert await ainvoke(aecho, ("b",), {"timeout": 8.0}, timeout=5) == ("b", 8.0)


def test_a_tool_parameter_named_timeout_under_a_tool_timeout() -> None:
    @tool(timeout=5)
    def wait(timeout: float, retries: int = 1) -> str:
        return f"{timeout}/{retries}"

    assert wait.execute(call("wait", '{"timeout": 0.5, "retries": 3}')).text == "0.5/3"


async def test_a_tool_parameter_named_timeout_under_aexecute() -> None:
    @tool(timeout=5)
    async def wait(timeout: float) -> str:
        return f"{timeout}"

    assert (await wait.aexecute(call("wait", '{"timeout": 0.5}'))).text == "0.5"


# --- timeouts ----------------------------------------------------------------------------------


def test_a_timed_out_sync_handler_is_reported_abandoned() -> None:
    with pytest.raises(HandlerTimeoutError) as raised:
        invoke(time.sleep, (1.0,), timeout=0.05)
    assert (raised.value.timeout, raised.value.abandoned) == (0.05, True)
    assert raised.value.left_running == "thread"
    assert str(raised.value) == "timed out after 0.05 seconds"


def test_a_timed_out_async_handler_is_cancelled_not_abandoned() -> None:
    cancelled: list[bool] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(HandlerTimeoutError) as raised:
        invoke(slow, timeout=0.05)
    assert raised.value.abandoned is False
    assert cancelled == [True]


async def test_ainvoke_timeouts_say_whether_a_thread_is_abandoned() -> None:
    with pytest.raises(HandlerTimeoutError) as sync_raised:
        await ainvoke(time.sleep, (1.0,), timeout=0.05)
    with pytest.raises(HandlerTimeoutError) as async_raised:
        await ainvoke(asyncio.sleep, (5,), timeout=0.05)
    assert (sync_raised.value.abandoned, async_raised.value.abandoned) == (True, False)


def test_an_abandoned_sync_handler_does_not_hold_up_the_loops_shutdown() -> None:
    # A worker thread of the loop's executor would be joined when `asyncio.run` ends.
    started = time.monotonic()
    with pytest.raises(HandlerTimeoutError):
        asyncio.run(ainvoke(time.sleep, (2.0,), timeout=0.05))
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
async def test_a_timeout_error_raised_by_the_handler_stays_its_own(handler_kind: str) -> None:
    def sync_fail() -> None:
        raise TimeoutError("upstream")

    async def async_fail() -> None:
        raise TimeoutError("upstream")

    handler = sync_fail if handler_kind == "sync" else async_fail
    with pytest.raises(TimeoutError, match="upstream") as raised:
        await ainvoke(handler, timeout=5)
    assert not isinstance(raised.value, HandlerTimeoutError)
    with pytest.raises(TimeoutError, match="upstream") as raised:
        await asyncio.to_thread(invoke, handler, timeout=5)
    assert not isinstance(raised.value, HandlerTimeoutError)


async def test_an_awaitable_returned_by_a_sync_handler_shares_the_timeout() -> None:
    def start(delay: float) -> Awaitable[str]:
        time.sleep(0.02)
        return asyncio.sleep(delay, result="late")

    assert await ainvoke(start, (0,), timeout=5) == "late"
    with pytest.raises(HandlerTimeoutError) as raised:
        await ainvoke(start, (5,), timeout=0.1)
    # The sync part finished: what timed out is the awaitable, which was cancelled.
    assert (raised.value.timeout, raised.value.abandoned) == (0.1, False)


def test_an_awaitable_returned_by_a_sync_handler_runs_from_blocking_code() -> None:
    assert invoke(lambda: asyncio.sleep(0, result="ran")) == "ran"
    assert invoke(lambda: asyncio.sleep(0, result="ran"), timeout=5) == "ran"


def test_the_caller_may_say_whether_the_handler_is_async() -> None:
    assert invoke(aecho, ("c",), {"timeout": 1.0}, is_async=True) == ("c", 1.0)
    assert invoke(echo, ("c",), {"timeout": 1.0}, is_async=False) == ("c", 1.0, 0)


# --- threads and contexts ----------------------------------------------------------------------


def read_request_id() -> tuple[str, bool]:
    return REQUEST_ID.get(), threading.current_thread().daemon


def test_worker_threads_see_the_callers_context() -> None:
    token = REQUEST_ID.set("req-1")
    try:
        assert invoke(read_request_id, timeout=5) == ("req-1", True)
    finally:
        REQUEST_ID.reset(token)


async def test_worker_threads_see_the_callers_context_under_ainvoke() -> None:
    token = REQUEST_ID.set("req-2")
    try:
        assert (await ainvoke(read_request_id))[0] == "req-2"
        assert await ainvoke(read_request_id, timeout=5) == ("req-2", True)
    finally:
        REQUEST_ID.reset(token)


async def test_async_handler_from_blocking_code_inside_a_running_loop() -> None:
    loop = asyncio.get_running_loop()

    async def where() -> bool:
        return asyncio.get_running_loop() is loop

    assert invoke(where) is False  # a loop of its own, on another thread
    assert invoke(where, timeout=5) is False


# --- every tool kind reports alike ---------------------------------------------------------------

SPEC = ToolSpecification(
    name="nap",
    description="Sleep.",
    parameters={"type": "object", "properties": {"seconds": {"type": "number"}}},
)


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


def test_timeouts_read_alike_and_carry_the_timeout_error(caplog: pytest.LogCaptureFixture) -> None:
    typed = tool(timeout=0.05)(nap)
    schema = SchemaTool(SPEC, lambda arguments: nap(arguments["seconds"]), timeout=0.05)
    with caplog.at_level(logging.WARNING, logger="agentforge_typed"):
        results = [
            typed.execute(call("nap", '{"seconds": 1}')),
            schema.execute(call("nap", '{"seconds": 1}'), context("nap")),
        ]
    for result in results:
        assert (result.text, result.error_kind) == (
            "Tool `nap` timed out after 0.05 seconds.",
            "timeout",
        )
        assert isinstance(result.exception, HandlerTimeoutError)
    abandoned = [r for r in caplog.records if "worker thread is abandoned" in r.getMessage()]
    assert len(abandoned) == 2


async def test_cancelled_async_handlers_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def slow(arguments: dict[str, Any]) -> None:
        await asyncio.sleep(5)

    with caplog.at_level(logging.WARNING, logger="agentforge_typed"):
        result = await SchemaTool(SPEC, slow, timeout=0.05).aexecute(
            call("nap", '{"seconds": 1}'), context("nap")
        )
    assert result.error_kind == "timeout"
    assert not caplog.records


@pytest.mark.parametrize("execute", ["execute", "aexecute"])
async def test_a_schema_tool_result_that_cannot_be_converted_is_an_unreadable_result(
    execute: str,
) -> None:
    schema = SchemaTool(SPEC, lambda arguments: object())
    if execute == "execute":
        result = schema.execute(call("nap", "{}"), context("nap"))
    else:
        result = await schema.aexecute(call("nap", "{}"), context("nap"))
    assert result.error_kind == "unreadable_result"
    assert result.text.startswith(
        "Tool `nap` ran, but its result could not be read (PydanticSerializationError: "
    )
