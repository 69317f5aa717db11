from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
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
    ModelRetry,
    ReturnBehavior,
    SchemaDialectError,
    SystemMessage,
    TokenUsage,
    ToolArgumentsError,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolLoopLimitError,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    UnknownToolError,
    UserMessage,
    available_tools_handler,
    list_available_tools,
    logging_hook,
    tool,
)
from agentforge_typed.tools._base import ToolLike

Turn = AiMessage | Callable[[Sequence[ChatMessage]], AiMessage]


class Script:
    """A FunctionModel playing fixed turns and recording every request it saw."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen: list[tuple[list[ChatMessage], ChatRequestParameters]] = []
        self.model = FunctionModel(self._reply)

    def _reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> ChatResponse:
        self.seen.append((list(messages), parameters))
        turn = self.turns.pop(0)
        message = turn if isinstance(turn, AiMessage) else turn(messages)
        reason = FinishReason.TOOL_EXECUTION if message.has_tool_calls else FinishReason.STOP
        usage = TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return ChatResponse(ai_message=message, finish_reason=reason, token_usage=usage)


def call(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments))


def calls(*tool_calls: ToolCall, text: str | None = None) -> AiMessage:
    return AiMessage(text=text, tool_calls=tool_calls)


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Callable[..., ToolChatResult[None]]:
    def run_chat(
        service: ToolService, script: Script, messages: Sequence[ChatMessage], **kw: Any
    ) -> ToolChatResult[None]:
        if request.param == "sync":
            return service.chat(script.model, messages, **kw)
        return asyncio.run(service.achat(script.model, messages, **kw))

    return run_chat


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        unit: celsius or fahrenheit.
    """
    return f"{city}: 18 degrees {unit}, cloudy"


def results_of(result: ToolChatResult[None]) -> list[ToolResultMessage]:
    return [m for m in result.messages if isinstance(m, ToolResultMessage)]


def test_two_round_weather_exchange(run: Callable[..., ToolChatResult[None]]) -> None:
    script = Script(
        calls(call("c1", "get_weather", city="Paris")), AiMessage(text="18°C in Paris.")
    )
    service = ToolService([get_weather])
    question = [UserMessage(content="Weather in Paris?")]
    result = run(service, script, question)

    assert result.text == "18°C in Paris."
    assert result.final_response.finish_reason is FinishReason.STOP
    assert [type(m).__name__ for m in result.messages] == [
        "UserMessage",
        "AiMessage",
        "ToolResultMessage",
        "AiMessage",
    ]
    (tool_result,) = results_of(result)
    assert tool_result == ToolResultMessage(
        tool_call_id="c1", tool_name="get_weather", text="Paris: 18 degrees celsius, cloudy"
    )
    # The second request carried the whole history; tools were offered both times.
    assert [len(messages) for messages, _ in script.seen] == [1, 3]
    assert all(p.tools == (get_weather.specification,) for _, p in script.seen)
    assert len(result.intermediate_responses) == 1
    assert result.usage == TokenUsage(input_tokens=20, output_tokens=4, total_tokens=24)
    (execution,) = result.tool_executions
    assert execution.result.value == "Paris: 18 degrees celsius, cloudy"
    assert not execution.failed and execution.duration.total_seconds() >= 0
    assert question == [UserMessage(content="Weather in Paris?")]  # caller's list untouched


class Order(BaseModel):
    id: str
    status: str
    address: str


@tool
def lookup_order(order_id: str) -> Order:
    """Find an order."""
    return Order(id=order_id, status="shipped", address="1 Rue de Rivoli")


@tool
def shipping_status(address: str) -> str:
    """Where is the parcel for an address."""
    return f"parcel to {address} is out for delivery"


def test_multi_round_order_then_shipping(run: Callable[..., ToolChatResult[None]]) -> None:
    def second(messages: Sequence[ChatMessage]) -> AiMessage:
        last = messages[-1]
        assert isinstance(last, ToolResultMessage)
        address = json.loads(last.text)["address"]
        return calls(call("c2", "shipping_status", address=address))

    script = Script(
        calls(call("c1", "lookup_order", order_id="A-1")), second, AiMessage(text="On its way.")
    )
    result = run(ToolService([lookup_order, shipping_status]), script, [UserMessage(content="?")])
    assert [e.call.name for e in result.tool_executions] == ["lookup_order", "shipping_status"]
    assert result.tool_executions[0].result.value == Order(
        id="A-1", status="shipped", address="1 Rue de Rivoli"
    )
    assert results_of(result)[1].text == "parcel to 1 Rue de Rivoli is out for delivery"
    assert len(result.intermediate_responses) == 2 and result.text == "On its way."


def test_several_calls_in_one_message_keep_order_and_ids(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    script = Script(
        calls(
            call("x", "get_weather", city="Oslo"),
            call("y", "lookup_order", order_id="B"),
            call("z", "get_weather", city="Rome", unit="kelvin"),
            text="Checking three things.",
        ),
        AiMessage(text="done"),
    )
    result = run(ToolService([get_weather, lookup_order]), script, [UserMessage(content="?")])
    assert [(m.tool_call_id, m.tool_name) for m in results_of(result)] == [
        ("x", "get_weather"),
        ("y", "lookup_order"),
        ("z", "get_weather"),
    ]
    assert results_of(result)[2].text == "Rome: 18 degrees kelvin, cloudy"
    # Text next to tool calls is kept in the history.
    first_ai = result.messages[1]
    assert isinstance(first_ai, AiMessage) and first_ai.text == "Checking three things."


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def immediate(x: int) -> int:
    """Return immediately."""
    return x


@tool(return_behavior=ReturnBehavior.IMMEDIATE_IF_LAST)
def if_last(x: int) -> int:
    """Return immediately when last."""
    return x


@tool
def to_llm(x: int) -> int:
    """Back to the model."""
    return x


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def immediate_failing(x: int) -> int:
    """Fails."""
    raise RuntimeError("disk full")


@pytest.mark.parametrize(
    ("names", "stops"),
    [
        (["to_llm"], False),
        (["immediate", "to_llm"], False),
        (["immediate"], True),
        (["immediate", "immediate"], True),
        (["if_last"], True),
        (["immediate", "if_last"], True),
        (["if_last", "immediate"], False),
        (["to_llm", "if_last"], False),
        (["immediate_failing"], False),
        (["immediate", "immediate_failing"], False),
    ],
)
def test_return_behavior_rules(
    run: Callable[..., ToolChatResult[None]], names: list[str], stops: bool
) -> None:
    script = Script(
        calls(*(call(f"c{i}", name, x=i) for i, name in enumerate(names))), AiMessage(text="final")
    )
    service = ToolService([immediate, if_last, to_llm, immediate_failing])
    result = run(service, script, [UserMessage(content="go")])
    assert result.returned_immediately is stops
    assert len(script.seen) == (1 if stops else 2)
    assert result.text == (None if stops else "final")
    assert len(result.tool_executions) == len(names)
    if stops:
        assert result.final_response.ai_message.has_tool_calls
        assert [e.result.value for e in result.tool_executions] == list(range(len(names)))


@tool(max_retries=1)
def book(seats: int, when: str) -> str:
    """Book seats."""
    return f"booked {seats} for {when}"


def test_arguments_error_then_corrected_call(run: Callable[..., ToolChatResult[None]]) -> None:
    script = Script(
        calls(call("c1", "book", seats="two", when="today")),
        calls(call("c2", "book", seats=2, when="today")),
        AiMessage(text="Booked."),
    )
    result = run(ToolService([book]), script, [UserMessage(content="book")])
    first, second = results_of(result)
    assert first.is_error and first.tool_call_id == "c1"
    assert first.text.splitlines()[0] == "Invalid arguments for tool `book`:"
    assert "$.seats" in first.text and '"two"' in first.text
    assert "Traceback" not in first.text
    assert not second.is_error and second.text == "booked 2 for today"
    assert result.tool_executions[0].result.error_kind == "arguments"


def test_arguments_retries_exhausted_raises(run: Callable[..., ToolChatResult[None]]) -> None:
    bad = call("c", "book", seats="two", when="today")
    script = Script(calls(bad), calls(bad), calls(bad))
    with pytest.raises(ToolArgumentsError) as info:
        run(ToolService([book]), script, [UserMessage(content="book")])
    assert info.value.tool_name == "book"
    assert info.value.errors[0].path == "$.seats"
    assert len(script.seen) == 2  # max_retries=1: one retry, then the second failure raises


def test_arguments_error_handler_replaces_default(run: Callable[..., ToolChatResult[None]]) -> None:
    seen: list[tuple[str, int]] = []

    def handler(error: ToolArgumentsError, context: ToolContext[Any]) -> str:
        seen.append((error.errors[0].path, context.attempt))
        return "seats must be a number"

    bad = call("c", "book", seats="two", when="today")
    script = Script(calls(bad), calls(bad), calls(bad), AiMessage(text="gave up"))
    result = run(
        ToolService([book], arguments_error_handler=handler), script, [UserMessage(content="b")]
    )
    assert result.text == "gave up"
    assert seen == [("$.seats", 1), ("$.seats", 2), ("$.seats", 3)]
    assert all(m.text == "seats must be a number" and m.is_error for m in results_of(result))


def test_arguments_error_handler_may_raise(run: Callable[..., ToolChatResult[None]]) -> None:
    class StopError(Exception):
        pass

    def handler(error: ToolArgumentsError, context: ToolContext[Any]) -> str:
        raise StopError(str(error))

    script = Script(calls(call("c", "book", seats="two", when="today")))
    with pytest.raises(StopError, match="seats"):
        run(
            ToolService([book], arguments_error_handler=handler), script, [UserMessage(content="b")]
        )


@tool(max_retries=1)
def pick_date(day: str) -> str:
    """Pick a day."""
    if day != "monday":
        raise ModelRetry(f"{day} is fully booked, try monday")
    return "monday it is"


def test_model_retry(run: Callable[..., ToolChatResult[None]]) -> None:
    script = Script(
        calls(call("c1", "pick_date", day="friday")),
        calls(call("c2", "pick_date", day="monday")),
        AiMessage(text="ok"),
    )
    result = run(ToolService([pick_date]), script, [UserMessage(content="?")])
    first, second = results_of(result)
    assert first.is_error and first.text == "friday is fully booked, try monday"
    assert result.tool_executions[0].result.error_kind == "retry"
    assert second.text == "monday it is"


def test_model_retry_exhausted_raises(run: Callable[..., ToolChatResult[None]]) -> None:
    friday = calls(call("c", "pick_date", day="friday"))
    with pytest.raises(ToolExecutionError, match="fully booked"):
        run(ToolService([pick_date]), Script(friday, friday), [UserMessage(content="?")])


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {reason}")


def test_tool_exception_becomes_error_result(run: Callable[..., ToolChatResult[None]]) -> None:
    script = Script(calls(call("c", "explode", reason="this")), AiMessage(text="sorry"))
    result = run(ToolService([explode]), script, [UserMessage(content="?")])
    (message,) = results_of(result)
    assert message.is_error
    assert message.text == "Tool `explode` failed: ValueError: cannot handle this"
    execution = result.tool_executions[0]
    assert execution.failed and isinstance(execution.result.exception, ValueError)


def test_execution_error_handler_may_rewrite_or_raise(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    def polite(error: BaseException, context: ToolContext[Any]) -> str:
        return f"{context.tool_name} is unavailable, try later"

    script = Script(calls(call("c", "explode", reason="x")), AiMessage(text="sorry"))
    result = run(
        ToolService([explode], execution_error_handler=polite), script, [UserMessage(content="?")]
    )
    assert results_of(result)[0].text == "explode is unavailable, try later"

    def propagate(error: BaseException, context: ToolContext[Any]) -> str:
        raise ToolExecutionError(context.tool_name, str(error)) from error

    script = Script(calls(call("c", "explode", reason="x")))
    with pytest.raises(ToolExecutionError, match="cannot handle x"):
        run(
            ToolService([explode], execution_error_handler=propagate),
            script,
            [UserMessage(content="?")],
        )


def test_unknown_tool_raises_by_default(run: Callable[..., ToolChatResult[None]]) -> None:
    executed: list[str] = []

    @tool
    def delete_everything() -> str:
        """Dangerous."""
        executed.append("boom")
        return "deleted"

    script = Script(calls(call("c", "delete_everything")))
    with pytest.raises(UnknownToolError) as info:
        run(ToolService([get_weather]), script, [UserMessage(content="?")])
    assert info.value.tool_name == "delete_everything"
    assert info.value.available == ("get_weather",)
    assert executed == []


def test_unknown_tool_handler_lists_real_tools(run: Callable[..., ToolChatResult[None]]) -> None:
    script = Script(
        calls(call("c1", "get_wether", city="Paris")),
        calls(call("c2", "get_weather", city="Paris")),
        AiMessage(text="18"),
    )
    service = ToolService([get_weather, lookup_order], unknown_tool_handler=available_tools_handler)
    assert list_available_tools is available_tools_handler
    result = run(service, script, [UserMessage(content="?")])
    first, second = results_of(result)
    assert first.is_error
    assert first.text == (
        "There is no tool named `get_wether`. Available tools: `get_weather`, `lookup_order`."
    )
    assert second.text.startswith("Paris")


@tool(timeout=0.05)
def slow_sync() -> str:
    """Too slow."""
    time.sleep(0.5)
    return "late"


@tool(timeout=0.05)
async def slow_async() -> str:
    """Too slow."""
    await asyncio.sleep(5)
    return "late"


@pytest.mark.parametrize("name", ["slow_sync", "slow_async"])
def test_timeout_becomes_error_result(run: Callable[..., ToolChatResult[None]], name: str) -> None:
    script = Script(calls(call("c", name)), AiMessage(text="too slow"))
    result = run(ToolService([slow_sync, slow_async]), script, [UserMessage(content="?")])
    (message,) = results_of(result)
    assert message.is_error and "timed out" in message.text
    assert result.tool_executions[0].result.error_kind == "timeout"


def test_max_round_trips_exceeded(run: Callable[..., ToolChatResult[None]]) -> None:
    loop = [calls(call(f"c{i}", "get_weather", city="Paris")) for i in range(5)]
    with pytest.raises(ToolLoopLimitError) as info:
        run(
            ToolService([get_weather], max_round_trips=3), Script(*loop), [UserMessage(content="?")]
        )
    assert info.value.max_round_trips == 3


def test_duplicate_registration_names_the_tool() -> None:
    service = ToolService([get_weather])
    with pytest.raises(ValueError, match="'get_weather'"):
        service.register(get_weather)

    @tool(name="get_weather")
    def other(city: str) -> str:
        """Other."""
        return city

    with pytest.raises(ValueError, match="'get_weather'"):
        service.register(other)


def test_register_functions_objects_and_rejects_others() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    class Calculator:
        def __init__(self, offset: int) -> None:
            self.offset = offset

        @tool
        def shift(self, value: int) -> int:
            """Shift a value."""
            return value + self.offset

    service = ToolService().register(add).register(Calculator(10))
    assert [t.name for t in service.tools] == ["add", "shift"]
    script = Script(
        calls(call("a", "add", a=1, b=2), call("b", "shift", value=5)), AiMessage(text=".")
    )
    result = service.chat(script.model, [UserMessage(content="?")])
    assert [e.result.value for e in result.tool_executions] == [3, 15]
    with pytest.raises(TypeError, match="not a tool"):
        ToolService().register(object())


def test_user_parameters_win_and_tools_are_merged() -> None:
    script = Script(AiMessage(text="hi"))
    user = ChatRequestParameters(temperature=0.1, max_tokens=5, tool_choice="get_weather")
    ToolService([get_weather]).chat(script.model, [UserMessage(content="?")], user)
    ((_, sent),) = script.seen
    assert sent == user.model_copy(update={"tools": (get_weather.specification,)})


class Rendezvous:
    """`asyncio.Barrier` (3.11+) for 3.10: `wait()` returns once `parties` callers are waiting."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived, self.all_here = parties, 0, asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.parties:
            self.all_here.set()
        await self.all_here.wait()


async def test_achat_runs_independent_calls_concurrently() -> None:
    barrier = Rendezvous(3)

    @tool
    async def meet(who: str) -> str:
        """Wait for the others."""
        await barrier.wait()  # deadlocks unless all three run at the same time
        return f"{who} met"

    script = Script(
        calls(*(call(f"c{i}", "meet", who=f"p{i}") for i in range(3))), AiMessage(text=".")
    )
    result = await asyncio.wait_for(
        ToolService([meet]).achat(script.model, [UserMessage(content="?")]), 5
    )
    assert [m.text for m in results_of(result)] == ["p0 met", "p1 met", "p2 met"]


async def test_sync_tools_run_in_worker_threads_under_achat() -> None:
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def rendezvous(who: str) -> str:
        """Blocking wait for the other."""
        barrier.wait()
        return who

    script = Script(
        calls(call("a", "rendezvous", who="a"), call("b", "rendezvous", who="b")),
        AiMessage(text="."),
    )
    result = await asyncio.wait_for(
        ToolService([rendezvous]).achat(script.model, [UserMessage(content="?")]), 10
    )
    assert [m.text for m in results_of(result)] == ["a", "b"]


async def test_parallel_false_runs_calls_one_at_a_time() -> None:
    running = 0
    peak = 0

    @tool
    async def work(n: int) -> int:
        """Some async work."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    script = Script(calls(*(call(f"c{i}", "work", n=i) for i in range(3))), AiMessage(text="."))
    await ToolService([work], parallel=False).achat(script.model, [UserMessage(content="?")])
    assert peak == 1
    script = Script(calls(*(call(f"c{i}", "work", n=i) for i in range(3))), AiMessage(text="."))
    await ToolService([work]).achat(script.model, [UserMessage(content="?")])
    assert peak == 3


async def test_sequential_tools_never_overlap() -> None:
    active: list[str] = []
    overlaps: list[list[str]] = []

    async def enter(name: str) -> None:
        active.append(name)
        if len(active) > 1 and "write" in active:
            overlaps.append(list(active))
        await asyncio.sleep(0.01)
        active.remove(name)

    @tool(sequential=True)
    async def write(key: str) -> str:
        """Side effect."""
        await enter("write")
        return key

    @tool
    async def read(key: str) -> str:
        """Read."""
        await enter("read")
        return key

    order = ["read", "write", "read", "read", "write", "write", "read"]
    script = Script(
        calls(*(call(f"c{i}", n, key=str(i)) for i, n in enumerate(order))), AiMessage(text=".")
    )
    result = await ToolService([write, read]).achat(script.model, [UserMessage(content="?")])
    assert overlaps == []
    assert [m.text for m in results_of(result)] == [str(i) for i in range(len(order))]


class Deps(BaseModel):
    user: str


def test_tool_context_injection_and_model_cannot_set_it(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    seen: list[ToolContext[Deps]] = []

    @tool(max_retries=3)
    def whoami(ctx: ToolContext[Deps], greeting: str) -> str:
        """Greet the current user."""
        seen.append(ctx)
        return f"{greeting}, {ctx.deps.user}"

    script = Script(
        calls(call("c1", "whoami", greeting="hi", ctx={"deps": {"user": "mallory"}})),
        calls(call("c2", "whoami", greeting="hi")),
        AiMessage(text="."),
    )
    result = run(
        ToolService([whoami]),
        script,
        [UserMessage(content="?")],
        deps=Deps(user="alice"),
        conversation_id="conv-7",
    )
    first, second = results_of(result)
    assert first.is_error and "ctx" in first.text  # an unknown argument, never the context
    assert second.text == "hi, alice"
    (ctx,) = seen
    assert (ctx.tool_call_id, ctx.tool_name, ctx.attempt, ctx.conversation_id) == (
        "c2",
        "whoami",
        2,
        "conv-7",
    )
    assert "ctx" not in whoami.specification.parameters["properties"]


def test_conversation_id_generated_when_absent() -> None:
    ids: list[str | None] = []

    @tool
    def remember(ctx: ToolContext[None]) -> str:
        """Remember the conversation."""
        ids.append(ctx.conversation_id)
        return "ok"

    script = Script(calls(call("a", "remember")), calls(call("b", "remember")), AiMessage(text="."))
    ToolService([remember]).chat(script.model, [UserMessage(content="?")])
    assert len(ids) == 2 and ids[0] == ids[1] and ids[0]


def test_before_hook_can_deny_or_answer_and_after_hook_audits(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    audit: list[ToolExecution] = []

    def gate(call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult | str | None:
        if call.name == "explode":
            return ToolExecutionResult.error("denied by policy", "denied")
        if json.loads(call.arguments).get("city") == "cached":
            return "cached: sunny"
        return None

    script = Script(
        calls(
            call("a", "explode", reason="x"),
            call("b", "get_weather", city="cached"),
            call("c", "get_weather", city="Oslo"),
        ),
        AiMessage(text="."),
    )
    service = ToolService(
        [explode, get_weather], before_tool_call=gate, after_tool_call=audit.append
    )
    result = run(service, script, [UserMessage(content="?")])
    assert [(m.text, m.is_error) for m in results_of(result)] == [
        ("denied by policy", True),
        ("cached: sunny", False),
        ("Oslo: 18 degrees celsius, cloudy", False),
    ]
    assert [e.call.id for e in audit] == ["a", "b", "c"]
    assert audit[0].result.error_kind == "denied"


def test_logging_hook_redacts_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentforge_typed.tools")
    script = Script(calls(call("c1", "get_weather", city="Secretville")), AiMessage(text="."))
    ToolService([get_weather], after_tool_call=logging_hook()).chat(
        script.model, [UserMessage(content="?")]
    )
    (record,) = caplog.records
    assert "get_weather" in record.getMessage() and "c1" in record.getMessage()
    assert "ok" in record.getMessage() and "ms" in record.getMessage()
    assert "Secretville" not in record.getMessage()
    caplog.clear()

    script = Script(calls(call("c2", "explode", reason="x")), AiMessage(text="."))
    hook = logging_hook(include_arguments=True, include_results=True)
    ToolService([explode], after_tool_call=hook).chat(script.model, [UserMessage(content="?")])
    message = caplog.records[0].getMessage()
    assert '"reason": "x"' in message and "ValueError: cannot handle x" in message
    assert "execution" in message
    assert caplog.records[0].levelno == logging.WARNING


def test_system_message_and_final_answer_without_tools(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    script = Script(AiMessage(text="Hello!"))
    result = run(ToolService(), script, [SystemMessage(text="be nice"), UserMessage(content="hi")])
    assert result.text == "Hello!" and result.tool_executions == ()
    assert script.seen[0][1].tools is None


def test_strict_schema_a_dialect_cannot_express_is_refused_at_registration() -> None:
    open_object = ToolSpecification(
        name="tag",
        description="Tag things.",
        parameters={
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "required": ["labels"],
        },
        strict_schema=True,
    )
    service = ToolService()
    with pytest.raises(SchemaDialectError) as info:
        service.register_spec(open_object, lambda arguments: "ok")
    assert info.value.path == "$.labels"
    assert service.tools == ()
    # The same schema without provider enforcement is fine.
    service.register_spec(open_object.model_copy(update={"strict_schema": False}), lambda a: "ok")
    # Read again into a declared variable: mypy would keep `service.tools` narrowed to `tuple[()]`.
    registered: Sequence[ToolLike] = service.tools
    assert [t.name for t in registered] == ["tag"]


def test_a_successful_call_resets_the_retry_budget(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    attempts: list[int] = []

    @tool(max_retries=1)
    def note(text: str, ctx: ToolContext[None]) -> str:
        """Write a note."""
        attempts.append(ctx.attempt)
        if not text:
            raise ModelRetry("empty note")
        return "noted"

    # Three slips spread over a long run, each followed by a success: not three strikes.
    good, empty, typo = (
        call("g", "note", text="x"),
        call("e", "note", text=""),
        call("t", "note", txt="x"),
    )
    script = Script(
        *(calls(c) for c in (typo, good, good, empty, good, typo, good)), AiMessage(text="done")
    )
    result = run(ToolService([note]), script, [UserMessage(content="notes")])
    assert result.text == "done"
    assert attempts == [2, 1, 1, 2, 2]
    assert [e.failed for e in result.tool_executions] == [
        True,
        False,
        False,
        True,
        False,
        True,
        False,
    ]


def test_alternating_slips_are_still_bounded_by_max_round_trips(
    run: Callable[..., ToolChatResult[None]],
) -> None:
    script = Script(*[calls(call("c", "pick_date", day=d)) for d in ["friday", "monday"] * 3])
    with pytest.raises(ToolLoopLimitError):
        run(ToolService([pick_date], max_round_trips=6), script, [UserMessage(content="?")])
