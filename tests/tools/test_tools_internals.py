"""Tool internals: options declared once, one validated-arguments shape, one event-loop policy."""

from __future__ import annotations

import functools
import inspect
import json
import typing
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from agentforge_typed import ReturnBehavior, Tool, ToolCall, tool
from agentforge_typed.tools import ToolOptions, _signature


def call(name: str, arguments: str = "{}", id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


# --- options ----------------------------------------------------------------------------------------


def test_tool_options_are_declared_once_and_shared_by_tool_and_the_decorator() -> None:
    # Neither the decorator nor `Tool` repeats the option list: both take `**ToolOptions`.
    for function in (tool, Tool.__init__):
        kinds = {p.kind for p in inspect.signature(function).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD in kinds
    assert set(typing.get_type_hints(ToolOptions)) == {
        "name",
        "description",
        "strict",
        "strict_schema",
        "return_behavior",
        "max_retries",
        "timeout",
        "sequential",
        "result_converter",
        "extra_arguments",
        "requires_approval",
        "external",
        "retry_safe",
        "max_result_chars",
        "content_urls",
        "annotations",
        "cache",
        "cache_shared",
        "cache_force",
    }


def test_tool_options_reach_the_tool_alike_through_the_decorator_and_the_class() -> None:
    def lookup(key: str) -> str:
        return key

    options: ToolOptions = {
        "name": "find",
        "description": "Find a key.",
        "strict": False,
        "return_behavior": ReturnBehavior.IMMEDIATE,
        "max_retries": 5,
        "timeout": 3.0,
        "sequential": True,
        "result_converter": lambda value: f"<{value}>",
        "extra_arguments": "ignore",
    }
    for built in (tool(**options)(lookup), Tool(lookup, **options)):
        assert (built.name, built.description, built.strict) == ("find", "Find a key.", False)
        assert built.return_behavior is ReturnBehavior.IMMEDIATE
        assert (built.max_retries, built.timeout, built.sequential) == (5, 3.0, True)
        assert built.extra_arguments == "ignore"
        result = built.execute(call("find", '{"key": "k", "other": 1}'))
        assert result.text == "<k>"
        assert result.repairs == ("dropped unknown argument `other`",)


def test_tool_option_defaults() -> None:
    def lookup(key: str) -> str:
        return key

    built = Tool(lookup)
    assert (built.name, built.strict, built.max_retries, built.timeout) == ("lookup", True, 2, None)
    assert built.return_behavior is ReturnBehavior.TO_LLM
    assert (built.sequential, built.extra_arguments) == (False, "forbid")
    assert built.specification.strict_schema is False


def test_unknown_tool_option_is_refused() -> None:
    with pytest.raises(TypeError):
        tool(retries=3)  # type: ignore[call-overload]


def test_mcp_server_options_are_declared_once() -> None:
    from agentforge_typed import MCPServer
    from agentforge_typed.tools import MCPServerOptions

    options: MCPServerOptions = {
        "timeout": 5.0,
        "connect_timeout": 7.0,
        "tool_prefix": "fs_",
        "return_behavior": ReturnBehavior.IMMEDIATE,
        "max_retries": 4,
        "sequential": True,
    }
    for server in (
        MCPServer.stdio("server-cmd", ["--flag"], **options),
        MCPServer.http("http://127.0.0.1:1/mcp", **options),
    ):
        assert (server.timeout, server.connect_timeout, server.tool_prefix) == (5.0, 7.0, "fs_")
        assert server.return_behavior is ReturnBehavior.IMMEDIATE
        assert (server.max_retries, server.sequential) == (4, True)
    defaults = MCPServer.http("http://127.0.0.1:1/mcp")
    assert (defaults.timeout, defaults.connect_timeout, defaults.max_retries) == (30.0, 30.0, 2)
    with pytest.raises(TypeError, match="unknown MCPServer option"):
        MCPServer.stdio("server-cmd", retries=1)  # type: ignore[call-arg]


# --- validated arguments: one shape, one validator ---------------------------------------------------


def test_typed_and_schema_tools_share_one_validated_arguments_shape() -> None:
    from agentforge_typed import SchemaTool, ToolSpecification
    from agentforge_typed.tools._outcomes import ValidatedArguments

    @tool
    def add(a: int, b: int = 0) -> int:
        return a + b

    spec = ToolSpecification(
        name="add",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    )
    schema_add = SchemaTool(spec, lambda arguments: arguments["a"])
    for raw in ('{"a": 1}', '"{\\"a\\": 1}"', '{"a": "x"}', "[1]"):
        typed = add._validator.validate(raw)
        declared = schema_add._arguments.validate(raw)
        assert type(typed) is type(declared) is ValidatedArguments
        assert (typed.arguments is None) == (declared.arguments is None)
        assert typed.repairs == declared.repairs
        assert bool(typed.errors) == bool(declared.errors)
    assert add._validator.validate('"{\\"a\\": 1}"') == ValidatedArguments(
        ({"a": 1, "b": 0}, None, {"a"}),
        repairs=("arguments were double-encoded as a JSON string: decoded",),
    )
    invalid = add._validator.validate('{"a": "x"}')
    assert invalid.error_result("add").error_kind == "arguments"


CASES = [
    '{"a": 2, "b": 3}',
    '{"a": 2}',
    "",
    '"{\\"a\\": 2}"',
    '{"a": "2"}',
    '{"a": 2, "c": 1}',
    '{"a": 1e400}',
    "not json",
]


@pytest.mark.parametrize("raw", CASES)
async def test_execute_and_aexecute_validate_alike(raw: str) -> None:
    @tool
    def add(a: int = 1, b: int = 0) -> int:
        return a + b

    sync = add.execute(call("add", raw))
    asynchronous = await add.aexecute(call("add", raw))
    assert sync == asynchronous
    if not sync.is_error:
        assert (
            add.validate_arguments(raw).model_dump()["a"]
            + add.validate_arguments(raw).model_dump()["b"]
            == sync.value
        )


def test_validate_arguments_returns_the_model_with_its_fields() -> None:
    class Point(typing.NamedTuple):
        x: int
        y: int

    @tool
    def move(point: Point, label: str = "p") -> str:
        return label

    validated = move.validate_arguments('{"point": [1, 2]}')
    assert isinstance(validated, move.args_model)
    assert validated.model_dump() == {"point": Point(1, 2), "label": "p"}
    assert validated.model_fields_set == {"point"}  # as the model's own validation sets it
    # Every tool call validates through the one fields validator, whichever driver.
    assert move._validate_fields == move._validator.validate_json


def test_args_model_is_built_at_first_use_once_for_every_bound_copy() -> None:
    class Shelf:
        @tool
        def take(self, _slot: int, json: str = "j", /, *, count: int = 1) -> str:
            return f"{_slot}{json}{count}"

    unbound = Shelf.__dict__["take"]
    assert "_args_model" not in unbound._signature.__dict__  # decoration did not build it
    first, second = Shelf().take, Shelf().take
    assert first.execute(call("take", '{"_slot": 2, "count": 3}')).text == "2j3"
    assert first.args_model is second.args_model is unbound.args_model
    assert list(first.args_model.model_fields) == ["arg0_slot", "arg1_json", "count"]
    validated = second.validate_arguments('{"_slot": 2, "json": "x"}')
    assert validated.model_dump(by_alias=True) == {"_slot": 2, "json": "x", "count": 1}
    assert validated.model_fields_set == {"arg0_slot", "arg1_json"}


class _Line(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1)]


class _Node(BaseModel):
    name: str
    children: list[_Node] = []


class _Shape(str, Enum):
    ROUND = "round"
    SQUARE = "square"


def _order(lines: list[_Line], note: str | None = None) -> str:
    """Place an order.

    Args:
        lines: What to order.
        note: For the courier.
    """
    return "ok"


def _renamed(_slot: int, json: str = "j", model_x: bool = False) -> str:
    return "ok"


def _aliased(
    count: Annotated[int, Field(alias="n", description="How many.")],
    shape: _Shape = _Shape.ROUND,
    kind: Literal["a", "b"] = "a",
) -> str:
    return "ok"


def _tree(root: _Node, depth: int = 2) -> str:
    return "ok"


def _renamed_aliased(
    _n: Annotated[int, Field(alias="n")] = 0, json: Annotated[int, Field(alias="j")] = 0
) -> str:
    return f"{_n} {json}"


_PROBES = [
    "{}",
    '{"lines": [{"sku": "a", "quantity": 2}], "note": null}',
    '{"lines": [{"sku": "a", "quantity": 0, "extra": 1}]}',
    '{"_slot": 3, "json": "x", "model_x": true, "other": 1}',
    '{"_slot": "3"}',
    '{"n": 2, "shape": "square", "kind": "b"}',
    '{"n": 2, "shape": "oval", "kind": "c", "count": 1}',
    '{"root": {"name": "r", "children": [{"name": "c", "children": [], "x": 1}]}}',
    '{"root": {"name": "r"}, "depth": 1.5}',
    '{"n": 1, "j": 2, "_n": 3}',
    "[1, 2]",
]


@pytest.mark.parametrize("function", [_order, _renamed, _aliased, _tree, _renamed_aliased])
def test_without_pydantics_private_schema_api_the_model_gives_the_same_arguments(
    function: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decoration generates the arguments' schema through pydantic's private API; a pydantic that
    # moved it must still get the same schema, validation and errors (through `args_model`).
    direct = _signature.inspect_function(function, name="t", has_receiver=False)

    def moved(*args: Any) -> Any:
        raise AttributeError("'GenerateSchema' object has no attribute '_generate_md_field_schema'")

    monkeypatch.setattr(_signature, "_generated_fields", moved)
    fallback = _signature.inspect_function(function, name="t", has_receiver=False)
    assert "_args_model" in fallback.__dict__  # the model built for its schema is kept
    assert fallback.parameters == direct.parameters
    assert fallback.argument_names == direct.argument_names
    for raw in _PROBES:
        assert _outcome(fallback.validator, raw) == _outcome(direct.validator, raw), raw
    # A tool built that way runs.
    monkeypatch.setattr(_signature, "_generated_fields", moved)
    assert tool(_renamed).execute(call("_renamed", '{"_slot": 1}')).text == "ok"


def test_a_renamed_parameters_own_alias_names_it_in_the_args_model_too() -> None:
    # `args_model` stores `_n` and `json` under other field names; their own aliases still name
    # them there, as in the schema and the validator.
    renamed = tool(_renamed_aliased)
    assert list(renamed.specification.parameters["properties"]) == ["n", "j"]
    assert list(renamed.args_model.model_json_schema()["properties"]) == ["n", "j"]
    assert renamed.execute(call("_renamed_aliased", '{"n": 1, "j": 2}')).text == "1 2"
    assert renamed.validate_arguments('{"n": 1}').model_dump(by_alias=True) == {"n": 1, "j": 0}
    assert renamed.args_model.model_validate({"n": 1, "j": 2}).model_dump(by_alias=True) == {
        "n": 1,
        "j": 2,
    }


def _outcome(validator: Any, raw: str) -> Any:
    try:
        return validator.validate_json(raw, strict=True)
    except ValidationError as error:
        return error.errors(include_url=False)


# --- one event-loop policy ---------------------------------------------------------------------------


async def test_async_tool_and_async_model_function_behave_alike_under_a_running_loop() -> None:
    import asyncio
    import threading

    from agentforge_typed import AiMessage, ChatRequest, FunctionModel, UserMessage

    threads: list[str] = []

    async def model_fn(messages: object, parameters: object) -> AiMessage:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return AiMessage(text="ok")

    @tool
    async def ping() -> str:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return "pong"

    # Blocking calls made from inside this test's running loop.
    assert ping.execute(call("ping")).text == "pong"
    request = ChatRequest(messages=[UserMessage(content="hi")])
    assert FunctionModel(model_fn).chat(request).ai_message.text == "ok"
    main = threading.current_thread().name
    assert len(threads) == 2 and main not in threads


def test_run_sync_without_a_loop_runs_in_this_thread() -> None:
    import threading

    from agentforge_typed._sync import run_sync

    async def where() -> str:
        return threading.current_thread().name

    assert run_sync(where) == threading.current_thread().name


def test_argument_problem_is_the_documented_name_of_the_argument_error_record() -> None:
    import agentforge_typed
    from agentforge_typed import ToolArgumentsError
    from agentforge_typed.tools import ArgumentProblem

    with pytest.warns(DeprecationWarning, match="ArgumentError is deprecated: use ArgumentProblem"):
        assert agentforge_typed.ArgumentError is ArgumentProblem
    assert "ArgumentError" not in agentforge_typed.__all__
    assert not issubclass(ArgumentProblem, BaseException)
    assert "ArgumentProblem" in agentforge_typed.tools.__all__

    @tool
    def f(n: int) -> int:
        return n

    with pytest.raises(ToolArgumentsError) as raised:
        f.validate_arguments('{"n": "1"}')
    assert raised.value.errors == (ArgumentProblem("$.n", "Input should be a valid integer", "1"),)


# --- a sync tool that returns an awaitable ---------------------------------------------------------


def sync_wrapper_tools() -> list[Any]:
    import asyncio
    import functools

    async def fetch(city: str) -> str:
        await asyncio.sleep(0)
        return f"sunny in {city}"

    async def broken(city: str) -> str:
        await asyncio.sleep(0)
        raise LookupError(city)

    def logged(fn: Any) -> Any:
        # A sync decorator around an async function: calling it returns a coroutine.
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    return [tool(logged(fetch)), tool(logged(broken)), tool(timeout=5)(logged(fetch))]


@pytest.mark.parametrize("index", [0, 1, 2])
async def test_a_sync_tool_returning_an_awaitable_is_awaited_under_every_driver(index: int) -> None:
    import asyncio

    from agentforge_typed import (
        AiMessage,
        FunctionModel,
        ToolResultMessage,
        ToolService,
        UserMessage,
    )

    wrapped = sync_wrapper_tools()[index]
    name = wrapped.name
    arguments = '{"city": "Oslo"}'
    expected = "sunny in Oslo" if name == "fetch" else "Tool `broken` failed: LookupError: Oslo"
    assert (await asyncio.to_thread(wrapped.execute, call(name, arguments))).text == expected
    assert wrapped.execute(call(name, arguments)).text == expected  # under this running loop
    assert (await wrapped.aexecute(call(name, arguments))).text == expected

    def reply(messages: Any, parameters: Any) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=messages[-1].text)
        return AiMessage(tool_calls=[ToolCall(id="c", name=name, arguments=arguments)])

    service = ToolService([wrapped])
    messages = [UserMessage(content="weather?")]
    blocking = await asyncio.to_thread(lambda: service.chat(FunctionModel(reply), messages))
    concurrent = await service.achat(FunctionModel(reply), messages)
    assert blocking.final_response.ai_message.text == expected
    assert concurrent.final_response.ai_message.text == expected
    assert blocking.tool_executions[0].result.value == concurrent.tool_executions[0].result.value


def test_is_awaitable_answers_like_inspect() -> None:
    import asyncio
    import inspect

    from agentforge_typed.tools._invoke import NEVER_AWAITABLE, is_awaitable

    class Custom:
        def __await__(self) -> Any:
            yield

    async def coroutine_function() -> None:
        pass

    def generator() -> Any:
        yield

    coroutine = coroutine_function()
    loop = asyncio.new_event_loop()
    try:
        values = [
            "s",
            None,
            1,
            {"a": 1},
            [1],
            Custom(),
            coroutine,
            generator(),
            loop.create_future(),
        ]
        for value in values:
            assert is_awaitable(value) == inspect.isawaitable(value)
            assert is_awaitable(value) == inspect.isawaitable(value)  # from the cache
        # What `execute` rules out without asking (exact classes: a subclass may add `__await__`).
        for cls in NEVER_AWAITABLE:
            assert not hasattr(cls, "__await__") and not issubclass(cls, typing.Awaitable)
    finally:
        coroutine.close()
        loop.close()


def test_declared_awaitable_returns_are_awaited() -> None:
    import asyncio
    from collections.abc import Awaitable, Coroutine

    async def later(text: str) -> str:
        await asyncio.sleep(0)
        return text

    @tool
    def declared(text: str) -> Awaitable[str]:
        return later(text)

    @tool
    def maybe(text: str) -> str | Coroutine[Any, Any, str]:
        return later(text)

    @tool
    def untyped(text: str):  # type: ignore[no-untyped-def]
        return later(text)

    for awaiting in (declared, maybe, untyped):
        assert awaiting.execute(call(awaiting.name, '{"text": "hi"}')).text == "hi"


def test_any_and_object_returns_are_checked_for_awaitables() -> None:
    import asyncio

    async def later() -> str:
        await asyncio.sleep(0)
        return "done"

    @tool
    def any_result() -> Any:
        return later()

    @tool
    def object_result() -> object:
        return later()

    for awaiting in (any_result, object_result):
        assert awaiting.execute(call(awaiting.name)).text == "done"


class _Later:
    """An awaitable that is not a coroutine (its own `__await__`)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __await__(self) -> typing.Generator[None, None, str]:
        yield None
        return self.value


async def _sunny(city: str) -> str:
    import asyncio

    await asyncio.sleep(0)
    if city == "Nowhere":
        raise LookupError(city)
    return f"sunny in {city}"


class _Desk:
    def forecast(self, city: str) -> str:
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]

    @tool
    def outlook(self, city: str) -> str:
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]


def _forecast_for(days: int, city: str) -> str:
    """Forecast."""
    return _sunny(city)  # type: ignore[return-value]


class _Forecaster:
    def __call__(self, city: str) -> str:
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]


def _unannounced_awaitables() -> list[Tool[..., Any]]:
    """Sync tools returning an awaitable that their return annotation rules out."""

    def forecast(city: str) -> str:
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]

    def forecast_dict(city: str) -> dict[str, str]:
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]

    def forecast_later(city: str) -> str:
        """Forecast."""
        return _Later(f"sunny in {city}")  # type: ignore[return-value]

    def unwrapped_wrapper(city: str) -> str:  # a decorator that does not `functools.wraps`
        """Forecast."""
        return _sunny(city)  # type: ignore[return-value]

    return [
        tool(forecast),
        tool(forecast_dict),
        tool(forecast_later),
        tool(unwrapped_wrapper),
        tool(_Desk().forecast),
        _Desk().outlook,  # a method tool, bound
        tool(functools.partial(_forecast_for, 3)),
        tool(_Forecaster()),
        tool(strict=False)(forecast),  # lax validation: the same fast path
    ]


@pytest.mark.parametrize("index", range(9))
@pytest.mark.parametrize("city", ["Oslo", "Nowhere"])
def test_an_awaitable_the_annotation_does_not_announce_is_awaited_under_every_driver(
    index: int, city: str
) -> None:
    import asyncio

    from loop_drivers import DRIVERS, drive

    from agentforge_typed import AiMessage, FunctionModel, ToolResultMessage, ToolService

    wrapped = _unannounced_awaitables()[index]
    arguments = json.dumps({"city": city})
    if city == "Oslo" or index == 2:
        expected = "sunny in Oslo" if city == "Oslo" else "sunny in Nowhere"
    else:
        expected = f"Tool `{wrapped.name}` failed: LookupError: Nowhere"
    assert wrapped.execute(call(wrapped.name, arguments)).text == expected

    async def under_a_running_loop() -> tuple[str, str]:
        blocking = wrapped.execute(call(wrapped.name, arguments))
        return blocking.text, (await wrapped.aexecute(call(wrapped.name, arguments))).text

    assert asyncio.run(under_a_running_loop()) == (expected, expected)

    def reply(messages: Any, parameters: Any) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=messages[-1].text)
        return AiMessage(tool_calls=[ToolCall(id="c", name=wrapped.name, arguments=arguments)])

    for driver in DRIVERS:
        result = drive(driver, ToolService([wrapped]), FunctionModel(reply), "weather?")
        assert result.final_response.ai_message.text == expected, driver
        assert result.tool_executions[0].result.is_error is (expected != f"sunny in {city}")


def test_usage_limit_exceeded_is_the_deprecated_name_of_usage_limit_exceeded_error() -> None:
    import agentforge_typed
    from agentforge_typed import AgentForgeError, UsageLimitExceededError

    with pytest.warns(DeprecationWarning, match="use UsageLimitExceededError"):
        old = agentforge_typed.UsageLimitExceeded
    assert old is UsageLimitExceededError and issubclass(old, AgentForgeError)
    assert "UsageLimitExceeded" not in agentforge_typed.__all__
    with pytest.raises(AttributeError, match="no attribute 'UsageLimitExceed'"):
        agentforge_typed.UsageLimitExceed  # type: ignore[attr-defined]  # noqa: B018


def test_the_loops_fast_constructors_build_what_the_classes_build() -> None:
    from dataclasses import fields
    from datetime import datetime, timezone

    from agentforge_typed import ToolContext, ToolExecution, ToolExecutionResult
    from agentforge_typed._records import new_execution
    from agentforge_typed.tools._base import _CONTEXT_FIELDS, run_context

    assert _CONTEXT_FIELDS == tuple(f.name for f in fields(ToolContext))
    values = ({"user": "ada"}, "c1", "lookup", 2, "conv", print, True, "yes", list)
    made, built = run_context(*values), ToolContext(*values)
    assert made == built and repr(made) == repr(built)
    assert [getattr(made, name) for name in _CONTEXT_FIELDS] == list(values)
    call = ToolCall(id="c1", name="lookup", arguments="{}")
    now = datetime.now(timezone.utc)
    result = ToolExecutionResult(text="ok")
    assert new_execution(call, result, now, now) == ToolExecution(call, result, now, now)
