"""Running tools: context injection, methods, async, timeouts, failures, result text, decoration errors."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import logging
import re
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agentforge_typed import (
    ModelRetry,
    ReturnBehavior,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolService,
    tool,
)
from agentforge_typed.providers._dialects import SchemaDialectError
from agentforge_typed.tools._base import ToolLike


def call(name: str, arguments: str = "{}", id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


# --- the Tool object --------------------------------------------------------------------------------


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


def test_a_tool_is_still_the_function() -> None:
    assert add(2, 3) == 5
    assert add(a=2) == 3
    assert add.__name__ == "add" and add.__doc__ == "Add two numbers."
    assert add.__wrapped__(1, 1) == 2
    assert repr(add).startswith("<Tool 'add' of <function add")


def test_tool_options_are_kept() -> None:
    def run(x: int) -> int:
        return x

    made = tool(
        name="run_it",
        strict=False,
        max_retries=5,
        timeout=2.5,
        sequential=True,
        return_behavior=ReturnBehavior.IMMEDIATE,
    )(run)
    assert (made.name, made.strict, made.max_retries, made.timeout, made.sequential) == (
        "run_it",
        False,
        5,
        2.5,
        True,
    )
    assert made.return_behavior is ReturnBehavior.IMMEDIATE
    assert (add.strict, add.max_retries, add.timeout, add.sequential) == (True, 2, None, False)
    assert add.return_behavior is ReturnBehavior.TO_LLM
    registered: ToolLike = made
    assert registered.specification.name == "run_it"


def test_execute_success_keeps_the_raw_value() -> None:
    result = add.execute(call("add", '{"a": 2, "b": 40}'))
    assert result == ToolExecutionResult(text="42", value=42)
    assert result.error_kind is None and result.exception is None


# --- ToolContext ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Deps:
    user: str


@tool
def whoami(ctx: ToolContext[Deps], greeting: str = "hi") -> str:
    return f"{greeting} {ctx.deps.user} ({ctx.tool_name}, {ctx.tool_call_id}, {ctx.attempt})"


def test_context_is_built_from_the_call_and_deps() -> None:
    result = whoami.execute(call("whoami", id="call_9"), deps=Deps("ada"))
    assert result.text == "hi ada (whoami, call_9, 1)"


async def test_context_given_by_the_caller_is_used_as_is() -> None:
    context = ToolContext(Deps("bob"), "call_2", "whoami", attempt=3, conversation_id="conv")
    result = await whoami.aexecute(call("whoami", '{"greeting": "yo"}'), context)
    assert result.text == "yo bob (whoami, call_2, 3)"


def test_context_is_not_in_the_schema_and_the_model_cannot_fill_it() -> None:
    assert whoami.specification.parameters["properties"] == {
        "greeting": {"default": "hi", "type": "string"}
    }
    assert "ctx" not in whoami.args_model.model_fields
    result = whoami.execute(
        call("whoami", '{"ctx": {"deps": {"user": "mallory"}}}'), deps=Deps("ada")
    )
    assert result.error_kind == "arguments"
    assert "- $.ctx: Unexpected argument; this tool takes: greeting" in result.text


def test_context_forms_are_detected() -> None:
    def bare(context: ToolContext, x: int) -> Any:
        return context.deps

    def optional(x: int, context: ToolContext[int] | None = None) -> Any:
        return context.deps if context else None

    for function in (bare, optional):
        made = tool(function)
        assert list(made.specification.parameters["properties"]) == ["x"]
        assert made.execute(call(made.name, '{"x": 1}'), deps=7).text == "7"


def test_only_one_context_parameter() -> None:
    def twice(a: ToolContext[int], b: ToolContext[int]) -> None: ...

    with pytest.raises(TypeError, match=r"tool `twice`.*parameter `b`: only one parameter"):
        tool(twice)


# --- methods ----------------------------------------------------------------------------------------


class Inventory:
    def __init__(self, stock: dict[str, int]) -> None:
        self.stock = stock

    @tool
    def count(self, sku: str) -> int:
        """Units in stock."""
        return self.stock.get(sku, 0)

    @tool
    async def acount(self, sku: str, ctx: ToolContext[str]) -> str:
        return f"{ctx.deps}:{self.stock.get(sku, 0)}"

    @tool
    @staticmethod
    def unit(sku: str) -> str:
        return "pcs"

    @tool
    @classmethod
    def kind(cls, sku: str) -> str:
        return cls.__name__


def test_method_tool_is_bound_through_an_instance() -> None:
    inventory = Inventory({"a": 3})
    bound = inventory.count
    assert bound.specification.parameters["properties"] == {"sku": {"type": "string"}}
    assert bound.description == "Units in stock."
    assert bound("a") == 3
    assert bound.execute(call("count", '{"sku": "a"}')).text == "3"
    assert inventory.count is bound  # cached on the instance
    assert Inventory({"a": 5}).count.execute(call("count", '{"sku": "a"}')).text == "5"


async def test_async_method_tool_with_context() -> None:
    result = await Inventory({"a": 3}).acount.aexecute(call("acount", '{"sku": "a"}'), deps="wh")
    assert result.text == "wh:3"


def test_unbound_method_tool_refuses_to_execute() -> None:
    unbound = Inventory.count
    assert unbound.specification.parameters["properties"] == {"sku": {"type": "string"}}
    with pytest.raises(TypeError, match="tool `count` is a method"):
        unbound.execute(call("count", '{"sku": "a"}'))
    assert unbound(Inventory({"a": 1}), "a") == 1


def test_static_and_class_method_tools() -> None:
    assert Inventory.unit.execute(call("unit", '{"sku": "a"}')).text == "pcs"
    assert Inventory({}).unit.execute(call("unit", '{"sku": "a"}')).text == "pcs"
    assert Inventory.kind.execute(call("kind", '{"sku": "a"}')).text == "Inventory"
    assert Inventory({}).kind.specification.parameters["required"] == ["sku"]


# --- async and threads ------------------------------------------------------------------------------


@tool
async def slow_echo(text: str, delay: float = 0.0) -> str:
    await asyncio.sleep(delay)
    return text


@tool
def where() -> int:
    return threading.get_ident()


async def test_async_tool_through_aexecute() -> None:
    assert (await slow_echo.aexecute(call("slow_echo", '{"text": "hi"}'))).text == "hi"


def test_async_tool_through_sync_execute() -> None:
    assert slow_echo.execute(call("slow_echo", '{"text": "hi"}')).text == "hi"


async def test_async_tool_through_sync_execute_inside_a_running_loop() -> None:
    assert slow_echo.execute(call("slow_echo", '{"text": "hi"}')).text == "hi"


async def test_sync_tool_through_aexecute_runs_in_a_worker_thread() -> None:
    result = await where.aexecute(call("where"))
    assert result.value != threading.get_ident()
    assert where.execute(call("where")).value == threading.get_ident()


# --- timeouts ---------------------------------------------------------------------------------------


def blocking_sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def test_sync_timeout_abandons_the_thread_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    slow = tool(timeout=0.05)(blocking_sleep)
    with caplog.at_level(logging.WARNING, logger="agentforge_typed"):
        started = time.monotonic()
        result = slow.execute(call("blocking_sleep", '{"seconds": 0.5}'))
    assert time.monotonic() - started < 0.4
    assert (result.is_error, result.error_kind) == (True, "timeout")
    assert result.text == "Tool `blocking_sleep` timed out after 0.05 seconds."
    assert "'blocking_sleep' timed out after 0.05s" in caplog.text
    assert slow.execute(call("blocking_sleep", '{"seconds": 0}')).text == "done"


async def test_sync_timeout_through_aexecute() -> None:
    slow = tool(timeout=0.05)(blocking_sleep)
    result = await slow.aexecute(call("blocking_sleep", '{"seconds": 0.5}'))
    assert result.error_kind == "timeout"
    assert (await slow.aexecute(call("blocking_sleep", '{"seconds": 0}'))).text == "done"


async def test_async_timeout_cancels_the_task() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.05)
    async def wait_forever() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    result = await wait_forever.aexecute(call("wait_forever"))
    assert result.error_kind == "timeout"
    assert cancelled.is_set()


def test_async_timeout_through_sync_execute() -> None:
    fast_limit = tool(timeout=0.05)(slow_echo.__wrapped__)
    assert fast_limit.execute(call("slow_echo", '{"text": "a", "delay": 1}')).error_kind == (
        "timeout"
    )
    assert fast_limit.execute(call("slow_echo", '{"text": "a"}')).text == "a"


def test_a_timeout_error_raised_by_the_tool_is_an_execution_error() -> None:
    @tool(timeout=1)
    def flaky() -> None:
        raise TimeoutError("upstream timed out")

    result = flaky.execute(call("flaky"))
    assert result.error_kind == "execution"
    assert result.text == "Tool `flaky` failed: TimeoutError: upstream timed out"


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        tool(timeout=0)(blocking_sleep)


# --- failures ---------------------------------------------------------------------------------------


@tool
def lookup(key: str) -> str:
    if key == "retry":
        raise ModelRetry("Unknown key; use one of: a, b")
    if key == "boom":
        raise KeyError(key)
    return key


@pytest.mark.parametrize("execute", ["sync", "async"])
async def test_model_retry_and_exceptions_become_error_results(execute: str) -> None:
    async def run(arguments: str) -> ToolExecutionResult:
        if execute == "sync":
            return lookup.execute(call("lookup", arguments))
        return await lookup.aexecute(call("lookup", arguments))

    retry = await run('{"key": "retry"}')
    assert (retry.text, retry.error_kind, retry.is_error) == (
        "Unknown key; use one of: a, b",
        "retry",
        True,
    )
    assert isinstance(retry.exception, ModelRetry)
    failed = await run('{"key": "boom"}')
    assert (failed.text, failed.error_kind) == (
        "Tool `lookup` failed: KeyError: 'boom'",
        "execution",
    )
    assert isinstance(failed.exception, KeyError)
    assert "Traceback" not in failed.text
    invalid = await run('{"key": 1}')
    assert invalid.error_kind == "arguments"
    assert isinstance(invalid.exception, ToolArgumentsError)


# --- results ----------------------------------------------------------------------------------------


class Mood(str, enum.Enum):
    HAPPY = "happy"


class Receipt(BaseModel):
    order_id: str = Field(serialization_alias="orderId")
    total: Decimal


class DetailedReceipt(Receipt):
    secret: str = "s3cret"


@dataclasses.dataclass
class Slot:
    start: dt.datetime
    free: bool


def returning(value: Any, annotation: Any) -> Tool[..., Any]:
    def result() -> Any:
        return value

    result.__annotations__ = {"return": annotation}
    return tool(result)


@pytest.mark.parametrize(
    ("value", "annotation", "text"),
    [
        ("plain text", str, "plain text"),
        (None, None, "Success"),
        (None, type(None), "Success"),
        (42, int, "42"),
        (2.5, float, "2.5"),
        (True, bool, "true"),
        ({"a": [1, 2]}, dict[str, list[int]], '{"a":[1,2]}'),
        ([1, "x"], list[Any], '[1,"x"]'),
        (Receipt(order_id="o1", total=Decimal("9.90")), Receipt, '{"orderId":"o1","total":"9.90"}'),
        # Serialized as the declared type: the subclass's extra field stays out.
        (
            DetailedReceipt(order_id="o1", total=Decimal("1")),
            Receipt,
            '{"orderId":"o1","total":"1"}',
        ),
        (
            Slot(dt.datetime(2024, 5, 1, 9, 30), True),
            Slot,
            '{"start":"2024-05-01T09:30:00","free":true}',
        ),
        (dt.date(2024, 5, 1), dt.date, '"2024-05-01"'),
        (Decimal("0.10"), Decimal, '"0.10"'),
        (Mood.HAPPY, Mood, "happy"),
        ({"when": dt.time(10, 0)}, Any, '{"when":"10:00:00"}'),
        ({"n": 1}, inspect_empty := object(), '{"n":1}'),
    ],
)
def test_result_text(value: Any, annotation: Any, text: str) -> None:
    made = returning(value, annotation) if annotation is not inspect_empty else unannotated(value)
    result = made.execute(call("result"))
    assert (result.text, result.is_error) == (text, False)
    assert result.value is value


def unannotated(value: Any) -> Tool[..., Any]:
    def result():  # type: ignore[no-untyped-def]
        return value

    return tool(result)


def test_async_result_is_converted_by_its_declared_type() -> None:
    @tool
    async def receipt() -> Receipt:
        return DetailedReceipt(order_id="o1", total=Decimal("2"))

    assert receipt.execute(call("receipt")).text == '{"orderId":"o1","total":"2"}'


EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def mask_emails(value: dict[str, str]) -> str:
    return EMAIL.sub("***@***", ", ".join(f"{k}={v}" for k, v in value.items()))


def test_result_converter_overrides_the_conversion() -> None:
    @tool(result_converter=mask_emails)
    def customer(id: str) -> dict[str, str]:
        return {"name": "Ada", "email": "ada@example.com"}

    result = customer.execute(call("customer", '{"id": "1"}'))
    assert result.text == "name=Ada, email=***@***"
    assert result.value == {"name": "Ada", "email": "ada@example.com"}


def test_conversion_failures_say_the_tool_ran() -> None:
    def explode(value: Any) -> str:
        raise ValueError("cannot convert")

    broken = tool(result_converter=explode)(add.__wrapped__)
    result = broken.execute(call("add", '{"a": 1}'))
    assert (result.error_kind, result.text, result.value) == (
        "unreadable_result",
        "Tool `add` ran, but its result could not be read (ValueError: cannot convert). Its "
        "effects, if any, took place: do not call it again to get the result.",
        2,  # the value stays for the program
    )
    unserializable = returning(object(), Any).execute(call("result"))
    assert unserializable.error_kind == "unreadable_result"
    assert unserializable.text.startswith(
        "Tool `result` ran, but its result could not be read (PydanticSerializationError:"
    )


# --- decoration errors ------------------------------------------------------------------------------


class Opaque:
    pass


def star_args(*names: str) -> None: ...
def star_kwargs(**options: int) -> None: ...
def unannotated_parameter(city, days: int) -> None: ...  # type: ignore[no-untyped-def]
def opaque(thing: Opaque) -> None: ...
def callback(on_done: Callable[[int], None]) -> None: ...
def unresolvable(x: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (star_args, r"tool `star_args` .*parameter `names`: `\*names` is not supported"),
        (star_kwargs, r"tool `star_kwargs` .*parameter `options`: `\*\*options` is not supported"),
        (unannotated_parameter, r"parameter `city`: missing type annotation"),
        (opaque, r"tool `opaque` .*parameter `thing`: type .*Opaque.* cannot be expressed"),
        (callback, r"tool `callback` .*parameter `on_done`: type .*Callable.* cannot be expressed"),
        (unresolvable, r"tool `unresolvable` .*cannot resolve its type annotations: .*Missing"),
    ],
)
def test_decoration_errors_name_function_and_parameter(
    function: Callable[..., Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        tool(function)


@pytest.mark.parametrize("name", ["", "has space", "a" * 65, "dots.not.allowed", "ünï"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name=name)(add.__wrapped__)


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ValueError, match="invalid tool name '<lambda>'"):
        tool(lambda: None)
    assert tool(name="noop")(lambda: None).execute(call("noop")).text == "Success"


def test_strict_schema_refuses_at_registration_what_openai_strict_cannot_express() -> None:
    def scores(by_name: dict[str, int]) -> None: ...

    strict = tool(strict_schema=True)(scores)  # decoration renders no provider's dialect
    with pytest.raises(SchemaDialectError, match="by_name"):
        ToolService([strict])
    assert tool(scores).specification.strict_schema is False


def test_locally_defined_types_resolve_under_future_annotations() -> None:
    class Local(BaseModel):
        x: int

    @tool
    def use(local: Local) -> int:
        return local.x

    assert use.execute(call("use", '{"local": {"x": 4}}')).text == "4"
