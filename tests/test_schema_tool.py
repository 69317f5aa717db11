"""`SchemaTool`: JSON-schema validation, handler kinds, result conversion, repairs, error kinds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from agentforge_typed import (
    ModelRetry,
    ReturnBehavior,
    SchemaTool,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolSpecification,
)
from agentforge_typed._execution import ToolLike

SPEC = ToolSpecification(
    name="book",
    description="Book a room.",
    parameters={
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["red", "blue"]},
            "nights": {"type": "integer", "minimum": 1},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["room", "nights"],
        "additionalProperties": False,
    },
)


def call(arguments: str) -> ToolCall:
    return ToolCall(id="call_1", name="book", arguments=arguments)


def context() -> ToolContext[Any]:
    return ToolContext(deps=None, tool_call_id="call_1", tool_name="book")


def test_satisfies_tool_like() -> None:
    tool: ToolLike = SchemaTool(SPEC, dict, sequential=True, max_retries=5)
    assert tool.name == "book"
    assert tool.specification is SPEC
    assert tool.return_behavior is ReturnBehavior.TO_LLM
    assert (tool.max_retries, tool.sequential) == (5, True)


def test_valid_call_passes_the_arguments_dict_and_converts_the_result() -> None:
    seen: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"booked": arguments["room"], "nights": arguments["nights"]}

    result = SchemaTool(SPEC, handler).execute(call('{"room": "red", "nights": 2}'), context())
    assert seen == [{"room": "red", "nights": 2}]
    assert result == ToolExecutionResult(
        text='{"booked":"red","nights":2}', value={"booked": "red", "nights": 2}
    )


@pytest.mark.parametrize(
    ("returned", "text"),
    [
        ("as is", "as is"),
        (None, "Success"),
        ([1, 2], "[1,2]"),
    ],
)
def test_result_text(returned: Any, text: str) -> None:
    result = SchemaTool(SPEC, lambda _: returned).execute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.text, result.value, result.is_error) == (text, returned, False)


def test_pydantic_model_result_is_json() -> None:
    class Booking(BaseModel):
        room: str

    result = SchemaTool(SPEC, lambda args: Booking(room=args["room"])).execute(
        call('{"room": "blue", "nights": 1}'), context()
    )
    assert result.text == '{"room":"blue"}'
    assert isinstance(result.value, Booking)


def test_validation_errors_use_the_shared_format() -> None:
    tool = SchemaTool(SPEC, dict)
    result = tool.execute(call('{"room": "green", "nights": "2", "cty": "Paris"}'), context())
    assert result.is_error and result.error_kind == "arguments"
    assert result.text == (
        "Invalid arguments for tool `book`:\n"
        '- $.room: Input should be one of "red", "blue" (input: "green")\n'
        '- $.nights: Input should be of type integer (input: "2")\n'
        '- $.cty: Unexpected argument (input: "Paris")\n'
        "Correct the arguments and call `book` again."
    )
    assert isinstance(result.exception, ToolArgumentsError)
    assert [e.path for e in result.exception.errors] == ["$.room", "$.nights", "$.cty"]


def test_missing_field_and_other_keywords() -> None:
    result = SchemaTool(SPEC, dict).execute(call('{"nights": 0}'), context())
    assert result.text == (
        "Invalid arguments for tool `book`:\n"
        "- $.nights: 0 is less than the minimum of 1 (input: 0)\n"
        '- $.room: Field required (input: {"nights":0})\n'
        "Correct the arguments and call `book` again."
    )


def test_format_is_checked() -> None:
    result = SchemaTool(SPEC, dict).execute(
        call('{"room": "red", "nights": 1, "day": "2024-13-45"}'), context()
    )
    assert result.error_kind == "arguments"
    assert "- $.day: '2024-13-45' is not a 'date' (input: \"2024-13-45\")" in result.text


def test_invalid_json_and_non_object() -> None:
    tool = SchemaTool(SPEC, dict)
    broken = tool.execute(call('{"room": '), context())
    assert broken.error_kind == "arguments"
    assert "- $: Invalid JSON: EOF while parsing a value" in broken.text
    listed = tool.execute(call("[1, 2]"), context())
    assert "- $: Input should be a JSON object (input: [1,2])" in listed.text


def test_additional_keys_follow_the_schema() -> None:
    open_spec = ToolSpecification(
        name="echo", parameters={"type": "object", "properties": {"a": {"type": "integer"}}}
    )
    result = SchemaTool(open_spec, lambda args: args).execute(
        ToolCall(id="1", name="echo", arguments='{"a": 1, "extra": true}'), context()
    )
    assert result.value == {"a": 1, "extra": True}


def test_validate_arguments_raises_with_every_error() -> None:
    tool = SchemaTool(SPEC, dict)
    assert tool.validate_arguments('{"room": "red", "nights": 3}') == {"room": "red", "nights": 3}
    with pytest.raises(ToolArgumentsError) as raised:
        tool.validate_arguments("{}")
    assert [(e.path, e.message) for e in raised.value.errors] == [
        ("$.room", "Field required"),
        ("$.nights", "Field required"),
    ]


def test_invalid_schema_is_refused_at_construction() -> None:
    bad = ToolSpecification(name="bad", parameters={"type": "object", "properties": 5})
    with pytest.raises(ValueError, match="invalid JSON schema for tool 'bad'"):
        SchemaTool(bad, dict)


def test_empty_string_is_repaired_and_recorded() -> None:
    spec = ToolSpecification(name="ping", parameters={"type": "object", "properties": {}})
    result = SchemaTool(spec, lambda args: args).execute(
        ToolCall(id="1", name="ping", arguments=""), context()
    )
    assert (result.value, result.repairs) == ({}, ("empty arguments read as {}",))


def test_double_encoded_object_is_repaired_and_recorded() -> None:
    result = SchemaTool(SPEC, lambda args: args).execute(
        call('"{\\"room\\": \\"red\\", \\"nights\\": 1}"'), context()
    )
    assert result.value == {"room": "red", "nights": 1}
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_double_encoded_invalid_arguments_keep_the_repair() -> None:
    result = SchemaTool(SPEC, dict).execute(call('"{\\"room\\": \\"red\\"}"'), context())
    assert result.error_kind == "arguments"
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_model_retry_and_exceptions() -> None:
    def retry(_: dict[str, Any]) -> None:
        raise ModelRetry("Room red is full, try blue.")

    def boom(_: dict[str, Any]) -> None:
        raise KeyError("nope")

    arguments = call('{"room": "red", "nights": 1}')
    retried = SchemaTool(SPEC, retry).execute(arguments, context())
    assert (retried.text, retried.error_kind) == ("Room red is full, try blue.", "retry")
    failed = SchemaTool(SPEC, boom).execute(arguments, context())
    assert (failed.text, failed.error_kind) == ("Tool `book` failed: KeyError: 'nope'", "execution")
    assert isinstance(failed.exception, KeyError)


async def test_async_handler_sync_and_async_execution() -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return f"{arguments['room']} x{arguments['nights']}"

    tool = SchemaTool(SPEC, handler)
    arguments = call('{"room": "blue", "nights": 4}')
    assert (await tool.aexecute(arguments, context())).text == "blue x4"
    # `execute` from inside a running loop: the coroutine gets a loop of its own.
    assert tool.execute(arguments, context()).text == "blue x4"


def test_async_handler_from_sync_code() -> None:
    async def handler(arguments: dict[str, Any]) -> int:
        return int(arguments["nights"]) * 2

    assert (
        SchemaTool(SPEC, handler).execute(call('{"room": "red", "nights": 3}'), context()).text
        == "6"
    )


async def test_sync_handler_runs_off_the_event_loop() -> None:
    loop_thread: list[bool] = []

    def handler(_: dict[str, Any]) -> None:
        try:
            asyncio.get_running_loop()
            loop_thread.append(True)
        except RuntimeError:
            loop_thread.append(False)

    await SchemaTool(SPEC, handler).aexecute(call('{"room": "red", "nights": 1}'), context())
    assert loop_thread == [False]


def test_timeout_sync_handler() -> None:
    tool = SchemaTool(SPEC, lambda _: time.sleep(2), timeout=0.05)
    started = time.monotonic()
    result = tool.execute(call('{"room": "red", "nights": 1}'), context())
    assert time.monotonic() - started < 1
    assert (result.text, result.error_kind) == (
        "Tool `book` timed out after 0.05 seconds.",
        "timeout",
    )


async def test_timeout_async_and_sync_handlers_under_aexecute() -> None:
    async def slow(_: dict[str, Any]) -> None:
        await asyncio.sleep(2)

    arguments = call('{"room": "red", "nights": 1}')
    for handler in (slow, lambda _: time.sleep(2)):
        result = await SchemaTool(SPEC, handler, timeout=0.05).aexecute(arguments, context())
        assert result.error_kind == "timeout"


def test_handler_raising_timeout_error_is_an_execution_error() -> None:
    def handler(_: dict[str, Any]) -> None:
        raise TimeoutError("socket")

    result = SchemaTool(SPEC, handler, timeout=5).execute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `book` failed: TimeoutError: socket",
    )


class RecordingExecutor:
    """A `ToolExecutor` handler: receives the (repaired) call and the context."""

    def __init__(self) -> None:
        self.calls: list[tuple[ToolCall, ToolContext[Any]]] = []

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        self.calls.append((call, context))
        return ToolExecutionResult(text="sync " + call.arguments, repairs=("executor repair",))

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        self.calls.append((call, context))
        return ToolExecutionResult(text="async " + call.arguments)


async def test_executor_handler_gets_the_call_after_validation_and_repair() -> None:
    executor = RecordingExecutor()
    tool = SchemaTool(SPEC, executor)
    ctx = context()
    result = tool.execute(call('"{\\"room\\": \\"red\\", \\"nights\\": 1}"'), ctx)
    assert result.text == 'sync {"room":"red","nights":1}'
    assert result.repairs == (
        "arguments were double-encoded as a JSON string: decoded",
        "executor repair",
    )
    assert executor.calls[0][1] is ctx
    result = await tool.aexecute(call('{"room": "blue", "nights": 2}'), ctx)
    assert (result.text, result.repairs) == ('async {"room": "blue", "nights": 2}', ())
    invalid = await tool.aexecute(call('{"room": "blue"}'), ctx)
    assert invalid.error_kind == "arguments"
    assert len(executor.calls) == 2  # invalid arguments never reach the executor


async def test_async_handler_raising_timeout_error_is_an_execution_error() -> None:
    async def handler(_: dict[str, Any]) -> None:
        raise TimeoutError("upstream")

    result = await SchemaTool(SPEC, handler, timeout=5).aexecute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `book` failed: TimeoutError: upstream",
    )
