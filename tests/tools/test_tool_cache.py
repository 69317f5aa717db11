"""`@tool(cache=...)`: a tool's results kept by arguments and conversation, hits marked, identical
calls in flight run once, every misuse refused at decoration, a cache that fails contained."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from loop_drivers import DRIVERS, drive
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import AfterValidator

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MemoryCache,
    ToolAnnotations,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolResultMessage,
    ToolService,
    tool,
)
from agentforge_typed.durable._payloads import ToolActivityResult

READ_ONLY = ToolAnnotations(read_only=True)


def calling(*arguments: str, name: str = "lookup") -> FunctionModel:
    """A model that makes one call per round, with each of `arguments` in turn, then answers."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        done = sum(isinstance(m, ToolResultMessage) for m in messages)
        if done < len(arguments):
            return AiMessage(
                tool_calls=[ToolCall(id=f"c{done}", name=name, arguments=arguments[done])]
            )
        return AiMessage(text="done")

    return FunctionModel(answer)


def counted(cache: Any = 60, **options: Any) -> tuple[Any, list[int]]:
    runs: list[int] = []
    options.setdefault("annotations", READ_ONLY)

    @tool(cache=cache, **options)
    def lookup(x: int, y: int = 0) -> int:
        """Look it up."""
        runs.append(x)
        return x * 10 + y

    return lookup, runs


def call(arguments: str, id: str = "c") -> ToolCall:
    return ToolCall(id=id, name="lookup", arguments=arguments)


def in_conversation(conversation: str | None = "one", deps: Any = None) -> ToolContext[Any]:
    return ToolContext(deps, "c", "lookup", conversation_id=conversation)


# -- hits --------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_identical_call_is_answered_from_the_cache_under_every_driver(driver: str) -> None:
    lookup, runs = counted()
    service = ToolService(tools=[lookup])
    model = calling('{"x": 1}', '{"y": 0, "x": 1}', '{"x": 2}')
    result = drive(driver, service, model, "go", conversation_id="one")
    assert runs == [1, 2]  # the same arguments in another order are the same call
    assert [e.cached for e in result.tool_executions] == [False, True, False]
    assert [e.result.value for e in result.tool_executions] == [10, 10, 20]
    assert [m.text for m in result.messages if isinstance(m, ToolResultMessage)] == [
        "10",
        "10",
        "20",
    ]
    # The next run of the conversation is served too.
    again = drive(driver, service, calling('{"x": 2}'), "go", conversation_id="one")
    assert runs == [1, 2] and again.tool_executions[0].cached


def test_a_hit_carries_the_repairs_of_its_own_call() -> None:
    lookup, runs = counted()
    lookup.execute(call('{"x": 1}'), in_conversation())
    hit = lookup.execute(call('{"x": 1, "z": 3}'), in_conversation())
    assert hit.is_error  # an unknown argument is an error, never a hit
    lenient, runs = counted(extra_arguments="ignore")
    lenient.execute(call('{"x": 1}'), in_conversation())
    hit = lenient.execute(call('{"x": 1, "z": 3}'), in_conversation())
    assert hit.cached and hit.repairs and runs == [1]
    assert not lenient.execute(call('{"x": 1}', "d"), in_conversation()).repairs


def test_conversations_never_share_results_unless_the_tool_says_they_are_shared() -> None:
    lookup, runs = counted()
    assert not lookup.execute(call('{"x": 1}'), in_conversation("one")).cached
    assert not lookup.execute(call('{"x": 1}'), in_conversation("two")).cached
    assert lookup.execute(call('{"x": 1}'), in_conversation("two")).cached
    assert runs == [1, 1]
    shared, runs = counted(cache_shared=True)
    shared.execute(call('{"x": 1}'), in_conversation("one"))
    assert shared.execute(call('{"x": 1}'), in_conversation("two")).cached
    assert shared.execute(call('{"x": 1}')).cached  # outside a run too
    assert runs == [1]


def test_outside_a_conversation_a_result_that_is_not_shared_is_not_kept() -> None:
    lookup, runs = counted()
    lookup.execute(call('{"x": 1}'))
    assert not lookup.execute(call('{"x": 1}')).cached
    assert not asyncio.run(lookup.aexecute(call('{"x": 1}'))).cached
    assert runs == [1, 1, 1]


@dataclass
class User:
    cache_key: Any


def test_the_deps_cache_key_is_part_of_the_key() -> None:
    lookup, runs = counted()
    lookup.execute(call('{"x": 1}'), in_conversation(deps=User("ann")))
    assert not lookup.execute(call('{"x": 1}'), in_conversation(deps=User("bob"))).cached
    assert lookup.execute(call('{"x": 1}'), in_conversation(deps=User("bob"))).cached
    assert runs == [1, 1]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_deps_whose_cache_key_is_not_a_string_fail_the_call(asynchronous: bool) -> None:
    lookup, runs = counted()
    context = in_conversation(deps=User(42))
    result = (
        asyncio.run(lookup.aexecute(call('{"x": 1}'), context))
        if asynchronous
        else lookup.execute(call('{"x": 1}'), context)
    )
    assert result.is_error and result.error_kind == "execution"
    assert "deps.cache_key must be a str, not int" in result.text
    assert runs == []


def test_an_error_result_is_never_kept() -> None:
    failures = [True]

    @tool(cache=60, annotations=READ_ONLY)
    def flaky(x: int) -> int:
        if failures.pop(0) if failures else False:
            raise RuntimeError("down")
        return x

    first = flaky.execute(ToolCall(id="a", name="flaky", arguments='{"x": 1}'), in_conversation())
    assert first.is_error and not first.cached
    second = flaky.execute(ToolCall(id="b", name="flaky", arguments='{"x": 1}'), in_conversation())
    assert second.value == 1 and not second.cached


def test_a_kept_result_expires_after_its_ttl() -> None:
    lookup, runs = counted(cache=0.05)
    lookup.execute(call('{"x": 1}'), in_conversation())
    assert lookup.execute(call('{"x": 1}'), in_conversation()).cached
    time.sleep(0.08)
    assert not lookup.execute(call('{"x": 1}'), in_conversation()).cached
    assert runs == [1, 1]


def test_a_hit_is_recorded_on_the_span() -> None:
    lookup, _ = counted()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with af.instrument(provider):
        ToolService(tools=[lookup]).chat(calling('{"x": 1}', '{"x": 1}'), "go")
    cached = [
        (span.attributes or {}).get("agentforge.tool.cached")
        for span in exporter.get_finished_spans()
        if span.name.startswith("execute_tool")
    ]
    assert cached == [None, True]


def test_a_hit_keeps_its_mark_through_a_durable_activity() -> None:
    lookup, _ = counted()
    lookup.execute(call('{"x": 1}'), in_conversation())
    hit = lookup.execute(call('{"x": 1}'), in_conversation())
    travelled = ToolActivityResult.model_validate_json(
        ToolActivityResult.of(hit).model_dump_json()
    ).result()
    assert travelled.cached and travelled.value == 10
    fresh = ToolActivityResult.of(ToolExecutionResult("1", 1)).result()
    assert not fresh.cached


# -- bounded -------------------------------------------------------------------------------------


def test_a_memory_cache_keeps_at_most_max_entries_least_recently_used_first_out() -> None:
    cache = MemoryCache(max_entries=2)
    lookup, runs = counted(cache=cache)
    for x in (1, 2, 1, 3):  # 1 used again: 2 is the least recent when 3 comes
        lookup.execute(call(f'{{"x": {x}}}'), in_conversation())
    assert len(cache) == 2 and runs == [1, 2, 3]
    assert lookup.execute(call('{"x": 1}'), in_conversation()).cached
    assert not lookup.execute(call('{"x": 2}'), in_conversation()).cached


def test_a_memory_cache_keeps_at_most_max_bytes_and_never_a_larger_result() -> None:
    @tool(cache=MemoryCache(max_bytes=10), annotations=READ_ONLY)
    def text(s: str) -> str:
        return s

    assert text.cache is not None
    cache = text.cache
    assert isinstance(cache, MemoryCache)

    def execute(s: str) -> ToolExecutionResult:
        return text.execute(
            ToolCall(id="t", name="text", arguments=f'{{"s": "{s}"}}'), in_conversation()
        )

    execute("aaaaaaaaaa")  # exactly 10 bytes: kept
    assert cache.size == 10 and execute("aaaaaaaaaa").cached
    execute("bbbbb")  # makes room: the 10 bytes go
    assert cache.size == 5 and len(cache) == 1
    execute("ééééééé")  # 7 characters, 14 bytes: over the cap, not kept
    assert not execute("ééééééé").cached and cache.size == 5
    cache.clear()
    assert cache.size == 0 and len(cache) == 0


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"ttl": 0}, "positive number of seconds"),
        ({"ttl": -1}, "positive number of seconds"),
        ({"ttl": float("inf")}, "positive number of seconds"),
        ({"ttl": True}, "positive number of seconds"),
        ({"max_entries": 0}, "max_entries must be a positive int"),
        ({"max_bytes": 1.5}, "max_bytes must be a positive int"),
    ],
)
def test_a_memory_cache_refuses_bounds_that_are_not_positive(
    options: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        MemoryCache(**options)


# -- refused at decoration ---------------------------------------------------------------------


def plain(x: int) -> int:
    return x


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"cache": 60}, ValueError, "not declared read-only; give it annotations="),
        (
            {"cache": 60, "annotations": ToolAnnotations(read_only=False)},
            ValueError,
            "not declared read-only",
        ),
        (
            {"cache": 60, "annotations": READ_ONLY, "requires_approval": True},
            ValueError,
            "requires approval",
        ),
        (
            {"cache": 60, "annotations": READ_ONLY, "external": True},
            ValueError,
            "it is external",
        ),
        ({"cache": 0, "annotations": READ_ONLY}, ValueError, "positive number of seconds"),
        ({"cache": "60", "annotations": READ_ONLY}, TypeError, "TTL in seconds or a ResultCache"),
        ({"cache": True, "annotations": READ_ONLY}, TypeError, "TTL in seconds or a ResultCache"),
        ({"cache_shared": True}, ValueError, "cache_shared and cache_force need cache="),
        ({"cache_force": True}, ValueError, "cache_shared and cache_force need cache="),
    ],
)
def test_a_tool_whose_results_must_not_be_kept_is_refused(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        tool(**options)(plain)


def test_cache_force_caches_a_tool_that_is_not_read_only_or_needs_approval() -> None:
    forced = tool(cache=60, cache_force=True, requires_approval=True)(plain)
    assert isinstance(forced.cache, MemoryCache) and forced.cache.ttl == 60


def test_a_method_cannot_be_cached() -> None:
    with pytest.raises(TypeError, match="it is a method, whose instance is not part"):

        class Lookups:
            @tool(cache=60, annotations=READ_ONLY)
            def find(self, x: int) -> int:
                return x

    class Shared:
        @tool(cache=60, annotations=READ_ONLY)
        @staticmethod
        def find(x: int) -> int:
            return x

    assert Shared.find.cache is not None


# -- once ---------------------------------------------------------------------------------------


def test_identical_calls_in_flight_on_threads_run_the_body_once() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    def slow(x: int) -> int:
        runs.append(x)
        started.set()
        release.wait(5)
        return x

    results: list[ToolExecutionResult] = []

    def run() -> None:
        results.append(
            slow.execute(ToolCall(id="s", name="slow", arguments='{"x": 1}'), in_conversation())
        )

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert started.wait(5)
    time.sleep(0.05)  # the others join the flight
    release.set()
    for thread in threads:
        thread.join(5)
    assert runs == [1]
    assert sorted(r.cached for r in results) == [False] + [True] * 7
    assert {r.value for r in results} == {1}


async def test_identical_calls_in_flight_on_an_event_loop_run_the_body_once() -> None:
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    async def slow(x: int) -> int:
        runs.append(x)
        await asyncio.sleep(0.05)
        return x

    results = await asyncio.gather(
        *(
            slow.aexecute(ToolCall(id="s", name="slow", arguments='{"x": 1}'), in_conversation())
            for _ in range(8)
        )
    )
    assert runs == [1] and sorted(r.cached for r in results) == [False] + [True] * 7


@pytest.mark.parametrize("asynchronous", [False, True])
def test_waiters_get_the_error_of_a_body_that_fails_and_the_next_call_runs_it(
    asynchronous: bool,
) -> None:
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    def failing(x: int) -> int:
        runs.append(x)
        time.sleep(0.1)
        raise RuntimeError("backend down")

    def one() -> ToolExecutionResult:
        return failing.execute(
            ToolCall(id="f", name="failing", arguments='{"x": 1}'), in_conversation()
        )

    async def gathered() -> list[ToolExecutionResult]:
        return list(
            await asyncio.gather(
                *(
                    failing.aexecute(
                        ToolCall(id="f", name="failing", arguments='{"x": 1}'), in_conversation()
                    )
                    for _ in range(4)
                )
            )
        )

    if asynchronous:
        results = asyncio.run(gathered())
    else:
        results = []
        threads = [threading.Thread(target=lambda: results.append(one())) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
    assert runs == [1]
    assert all(r.is_error and "backend down" in r.text and not r.cached for r in results)
    assert len(results) == 4
    one()
    assert runs == [1, 1]


async def test_when_the_call_in_flight_is_cancelled_a_waiter_runs_the_body() -> None:
    runs: list[int] = []
    entered = asyncio.Event()

    @tool(cache=60, annotations=READ_ONLY)
    async def slow(x: int) -> int:
        runs.append(x)
        entered.set()
        await asyncio.sleep(0.05)
        return x

    first = asyncio.ensure_future(
        slow.aexecute(ToolCall(id="a", name="slow", arguments='{"x": 1}'), in_conversation())
    )
    await entered.wait()
    waiter = asyncio.ensure_future(
        slow.aexecute(ToolCall(id="b", name="slow", arguments='{"x": 1}'), in_conversation())
    )
    await asyncio.sleep(0)
    first.cancel()
    result = await asyncio.wait_for(waiter, 5)
    assert runs == [1, 1] and result.value == 1 and not result.cached
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_cancelled_waiter_leaves_the_call_in_flight_running() -> None:
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    async def slow(x: int) -> int:
        runs.append(x)
        await asyncio.sleep(0.05)
        return x

    first = asyncio.ensure_future(
        slow.aexecute(ToolCall(id="a", name="slow", arguments='{"x": 1}'), in_conversation())
    )
    await asyncio.sleep(0.01)
    waiter = asyncio.ensure_future(
        slow.aexecute(ToolCall(id="b", name="slow", arguments='{"x": 1}'), in_conversation())
    )
    await asyncio.sleep(0.01)
    waiter.cancel()
    assert (await first).value == 1 and runs == [1]


# The contained cases (a cache that raises, under every driver): test_conformance_composition.py.


class Opaque:
    """A validated argument without a JSON form."""


def test_a_call_whose_arguments_have_no_json_form_is_not_cached() -> None:
    runs: list[object] = []

    @tool(cache=60, annotations=READ_ONLY)
    def opaque(x: Annotated[int, AfterValidator(lambda value: Opaque())]) -> str:
        runs.append(x)
        return "ran"

    for id in ("a", "b"):
        result = opaque.execute(
            ToolCall(id=id, name="opaque", arguments='{"x": 1}'), in_conversation()
        )
        assert result.text == "ran" and not result.cached
    assert len(runs) == 2


def test_a_blocking_call_on_a_thread_running_an_event_loop_runs_rather_than_waits() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    def slow(x: int) -> int:
        runs.append(x)
        if len(runs) == 1:
            started.set()
            release.wait(5)
        return x

    first = threading.Thread(
        target=lambda: slow.execute(
            ToolCall(id="a", name="slow", arguments='{"x": 1}'), in_conversation()
        )
    )
    first.start()
    assert started.wait(5)

    async def on_the_loop() -> ToolExecutionResult:
        # Waiting here would block the loop: the call runs the body itself.
        return slow.execute(ToolCall(id="b", name="slow", arguments='{"x": 1}'), in_conversation())

    try:
        assert asyncio.run(on_the_loop()).value == 1
    finally:
        release.set()
        first.join(5)
    assert runs == [1, 1]


def test_an_async_call_waits_for_the_identical_blocking_call_in_flight() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    def slow(x: int) -> int:
        runs.append(x)
        started.set()
        release.wait(5)
        return x

    first = threading.Thread(
        target=lambda: slow.execute(
            ToolCall(id="a", name="slow", arguments='{"x": 1}'), in_conversation()
        )
    )
    first.start()
    assert started.wait(5)

    async def waiting() -> ToolExecutionResult:
        pending = asyncio.ensure_future(
            slow.aexecute(ToolCall(id="b", name="slow", arguments='{"x": 1}'), in_conversation())
        )
        await asyncio.sleep(0.05)
        assert not pending.done()  # waiting, without blocking the loop
        release.set()
        return await asyncio.wait_for(pending, 5)

    result = asyncio.run(waiting())
    first.join(5)
    assert runs == [1] and result.cached and result.value == 1
