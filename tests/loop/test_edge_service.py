"""Adversarial edges of the `ToolService` loop, through FunctionModel and real tools."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FinishReason,
    FunctionModel,
    ReturnBehavior,
    ToolArgumentsError,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolExecutionResult,
    ToolLoopLimitError,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UnknownToolError,
    UserMessage,
    tool,
)

ASK = [UserMessage(content="go")]


def scripted(*turns: AiMessage | ChatResponse) -> tuple[FunctionModel, list[list[ChatMessage]]]:
    seen: list[list[ChatMessage]] = []
    queue = list(turns)

    def reply(messages: Sequence[ChatMessage], _: ChatRequestParameters) -> Any:
        seen.append(list(messages))
        return queue.pop(0)

    return FunctionModel(reply), seen


def results(result: ToolChatResult[Any]) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


@pytest.fixture(params=["chat", "achat"])
def drive(request: pytest.FixtureRequest) -> Callable[..., ToolChatResult[Any]]:
    def run(service: ToolService, model: FunctionModel, **kw: Any) -> ToolChatResult[Any]:
        if request.param == "chat":
            return service.chat(model, ASK, **kw)
        return asyncio.run(service.achat(model, ASK, **kw))

    return run


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool
def noargs() -> str:
    """Take nothing."""
    return "done"


# -- malformed arguments envelopes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "path"),
    [("not json at all", "$"), ('["a", "b"]', "$"), ("null", "$"), ("42", "$"), ('"text"', "$")],
)
def test_non_object_arguments_are_an_arguments_error(
    drive: Callable[..., ToolChatResult[Any]], arguments: str, path: str
) -> None:
    model, seen = scripted(
        AiMessage(tool_calls=[ToolCall(id="c1", name="echo", arguments=arguments)]),
        AiMessage(text="ok"),
    )
    result = drive(ToolService([echo]), model)
    [message] = results(result)
    assert message.is_error and message.tool_call_id == "c1"
    assert message.text.startswith("Invalid arguments for tool `echo`")
    assert f"{path}" in message.text
    assert result.tool_executions[0].result.error_kind == "arguments"
    # The model saw the error and answered: nothing raised, one retry used.
    assert seen[1][-1] == message


def test_null_arguments_for_a_tool_without_parameters_are_refused() -> None:
    # Only an empty string is the documented "no arguments" quirk; `null` is not guessed.
    call = ToolCall(id="c", name="noargs", arguments="null")
    assert noargs.execute(call).error_kind == "arguments"
    assert noargs.execute(call.model_copy(update={"arguments": "  "})).text == "done"


def test_huge_arguments_are_validated_not_truncated() -> None:
    big = "x" * 2_000_000
    result = echo.execute(ToolCall(id="c", name="echo", arguments=json.dumps({"text": big})))
    assert not result.is_error and result.value == big


def test_huge_invalid_arguments_stay_an_arguments_error() -> None:
    raw = json.dumps({"text": 1, "extra": ["y" * 100_000] * 20})
    result = echo.execute(ToolCall(id="c", name="echo", arguments=raw))
    assert result.error_kind == "arguments"
    assert "$.text" in result.text and "$.extra" in result.text


# -- odd model turns -----------------------------------------------------------------------------


def test_two_calls_with_the_same_id_both_run_in_order_each_with_its_own_id(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="dup", name="echo", arguments='{"text": "one"}'),
                ToolCall(id="dup", name="echo", arguments='{"text": "two"}'),
            ]
        ),
        AiMessage(text="ok"),
    )
    result = drive(ToolService([echo]), model)
    assert [(m.tool_call_id, m.text) for m in results(result)] == [("dup", "one"), ("dup~1", "two")]
    # The history records what the server sent beside what the loop used.
    assert result.messages[1] == AiMessage(
        tool_calls=[
            ToolCall(id="dup", name="echo", arguments='{"text": "one"}'),
            ToolCall(id="dup~1", name="echo", arguments='{"text": "two"}'),
        ],
        attributes={"server_call_ids": {"dup~1": "dup"}},
    )


def test_tool_names_are_case_sensitive(drive: Callable[..., ToolChatResult[Any]]) -> None:
    model, _ = scripted(AiMessage(tool_calls=[ToolCall(id="c", name="Echo", arguments="{}")]))
    with pytest.raises(UnknownToolError) as info:
        drive(ToolService([echo]), model)
    assert "Echo" in str(info.value) and "echo" in str(info.value)


def test_registering_names_that_differ_only_by_case_is_allowed() -> None:
    @tool(name="Echo")
    def shout(text: str) -> str:
        return text.upper()

    service = ToolService([echo, shout])
    assert [t.name for t in service.tools] == ["echo", "Echo"]
    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="a", name="Echo", arguments='{"text": "hi"}'),
                ToolCall(id="b", name="echo", arguments='{"text": "hi"}'),
            ]
        ),
        AiMessage(text="ok"),
    )
    assert [m.text for m in results(service.chat(model, ASK))] == ["HI", "hi"]


def test_tool_calls_with_finish_reason_stop_are_still_executed(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    # Compatible servers say "stop" next to tool calls: the calls, not the reason, decide.
    stop_with_calls = ChatResponse(
        ai_message=AiMessage(tool_calls=[ToolCall(id="c", name="echo", arguments='{"text":"x"}')]),
        finish_reason=FinishReason.STOP,
    )
    model, _ = scripted(stop_with_calls, AiMessage(text="final"))
    result = drive(ToolService([echo]), model)
    assert [m.text for m in results(result)] == ["x"]
    assert result.final_response.ai_message.text == "final"


def test_empty_turn_without_text_or_calls_ends_the_run(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    model, seen = scripted(AiMessage(tool_calls=()))
    result = drive(ToolService([echo]), model)
    assert result.final_response.ai_message == AiMessage()
    assert result.tool_executions == () and len(seen) == 1


def test_max_round_trips_one_runs_the_tools_then_raises(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    ran: list[str] = []

    @tool
    def record(text: str) -> str:
        ran.append(text)
        return text

    model, seen = scripted(
        AiMessage(tool_calls=[ToolCall(id="c", name="record", arguments='{"text":"x"}')]),
        AiMessage(text="never asked"),
    )
    with pytest.raises(ToolLoopLimitError):
        drive(ToolService([record], max_round_trips=1), model)
    assert ran == ["x"] and len(seen) == 1


def test_max_round_trips_one_is_enough_for_a_plain_answer(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    model, _ = scripted(AiMessage(text="hello"))
    assert drive(ToolService([echo], max_round_trips=1), model).final_response.ai_message.text


# -- hooks -----------------------------------------------------------------------------------------


def test_before_hook_that_raises_propagates_and_nothing_runs(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    ran: list[str] = []

    @tool
    def record(text: str) -> str:
        ran.append(text)
        return text

    def deny_all(call: ToolCall, context: ToolContext[Any]) -> None:
        raise PermissionError(f"no {call.name}")

    model, _ = scripted(
        AiMessage(tool_calls=[ToolCall(id="c", name="record", arguments='{"text":"x"}')])
    )
    with pytest.raises(PermissionError, match="no record"):
        drive(ToolService([record], before_tool_call=deny_all), model)
    assert ran == []


def test_after_hook_that_raises_propagates(drive: Callable[..., ToolChatResult[Any]]) -> None:
    def boom(execution: ToolExecution) -> None:
        raise RuntimeError("audit down")

    model, _ = scripted(
        AiMessage(tool_calls=[ToolCall(id="c", name="echo", arguments='{"text":"x"}')])
    )
    with pytest.raises(RuntimeError, match="audit down"):
        drive(ToolService([echo], after_tool_call=boom), model)


def test_after_hook_sees_the_policy_rewritten_result(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    @tool
    def fail(text: str) -> str:
        raise ValueError("secret=hunter2")

    seen: list[ToolExecutionResult] = []
    model, _ = scripted(
        AiMessage(tool_calls=[ToolCall(id="c", name="fail", arguments='{"text":"x"}')]),
        AiMessage(text="ok"),
    )
    service = ToolService(
        [fail],
        execution_error_handler=lambda exc, ctx: "the tool failed",
        after_tool_call=lambda execution: seen.append(execution.result),
    )
    result = drive(service, model)
    assert [r.text for r in seen] == ["the tool failed"]
    assert seen[0].is_error and seen[0].error_kind == "execution"
    assert results(result)[0].text == "the tool failed"
    assert result.tool_executions[0].result is seen[0]


# -- async: cancellation, failures, deps -------------------------------------------------------------


async def test_cancelling_achat_mid_round_cancels_the_tools_and_records_nothing() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []
    audited: list[ToolExecution] = []

    @tool
    async def slow(text: str) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(text)
            raise
        return text

    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="a", name="slow", arguments='{"text":"a"}'),
                ToolCall(id="b", name="slow", arguments='{"text":"b"}'),
            ]
        )
    )
    history = list(ASK)
    service = ToolService([slow], after_tool_call=audited.append)
    task = asyncio.create_task(service.achat(model, history))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]
    assert audited == [] and history == ASK


async def test_a_raising_call_cancels_its_still_running_siblings() -> None:
    # One call of the round exhausts its retries (the loop raises): the other call of the same
    # round must not keep running unawaited after `achat` has returned.
    release = asyncio.Event()
    outcome: list[str] = []

    @tool(max_retries=0)
    def strict_one(count: int) -> int:
        return count

    @tool
    async def sibling() -> str:
        try:
            await asyncio.wait_for(release.wait(), 5)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        outcome.append("finished")
        return "late"

    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="a", name="sibling", arguments="{}"),
                ToolCall(id="b", name="strict_one", arguments='{"count": "NaN"}'),
            ]
        )
    )
    with pytest.raises(ToolArgumentsError):
        await ToolService([strict_one, sibling]).achat(model, ASK)
    await asyncio.sleep(0)
    release.set()
    await asyncio.sleep(0.05)
    assert outcome == ["cancelled"]


async def test_deps_and_conversation_id_reach_sync_tools_in_threads() -> None:
    seen: list[tuple[Any, str | None, str, int, str]] = []

    @tool
    def whoami(ctx: ToolContext[dict[str, str]], label: str) -> str:
        seen.append(
            (
                ctx.deps,
                ctx.conversation_id,
                ctx.tool_call_id,
                ctx.attempt,
                threading.current_thread().name,
            )
        )
        return label

    deps = {"user": "ada"}
    turns = [
        AiMessage(tool_calls=[ToolCall(id="c1", name="whoami", arguments='{"label":"x"}')]),
        AiMessage(text="ok"),
    ]
    service = ToolService([whoami], deps_type=dict)
    first, _ = scripted(*turns)
    second, _ = scripted(*turns)
    await service.achat(first, ASK, deps=deps, conversation_id="conv-1")
    await service.achat(second, ASK, deps=deps, conversation_id="conv-1")
    assert [s[:4] for s in seen] == [(deps, "conv-1", "c1", 1)] * 2
    assert seen[0][0] is deps
    assert all(s[4] != threading.main_thread().name for s in seen)


def test_failures_do_not_leak_between_runs_sharing_a_conversation_id() -> None:
    @tool(max_retries=1)
    def count(n: int) -> int:
        return n

    bad = AiMessage(tool_calls=[ToolCall(id="c", name="count", arguments='{"n":"1"}')])
    service = ToolService([count])
    for _ in range(2):
        model, _ = scripted(bad, AiMessage(text="gave up"))
        result = service.chat(model, ASK, conversation_id="same")
        assert results(result)[0].is_error


# -- output_type next to ReturnBehavior --------------------------------------------------------------


class Answer(BaseModel):
    value: int


def test_output_type_outranks_an_immediate_tool(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    # With an output type the run ends only on a valid output, so `.output` is always one.
    @tool(return_behavior=ReturnBehavior.IMMEDIATE)
    def stop_now() -> str:
        return "stopped"

    model, _ = scripted(
        AiMessage(tool_calls=[ToolCall(id="c", name="stop_now", arguments="{}")]),
        AiMessage(tool_calls=[ToolCall(id="f", name="final_result", arguments='{"value": 3}')]),
    )
    result = drive(ToolService([stop_now]), model, output_type=Answer)
    assert not result.returned_immediately and result.output == Answer(value=3)
    assert result.tool_executions[0].result.text == "stopped"


def test_output_type_final_result_wins_next_to_an_immediate_tool(
    drive: Callable[..., ToolChatResult[Any]],
) -> None:
    @tool(return_behavior=ReturnBehavior.IMMEDIATE)
    def stop_now() -> str:
        return "stopped"

    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="a", name="stop_now", arguments="{}"),
                ToolCall(id="b", name="final_result", arguments='{"value": 7}'),
            ]
        )
    )
    result = drive(ToolService([stop_now]), model, output_type=Answer)
    assert result.output == Answer(value=7)
    assert [m.tool_call_id for m in results(result)] == ["a", "b"]


async def test_astream_closed_mid_round_cancels_the_running_calls() -> None:
    cancelled: list[str] = []

    @tool
    async def slow(text: str) -> str:
        try:
            await asyncio.sleep(0 if text == "fast" else 30)
        except asyncio.CancelledError:
            cancelled.append(text)
            raise
        return text

    model, _ = scripted(
        AiMessage(
            tool_calls=[
                ToolCall(id="a", name="slow", arguments='{"text":"fast"}'),
                ToolCall(id="b", name="slow", arguments='{"text":"slow"}'),
            ]
        )
    )
    stream = ToolService([slow]).astream(model, ASK)
    assert isinstance(stream, AsyncGenerator)  # closing it is what cancels the running calls
    async for event in stream:
        if isinstance(event, ToolResultEvent):
            break
    await stream.aclose()
    assert cancelled == ["slow"]
