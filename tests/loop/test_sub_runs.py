"""`ToolService.as_tool`: a run as a tool. Its output is the result, its usage and spending roll
into the parent's (a sub-run cannot spend past the parent's limits), its events come in the
parent's stream marked with their path, depth is bounded, cancelling the parent cancels it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive
from pydantic import BaseModel

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FinalResultEvent,
    FunctionModel,
    SubRunEvent,
    TextDelta,
    TokenUsage,
    ToolCall,
    ToolCallEvent,
    ToolContext,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
    tool,
)

USED = TokenUsage(input_tokens=3, output_tokens=2, total_tokens=5)


def delegating(tool_name: str, task: str = "add 1 and 2", calls: int = 1) -> FunctionModel:
    """A model that calls `tool_name` `calls` times (one round each), then says what it read."""
    requests: list[int] = []

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        requests.append(1)
        done = [m for m in messages if isinstance(m, ToolResultMessage)]
        if len(done) < calls:
            call = ToolCall(id=f"d{len(done)}", name=tool_name, arguments=f'{{"task": "{task}"}}')
            return ChatResponse(ai_message=AiMessage(tool_calls=[call]), token_usage=USED)
        return ChatResponse(ai_message=AiMessage(text=f"read: {done[-1].text}"), token_usage=USED)

    model = FunctionModel(answer)
    model.requests = requests  # type: ignore[attr-defined]
    return model


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adding() -> FunctionModel:
    """The sub-run's model: one call to `add`, then the sum in words."""
    requests: list[int] = []

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        requests.append(1)
        if isinstance(messages[-1], ToolResultMessage):
            return ChatResponse(
                ai_message=AiMessage(text=f"the sum is {messages[-1].text}"), token_usage=USED
            )
        call = ToolCall(id="a", name="add", arguments='{"a": 1, "b": 2}')
        return ChatResponse(ai_message=AiMessage(tool_calls=[call]), token_usage=USED)

    model = FunctionModel(answer)
    model.requests = requests  # type: ignore[attr-defined]
    return model


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sub_run_answers_its_call_and_its_usage_rolls_into_the_parent(driver: str) -> None:
    child = adding()
    helper = ToolService(tools=[add]).as_tool(child, name="helper", description="Adds.")
    result = drive(driver, ToolService(tools=[helper]), delegating("helper"), "go")
    assert result.text == "read: the sum is 3"
    assert result.tool_executions[0].result.value == "the sum is 3"
    # Two parent requests and two of the sub-run's, 5 tokens each.
    assert result.usage.total_tokens == 20 and result.usage.input_tokens == 12
    assert len(child.requests) == 2  # type: ignore[attr-defined]


class Sum(BaseModel):
    total: int


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_typed_sub_run_gives_its_output_as_the_result(driver: str) -> None:
    def structured(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(
            tool_calls=[ToolCall(id="o", name="final_result", arguments='{"total": 3}')]
        )

    helper = ToolService().as_tool(
        FunctionModel(structured), name="helper", description="Adds.", output_type=Sum
    )
    result = drive(driver, ToolService(tools=[helper]), delegating("helper"), "go")
    assert result.tool_executions[0].result.value == Sum(total=3)
    assert result.text == 'read: {"total":3}'


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sub_run_cannot_spend_past_the_parent_s_limits(driver: str) -> None:
    child = adding()
    helper = ToolService(tools=[add]).as_tool(child, name="helper", description="Adds.")
    with pytest.raises(UsageLimitExceededError) as raised:
        # The parent's request, then the sub-run's first: its second would be the third.
        drive(
            driver,
            ToolService(tools=[helper]),
            delegating("helper"),
            "go",
            usage_limits=UsageLimits(request_limit=2),
        )
    assert raised.value.limit == "request_limit" and raised.value.value == 3
    assert len(child.requests) == 1  # type: ignore[attr-defined]
    # The parent's history: its call answered, the usage of both runs.
    assert [type(m).__name__ for m in raised.value.messages] == [
        "UserMessage",
        "AiMessage",
        "ToolResultMessage",
    ]
    assert raised.value.usage.total_tokens == 10


def test_a_sub_run_s_tokens_and_tool_calls_count_against_the_parent() -> None:
    helper = ToolService(tools=[add]).as_tool(adding(), name="helper", description="Adds.")
    service = ToolService(tools=[helper])
    with pytest.raises(UsageLimitExceededError) as tokens:
        service.chat(delegating("helper"), "go", usage_limits=UsageLimits(total_tokens_limit=12))
    assert tokens.value.limit == "total_tokens_limit" and tokens.value.value == 15
    with pytest.raises(UsageLimitExceededError) as calls:
        service.chat(delegating("helper"), "go", usage_limits=UsageLimits(tool_calls_limit=1))
    assert calls.value.limit == "tool_calls_limit" and calls.value.value == 2
    # Within the limits, the same run passes.
    limits = UsageLimits(request_limit=4, total_tokens_limit=20, tool_calls_limit=2)
    assert service.chat(delegating("helper"), "go", usage_limits=limits).usage.total_tokens == 20


def test_a_sub_run_s_own_limits_fail_only_its_call() -> None:
    child_service = ToolService(tools=[add], usage_limits=UsageLimits(request_limit=1))
    helper = child_service.as_tool(adding(), name="helper", description="Adds.")
    result = ToolService(tools=[helper]).chat(delegating("helper"), "go")
    failed = result.tool_executions[0]
    assert failed.failed and "usage limit exceeded: request_limit=1" in failed.result.text
    assert result.text is not None and result.text.startswith("read: ")


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_sub_run_events_come_in_the_parent_s_stream_marked_with_their_path(driver: str) -> None:
    inner = ToolService(tools=[add]).as_tool(adding(), name="inner", description="Adds.")
    outer = ToolService(tools=[inner]).as_tool(
        delegating("inner"), name="outer", description="Delegates."
    )
    service = ToolService(tools=[outer])

    async def consume() -> list[Any]:
        return [e async for e in service.astream(delegating("outer"), "go")]

    events = (
        list(service.stream(delegating("outer"), "go"))
        if driver == "stream"
        else asyncio.run(consume())
    )
    marked = [e for e in events if isinstance(e, SubRunEvent)]
    paths = {e.path for e in marked}
    assert paths == {("outer",), ("outer", "inner")}
    assert {e.call_ids for e in marked} == {("d0",), ("d0", "d0")}
    inner_calls = [
        e.event.call.name
        for e in marked
        if e.path == ("outer", "inner") and isinstance(e.event, ToolCallEvent)
    ]
    assert inner_calls == ["add"]
    assert any(isinstance(e.event, TextDelta) for e in marked)
    assert sum(isinstance(e.event, FinalResultEvent) for e in marked) == 2
    # Before the call's result, in the parent's order.
    result_at = next(i for i, e in enumerate(events) if isinstance(e, ToolResultEvent))
    assert all(events.index(e) < result_at for e in marked)
    last = events[-1]
    assert isinstance(last, FinalResultEvent) and last.result.usage.total_tokens == 30


def test_sub_runs_nest_at_most_max_depth_deep() -> None:
    inner = ToolService(tools=[add]).as_tool(adding(), name="inner", description="Adds.")
    middle = ToolService(tools=[inner]).as_tool(
        delegating("inner"), name="middle", description="Delegates.", max_depth=1
    )
    result = ToolService(tools=[middle]).chat(delegating("middle"), "go")
    # `middle` (depth 1) ran; the `inner` it called would be depth 2: an error its model read.
    assert result.text == (
        "read: read: Tool `inner` failed: SubRunError: sub-runs nest at most 1 deep (max_depth); this one would be 2 "
        "deep: answer without it"
    )


def test_a_recursive_sub_run_ends_at_the_default_depth() -> None:
    service = ToolService()
    model = delegating("again")
    again = service.as_tool(model, name="again", description="Again.")
    service.register(again)
    result = service.chat(model, "go")
    assert "nest at most 3 deep" in (result.text or "")
    assert len(model.requests) == 8  # type: ignore[attr-defined]  # 4 runs, 2 requests each


@pytest.mark.parametrize("max_depth", [0, -1, True, 1.5])
def test_as_tool_refuses_a_depth_that_is_not_a_positive_int(max_depth: Any) -> None:
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        ToolService().as_tool(adding(), name="h", description="d", max_depth=max_depth)


async def test_cancelling_the_parent_cancels_the_sub_run() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hanging(
        messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return AiMessage(text="never")

    helper = ToolService().as_tool(FunctionModel(hanging), name="helper", description="Hangs.")
    run = asyncio.ensure_future(ToolService(tools=[helper]).achat(delegating("helper"), "go"))
    await asyncio.wait_for(started.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert cancelled.is_set()


def test_a_sub_run_s_conversation_is_its_parent_call_s_own() -> None:
    seen: list[str | None] = []

    @tool
    def where(context: ToolContext[None]) -> str:
        seen.append(context.conversation_id)
        return "here"

    def asking(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=messages[-1].text)
        return AiMessage(tool_calls=[ToolCall(id="w", name="where", arguments="{}")])

    helper = ToolService(tools=[where]).as_tool(
        FunctionModel(asking), name="helper", description="Where."
    )
    service = ToolService(tools=[helper])
    for conversation in ("one", "two", "one"):
        service.chat(delegating("helper"), "go", conversation_id=conversation)
    assert seen[0] == seen[2] and seen[0] != seen[1]
    assert None not in seen and "one" not in seen and "two" not in seen


def test_a_sub_run_that_fails_is_an_error_its_parent_reads() -> None:
    def broken(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        raise RuntimeError("model down")

    helper = ToolService().as_tool(FunctionModel(broken), name="helper", description="Breaks.")
    result = ToolService(tools=[helper]).chat(delegating("helper"), "go")
    assert result.tool_executions[0].failed
    assert "model down" in result.tool_executions[0].result.text
