"""Composition (issue 45): the result cache (`@tool(cache=...)`) and runs as tools
(`ToolService.as_tool`) under the suite's guarantees, over every driver of the `DRIVER` axis.

- bounded: a `MemoryCache` holds exactly its `max_entries` and `max_bytes`; one more evicts the
  least recently used, and a result one byte over the cap is never kept.
- once: identical cached calls of one round (concurrent under `achat`/`astream`) run the body
  once.
- scoped: two conversations interleaved on one shared service never see each other's cache
  entries or sub-run conversations, and a paused sub-run resumes only in its own.
- contained: a cache that raises is a miss (the call runs); a sub-run that fails is an error
  result its parent reads.

The durable driver is exempt from these three (its registration says why); its tools run in
activities, with the same `Tool.aexecute` (`test_tool_cache.py` checks a hit's mark through the
activity's payload).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from conformance import DRIVER, Surface, assert_registered

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

READ_ONLY = ToolAnnotations(read_only=True)


def rounds(*calls: Sequence[ToolCall]) -> FunctionModel:
    """A model that makes each round's calls in turn, then answers with the last result."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        done = sum(isinstance(m, AiMessage) and bool(m.tool_calls) for m in messages)
        if done < len(calls):
            return AiMessage(tool_calls=list(calls[done]))
        last = messages[-1]
        return AiMessage(text=last.text if isinstance(last, ToolResultMessage) else "")

    return FunctionModel(answer)


def lookup_call(id: str, x: int = 1) -> ToolCall:
    return ToolCall(id=id, name="lookup", arguments=f'{{"x": {x}}}')


# -- bounded -------------------------------------------------------------------------------------


def execute(cached: Any, x: int, conversation: str = "one") -> ToolExecutionResult:
    context = ToolContext(None, "c", "lookup", conversation_id=conversation)
    result: ToolExecutionResult = cached.execute(lookup_call("c", x), context)
    return result


def test_bounded_a_cache_keeps_exactly_max_entries() -> None:
    cache = MemoryCache(max_entries=3)

    @tool(cache=cache, annotations=READ_ONLY)
    def lookup(x: int) -> int:
        return x

    for x in range(3):
        execute(lookup, x)
    assert len(cache) == 3 and all(execute(lookup, x).cached for x in range(3))
    execute(lookup, 3)  # one over: the least recently used (0) goes
    assert len(cache) == 3
    assert [execute(lookup, x).cached for x in (1, 2, 3)] == [True, True, True]
    assert not execute(lookup, 0).cached


def test_bounded_a_cache_keeps_exactly_max_bytes() -> None:
    cache = MemoryCache(max_bytes=100)

    @tool(cache=cache, annotations=READ_ONLY)
    def lookup(x: int) -> str:
        return "a" * x

    execute(lookup, 100)
    assert cache.size == 100 and execute(lookup, 100).cached
    execute(lookup, 101)  # one byte over: never kept, and nothing is evicted for it
    assert cache.size == 100 and not execute(lookup, 101).cached
    execute(lookup, 1)  # room made by evicting the least recently used
    assert cache.size == 1 and len(cache) == 1


# -- once ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVER.each("once"))
def test_once_identical_cached_calls_of_a_round_run_the_body_once(driver: Surface[Any]) -> None:
    runs: list[int] = []

    @tool(cache=60, annotations=READ_ONLY)
    def lookup(x: int) -> int:
        runs.append(x)
        time.sleep(0.05)  # long enough for the concurrent drivers' calls to meet in flight
        return x

    model = rounds([lookup_call("a"), lookup_call("b"), lookup_call("c")])
    result = driver.build(ToolService(tools=[lookup]), model, "go")
    assert runs == [1]
    assert sorted(e.cached for e in result.tool_executions) == [False, True, True]
    assert [e.result.value for e in result.tool_executions] == [1, 1, 1]


# -- scoped --------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVER.each("scoped"))
def test_scoped_cache_entries_and_sub_runs_never_cross_conversations(
    driver: Surface[Any],
) -> None:
    runs: list[str | None] = []

    @tool(cache=60, annotations=READ_ONLY)
    def lookup(x: int, context: ToolContext[None]) -> str:
        runs.append(context.conversation_id)
        return f"for {context.conversation_id}"

    helper = ToolService(tools=[lookup]).as_tool(
        rounds([lookup_call("i")]), name="helper", description="Looks up."
    )
    service = ToolService(tools=[lookup, helper])
    delegate = ToolCall(id="h", name="helper", arguments='{"task": "look"}')
    model = rounds([lookup_call("a")], [delegate])
    one = driver.build(service, model, "go", conversation_id="one")
    two = driver.build(service, model, "go", conversation_id="two")
    again = driver.build(service, model, "go", conversation_id="one")
    # Each conversation ran its own lookup, and its sub-run its own (in a conversation of its
    # own, derived from the parent's): four bodies for two conversations.
    assert len(runs) == 4 and len(set(runs)) == 4
    assert {"one", "two"} <= set(runs)
    assert one.tool_executions[0].result.value == "for one"
    assert two.tool_executions[0].result.value == "for two"
    assert one.text == again.text != two.text
    # The conversation "one" again: everything served from its own entries.
    assert again.tool_executions[0].cached and "for one" not in (again.text or "")


@pytest.mark.parametrize("driver", DRIVER.each("scoped"))
def test_scoped_a_paused_sub_run_resumes_only_in_its_own_conversation(
    driver: Surface[Any],
) -> None:
    paid: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        paid.append(amount)
        return "paid"

    helper = ToolService(tools=[pay]).as_tool(
        rounds([ToolCall(id="p", name="pay", arguments='{"amount": 5}')]),
        name="helper",
        description="Pays.",
    )
    service = ToolService(tools=[helper])
    model = rounds([ToolCall(id="h", name="helper", arguments='{"task": "pay"}')])
    paused = driver.build(service, model, "go", conversation_id="one")
    [pending] = paused.pending
    # The history, its owner and the sub-run's record all name "one": another conversation's
    # run refuses them, and nothing runs.
    with pytest.raises(ValueError, match="belong to conversation 'one'"):
        driver.build(
            service, model, paused.messages, conversation_id="two", approvals={pending.key: True}
        )
    assert paid == []
    done = driver.build(
        service, model, paused.messages, conversation_id="one", approvals={pending.key: True}
    )
    assert paid == [5] and done.pending == ()


# -- contained -----------------------------------------------------------------------------------


class Broken:
    def __init__(self, get: Any = None, put: Any = None) -> None:
        self.get_answer, self.put_error = get, put

    def get(self, key: str) -> ToolExecutionResult | None:
        if isinstance(self.get_answer, Exception):
            raise self.get_answer
        return self.get_answer  # type: ignore[no-any-return]

    def put(self, key: str, result: ToolExecutionResult) -> None:
        if self.put_error is not None:
            raise self.put_error


@pytest.mark.parametrize(
    "cache",
    [
        Broken(get=RuntimeError("cache down")),
        Broken(put=RuntimeError("cache full")),
        Broken(get="not a result"),
        Broken(get=ToolExecutionResult.error("stale", "execution")),
    ],
    ids=["get-raises", "put-raises", "get-garbage", "get-error-result"],
)
@pytest.mark.parametrize("driver", DRIVER.each("contained"))
def test_contained_a_cache_that_fails_is_a_miss_and_the_call_runs(
    cache: Broken, driver: Surface[Any], caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    @tool(cache=cache, annotations=READ_ONLY)
    def lookup(x: int) -> int:
        runs.append(x)
        return x * 10

    model = rounds([lookup_call("a")], [lookup_call("b")])
    result = driver.build(ToolService(tools=[lookup]), model, "go")
    assert runs == [1, 1]
    assert [e.result.value for e in result.tool_executions] == [10, 10]
    assert not any(e.cached or e.failed for e in result.tool_executions)
    assert "result cache of tool 'lookup'" in caplog.text


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
def test_contained_a_sub_run_that_fails_is_an_error_its_parent_reads(
    driver: Surface[Any],
) -> None:
    def broken(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        raise RuntimeError("the sub-run's model is down")

    helper = ToolService().as_tool(FunctionModel(broken), name="helper", description="Breaks.")
    delegate = ToolCall(id="h", name="helper", arguments='{"task": "go"}')
    result = driver.build(ToolService(tools=[helper]), rounds([delegate]), "go")
    failed = result.tool_executions[0]
    assert failed.failed and "the sub-run's model is down" in failed.result.text
    assert result.text == failed.result.text


def test_covers_every_surface() -> None:
    assert_registered(DRIVER)
