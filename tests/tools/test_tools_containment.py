"""Containment: nothing a tool raises escapes as an exception (but the user's interrupt and the
loop's own cancellation), timeouts hold from the caller's side, and error texts are capped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FinalResultEvent,
    FunctionModel,
    HttpTool,
    ModelRetry,
    SchemaTool,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    UserMessage,
    tool,
)
from agentforge_typed.tools._outcomes import MAX_ERROR_TEXT_CHARS
from agentforge_typed.tools.mcp._results import map_call_result


def call(name: str, arguments: str = "{}", id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


class Fatal(BaseException):
    """A `BaseException` subclass that is neither an interrupt nor a cancellation."""


RAISED: list[Callable[[], BaseException]] = [
    lambda: SystemExit(2),
    lambda: Fatal("boom"),
    lambda: GeneratorExit(),
]


def sync_and_async_tools(make: Callable[[], BaseException], **options: Any) -> list[Any]:
    @tool(name="sync_tool", **options)
    def sync_tool() -> str:
        raise make()

    @tool(name="async_tool", **options)
    async def async_tool() -> str:
        await asyncio.sleep(0)
        raise make()

    def handler(arguments: dict[str, Any]) -> str:
        raise make()

    spec = ToolSpecification(name="schema_tool", parameters={"type": "object"})
    return [sync_tool, async_tool, SchemaTool(spec, handler, timeout=options.get("timeout"))]


def context(name: str) -> ToolContext[None]:
    return ToolContext(deps=None, tool_call_id="call_1", tool_name=name)


def assert_contained(result: ToolExecutionResult, name: str, exc_type: type[BaseException]) -> None:
    assert result.is_error and result.error_kind == "execution"
    assert result.text.startswith(f"Tool `{name}` failed: {exc_type.__name__}")
    assert isinstance(result.exception, exc_type)


# --- BaseException containment ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [None, 5.0])
@pytest.mark.parametrize("make", RAISED)
def test_execute_contains_every_base_exception(
    make: Callable[[], BaseException], timeout: float | None
) -> None:
    for executor in sync_and_async_tools(make, timeout=timeout):
        result = executor.execute(call(executor.name), context(executor.name))
        assert_contained(result, executor.name, type(make()))


@pytest.mark.parametrize("timeout", [None, 5.0])
@pytest.mark.parametrize("make", RAISED)
async def test_aexecute_contains_every_base_exception(
    make: Callable[[], BaseException], timeout: float | None
) -> None:
    for executor in sync_and_async_tools(make, timeout=timeout):
        result = await executor.aexecute(call(executor.name), context(executor.name))
        assert_contained(result, executor.name, type(make()))


def exploding_order(make: Callable[[], BaseException]) -> type[BaseModel]:
    """A model whose own validator raises `make()`."""

    class Order(BaseModel):
        count: int

        @field_validator("count")
        @classmethod
        def explode(cls, value: int) -> int:
            raise make()

    return Order


@pytest.mark.parametrize("make", [lambda: KeyError("boom"), *RAISED])
@pytest.mark.parametrize(
    "arguments",
    [
        '{"order": {"count": 1}}',
        '{"order": "{\\"count\\": 1}"}',
    ],  # valid; string-encoded (repaired)
    ids=["fast path", "repair path"],
)
@pytest.mark.parametrize("mode", ["execute", "aexecute"])
async def test_an_argument_types_own_validator_raising_is_an_execution_error(
    make: Callable[[], BaseException], arguments: str, mode: str
) -> None:
    # pydantic lets anything but `ValueError` / `AssertionError` out of a `field_validator`:
    # the tool failed, as if its body had raised; the call never raises.
    Order = exploding_order(make)

    @tool
    def place(order: Order) -> str:  # type: ignore[valid-type]  # a class made at run time
        return "placed"

    request = call("place", arguments)
    result = place.execute(request) if mode == "execute" else await place.aexecute(request)
    assert_contained(result, "place", type(make()))


@pytest.mark.parametrize("make", [lambda: KeyError("boom"), *RAISED])
@pytest.mark.parametrize("mode", ["execute", "aexecute"])
async def test_an_http_tools_args_model_raising_is_an_execution_error(
    make: Callable[[], BaseException], mode: str
) -> None:
    order = exploding_order(make)
    http = HttpTool("place", url="http://127.0.0.1:9/orders", body="rest", args_model=order)
    request, ctx = call("place", '{"count": 1}'), context("place")
    result = http.execute(request, ctx) if mode == "execute" else await http.aexecute(request, ctx)
    assert_contained(result, "place", type(make()))  # and nothing was sent


def test_system_exit_reads_like_any_failure() -> None:
    @tool
    def parse(flags: str) -> str:
        import argparse

        parser = argparse.ArgumentParser(exit_on_error=False, add_help=False)
        parser.add_argument("--n", type=int, required=True)
        parser.parse_args(flags.split())  # exits (SystemExit: 2) on what it cannot parse
        return "parsed"

    result = parse.execute(call("parse", '{"flags": "--x"}'))
    assert result.text == "Tool `parse` failed: SystemExit: 2"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_keyboard_interrupt_is_not_contained(kind: str) -> None:
    @tool
    def sync_stop() -> None:
        raise KeyboardInterrupt

    @tool
    async def async_stop() -> None:
        raise KeyboardInterrupt

    stop = sync_stop if kind == "sync" else async_stop
    with pytest.raises(KeyboardInterrupt):
        await stop.aexecute(call("stop"))
    with pytest.raises(KeyboardInterrupt):
        await asyncio.to_thread(stop.execute, call("stop"))


async def test_the_loops_own_cancellation_is_not_contained() -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        started.set()
        await asyncio.sleep(30)
        return "done"

    task = asyncio.ensure_future(wait.aexecute(call("wait")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_error_a_tool_raises_on_its_own_is_a_failure() -> None:
    @tool
    async def odd() -> str:
        raise asyncio.CancelledError("not from the loop")

    result = await odd.aexecute(call("odd"))
    assert_contained(result, "odd", asyncio.CancelledError)


def scripted(tool_name: str) -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return AiMessage(text=f"saw: {last.text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=tool_name, arguments="{}")])

    return FunctionModel(reply)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_every_service_driver_contains_system_exit(kind: str) -> None:
    [sync_tool, async_tool, _] = sync_and_async_tools(lambda: SystemExit(3))
    chosen = sync_tool if kind == "sync" else async_tool
    service = ToolService([chosen])
    messages = [UserMessage(content="go")]
    expected = f"saw: Tool `{chosen.name}` failed: SystemExit: 3"

    blocking = await asyncio.to_thread(lambda: service.chat(scripted(chosen.name), messages))
    assert blocking.final_response.ai_message.text == expected
    assert (
        await service.achat(scripted(chosen.name), messages)
    ).final_response.ai_message.text == (expected)
    streamed = await asyncio.to_thread(
        lambda: list(service.stream(scripted(chosen.name), messages))
    )
    astreamed = [e async for e in service.astream(scripted(chosen.name), messages)]
    for events in (streamed, astreamed):
        final = events[-1]
        assert isinstance(final, FinalResultEvent)
        assert final.result.final_response.ai_message.text == expected


def raising_tool(make: Callable[[], BaseException]) -> Any:
    """A `ToolLike` that breaks its contract and raises, as a careless custom tool kind might."""
    from agentforge_typed.tools._base import DeclaredTool, ReturnBehavior

    class Raising(DeclaredTool):
        _specification = ToolSpecification(name="raw", parameters={"type": "object"})
        _return_behavior = ReturnBehavior.TO_LLM
        _max_retries = 2
        _sequential = False

        def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
            raise make()

        async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
            raise make()

    return Raising()


async def test_a_custom_tool_raising_system_exit_is_contained_by_the_service() -> None:
    service = ToolService([raising_tool(lambda: SystemExit("executor"))])
    messages = [UserMessage(content="go")]
    result = await service.achat(scripted("raw"), messages)
    assert result.tool_executions[0].result.text == "SystemExit: executor"
    blocking = await asyncio.to_thread(lambda: service.chat(scripted("raw"), messages))
    assert blocking.tool_executions[0].result.text == "SystemExit: executor"


def test_the_service_lets_a_keyboard_interrupt_through() -> None:
    with pytest.raises(KeyboardInterrupt):
        ToolService([raising_tool(KeyboardInterrupt)]).chat(
            scripted("raw"), [UserMessage(content="go")]
        )


async def test_49_conversations_complete_while_one_tool_raises_system_exit() -> None:
    @tool
    async def work(n: int) -> str:
        await asyncio.sleep(0.01)
        if n == 13:
            raise SystemExit("argparse said no")
        return f"done {n}"

    service = ToolService([work])

    def model_for(n: int) -> FunctionModel:
        def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
            last = messages[-1]
            if isinstance(last, ToolResultMessage):
                return AiMessage(text=last.text)
            return AiMessage(tool_calls=[ToolCall(id="c", name="work", arguments=f'{{"n": {n}}}')])

        return FunctionModel(reply)

    results = await asyncio.gather(
        *(service.achat(model_for(n), [UserMessage(content="go")]) for n in range(50))
    )
    texts = [r.final_response.ai_message.text for r in results]
    assert texts[13] == "Tool `work` failed: SystemExit: argparse said no"
    assert [t for i, t in enumerate(texts) if i != 13] == [
        f"done {n}" for n in range(50) if n != 13
    ]


# --- timeouts from the caller's side -------------------------------------------------------------


@tool(timeout=0.2)
async def stubborn() -> str:
    for _ in range(100):
        try:
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            pass  # swallowed: the tool refuses to stop
    return "finally"


async def test_an_async_tool_that_swallows_cancellation_still_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = time.monotonic()
    result = await stubborn.aexecute(call("stubborn"))
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout"
    assert result.text == "Tool `stubborn` timed out after 0.2 seconds."
    assert elapsed < 2.0  # about the timeout (0.2 s + the cancellation grace), not 10 s
    assert any("ignored its cancellation" in r.getMessage() for r in caplog.records)


def test_an_async_tool_that_swallows_cancellation_times_out_under_execute() -> None:
    started = time.monotonic()
    result = stubborn.execute(call("stubborn"))
    assert result.error_kind == "timeout"
    assert time.monotonic() - started < 2.0


@tool(timeout=0.1)
async def blocking() -> str:
    time.sleep(0.4)  # noqa: ASYNC251 - on purpose: it blocks the loop, nothing can interrupt it
    return "late"


async def test_an_async_tool_that_blocks_the_loop_gives_a_timeout_not_a_late_success() -> None:
    result = await blocking.aexecute(call("blocking"))
    assert (result.error_kind, result.value) == ("timeout", None)


def test_an_async_tool_that_blocks_the_loop_times_out_under_execute() -> None:
    result = blocking.execute(call("blocking"))
    assert (result.error_kind, result.value) == ("timeout", None)


async def test_a_timely_async_tool_is_not_taken_for_a_late_one() -> None:
    @tool(timeout=5)
    async def quick() -> str:
        await asyncio.sleep(0.01)
        return "ok"

    assert (await quick.aexecute(call("quick"))).text == "ok"
    assert (await asyncio.to_thread(quick.execute, call("quick"))).text == "ok"


# --- capped error texts ----------------------------------------------------------------------------


def test_an_execution_error_text_is_capped_with_a_marker() -> None:
    message = "x" * 100_000

    @tool
    def noisy() -> None:
        raise ValueError(message)

    result = noisy.execute(call("noisy"))
    full = f"ValueError: {message}"  # 100,012 characters: its head and tail are kept
    assert result.text == (
        f"Tool `noisy` failed: {full[:1987]}… [96039 characters cut] …{full[-1986:]}"
    )
    assert len(result.text) - len("Tool `noisy` failed: ") == MAX_ERROR_TEXT_CHARS - 1
    assert str(result.exception) == message


async def test_a_model_retry_message_is_capped_with_a_marker() -> None:
    message = "try again " * 10_000

    @tool
    async def picky() -> None:
        raise ModelRetry(message)

    result = await picky.aexecute(call("picky"))
    assert result.error_kind == "retry"
    assert result.text == f"{message[:1987]}… [96027 characters cut] …{message[-1986:]}"
    assert isinstance(result.exception, ModelRetry) and result.exception.message == message


def test_a_short_error_text_is_not_touched() -> None:
    @tool
    def short() -> None:
        raise ModelRetry("x" * MAX_ERROR_TEXT_CHARS)

    assert short.execute(call("short")).text == "x" * MAX_ERROR_TEXT_CHARS


def test_mcp_error_content_is_capped_and_kept_whole_on_the_exception() -> None:
    content = "E" * 50_000
    result = map_call_result(
        "remote", {"content": [{"type": "text", "text": content}], "isError": True}, 10**6
    )
    assert result.error_kind == "execution"
    assert result.text == "E" * 1987 + "… [46026 characters cut] …" + "E" * 1987
    assert content in str(result.exception)


# --- exceptions that cannot be turned into text --------------------------------------------------


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_exception_whose_str_raises_is_still_a_result(kind: str) -> None:
    @tool(name="odd")
    def sync_odd() -> None:
        raise UnprintableError

    @tool(name="odd")
    async def async_odd() -> None:
        raise UnprintableError

    odd = sync_odd if kind == "sync" else async_odd
    expected = "Tool `odd` failed: UnprintableError: <unprintable: its __str__ raised RuntimeError>"
    assert (await asyncio.to_thread(odd.execute, call("odd"))).text == expected
    assert (await odd.aexecute(call("odd"))).text == expected


def test_the_service_survives_an_unprintable_exception_from_a_custom_tool() -> None:
    service = ToolService([raising_tool(UnprintableError)])
    result = service.chat(scripted("raw"), [UserMessage(content="go")])
    assert result.tool_executions[0].result.text == (
        "UnprintableError: <unprintable: its __str__ raised RuntimeError>"
    )


async def test_an_http_tool_whose_header_factory_raises_system_exit_gives_a_result() -> None:
    import httpx

    from agentforge_typed import HttpTool

    def headers(context: ToolContext[Any]) -> dict[str, str]:
        raise SystemExit("no token")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing is sent")

    http_tool = HttpTool(
        "lookup",
        url="https://api.example.com/items",
        parameters={"type": "object", "properties": {}},
        default_headers=headers,
        http_client=httpx.Client(transport=httpx.MockTransport(refuse)),
        async_http_client=httpx.AsyncClient(transport=httpx.MockTransport(refuse)),
    )
    expected = "Tool `lookup` failed: SystemExit: no token"
    assert http_tool.execute(call("lookup"), context("lookup")).text == expected
    assert (await http_tool.aexecute(call("lookup"), context("lookup"))).text == expected


def test_a_model_retry_whose_message_is_not_text_still_gives_a_result() -> None:
    @tool
    def sloppy() -> None:
        raise ModelRetry(None)  # type: ignore[arg-type]

    @tool
    def worse() -> None:
        raise ModelRetry(UnprintableError())  # type: ignore[arg-type]

    assert sloppy.execute(call("sloppy")).text == "None"
    assert worse.execute(call("worse")).text == ("<unprintable: its __str__ raised RuntimeError>")
