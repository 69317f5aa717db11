"""A plain run (`Run.plain`: nothing but the calls' tools decides it) takes the loop's short way:
it must end exactly where the general way ends, and any of the options that decide a run must
send it the general way."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    CallRule,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ModelRetry,
    ToolCall,
    ToolChatResult,
    ToolResultMessage,
    ToolService,
    UsageLimits,
    UserMessage,
    input_guardrail,
    instrument,
    tool,
)
from agentforge_typed.loop._run import Run


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(max_retries=2)
def flaky(n: int) -> str:
    """Fail for a negative number."""
    if n < 0:
        raise ModelRetry("n must not be negative")
    return f"ok {n}"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _turns(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Three rounds: two calls (one refused by its tool), calls that reuse a taken id, then the
    answer."""
    rounds = sum(isinstance(m, AiMessage) for m in messages)
    if rounds == 0:
        return AiMessage(
            tool_calls=[
                ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}'),
                ToolCall(id="c2", name="flaky", arguments='{"n": -1}'),
            ]
        )
    if rounds == 1:  # the server numbers its calls from the start again
        return AiMessage(
            tool_calls=[
                ToolCall(id="c1", name="flaky", arguments='{"n": 1}'),
                ToolCall(id="c1", name="add", arguments='{"a": "x", "b": 1}'),
            ]
        )
    results = [m.text for m in messages if isinstance(m, ToolResultMessage)]
    return AiMessage(text=" | ".join(str(text) for text in results))


def _seen(result: ToolChatResult[Any]) -> tuple[Any, ...]:
    """What a run ends with, less its random conversation id and its calls' timestamps."""
    executions = [
        (e.call, e.result.text, e.result.is_error, e.result.error_kind, e.decision)
        for e in result.tool_executions
    ]
    return (result.messages, executions, result.text, result.returned_immediately, result.usage)


def test_a_plain_run_ends_where_the_general_way_ends() -> None:
    model = FunctionModel(_turns)
    plain = ToolService([add, flaky])
    audited: list[str] = []
    general = ToolService([add, flaky], after_tool_call=lambda e: audited.append(e.call.id))
    assert Run(plain, model, "go", None, None, None, {}).plain
    assert not Run(general, model, "go", None, None, None, {}).plain

    ours, theirs = plain.chat(model, "go"), general.chat(model, "go")

    assert _seen(ours) == _seen(theirs)
    assert len(audited) == 4
    assert [e.call.id for e in ours.tool_executions][2:] != ["c1", "c1"]  # made unique
    ours_async = asyncio.run(plain.achat(model, "go"))
    assert _seen(ours_async) == _seen(ours)


def test_a_plain_run_still_holds_a_call_that_waits_for_approval() -> None:
    model = FunctionModel(
        lambda messages, parameters: AiMessage(
            tool_calls=[ToolCall(id="d1", name="delete", arguments='{"path": "/tmp/x"}')]
        )
    )
    service = ToolService([delete])
    assert Run(service, model, "go", None, None, None, {}).plain

    result = service.chat(model, "go")

    assert [pending.call.id for pending in result.pending] == ["d1"]
    assert result.tool_executions == ()


@pytest.mark.parametrize(
    ("service_options", "run_options"),
    [
        ({"before_tool_call": lambda call, context: None}, {}),
        ({"after_tool_call": lambda execution: None}, {}),
        ({"usage_limits": UsageLimits(request_limit=5)}, {}),
        ({"history_processors": [lambda messages: messages]}, {}),
        ({"guardrails": [input_guardrail(lambda messages: None)]}, {}),
        ({"rules": [CallRule.refuse("add")]}, {}),
        ({}, {"usage_limits": UsageLimits(request_limit=5)}),
        ({}, {"tools": ["add"]}),
        ({}, {"output_type": int}),
    ],
)
def test_any_option_that_decides_a_run_sends_it_the_general_way(
    service_options: dict[str, Any], run_options: dict[str, Any]
) -> None:
    service: ToolService[None] = ToolService([add], **service_options)
    output_type = run_options.pop("output_type", None)
    run = Run(service, None, [UserMessage(content="go")], None, None, output_type, run_options)  # type: ignore[arg-type]
    assert not run.plain


def test_a_run_that_resumes_calls_takes_the_general_way() -> None:
    call = ToolCall(id="d1", name="delete", arguments='{"path": "/tmp/x"}')
    history: list[ChatMessage] = [UserMessage(content="go"), AiMessage(tool_calls=[call])]
    model = FunctionModel(lambda messages, parameters: AiMessage(text="done"))
    service = ToolService([delete])
    run = Run(service, model, history, None, None, None, {"approvals": {"d1": True}})
    assert not run.plain
    assert run.resuming

    result = service.chat(model, history, approvals={"d1": True})

    assert [e.result.text for e in result.tool_executions] == ["deleted /tmp/x"]


def test_a_traced_run_takes_the_general_way() -> None:
    run = Run(ToolService([add]), None, "go", None, None, None, {})
    assert run.plain
    with instrument(), run:
        assert not run.plain  # every step is traced
