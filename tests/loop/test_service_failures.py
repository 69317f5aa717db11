"""A failed run loses nothing: the error carries the messages, executions and usage so far."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    ModelError,
    OpenAIChatModel,
    TokenUsage,
    ToolArgumentsError,
    ToolCall,
    ToolChatResult,
    ToolExecutionError,
    ToolLoopLimitError,
    ToolResultMessage,
    ToolService,
    UnknownToolError,
    UserMessage,
    tool,
)

USAGE = TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)
Reply = Callable[[Sequence[ChatMessage]], AiMessage]


def scripted(*turns: AiMessage | Reply) -> FunctionModel:
    """A model playing `turns` in order (each an answer, or a function of the history), each
    reporting `USAGE`; past the last turn it fails like a provider would."""
    remaining = list(turns)

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        if not remaining:
            raise ModelError("HTTP 503 from the provider", status_code=503)
        turn = remaining.pop(0)
        message = turn if isinstance(turn, AiMessage) else turn(messages)
        return ChatResponse(ai_message=message, token_usage=USAGE)

    return FunctionModel(reply)


def drive(driver: str, service: ToolService, model: FunctionModel, **kw: Any) -> Any:
    """Run `service` under `driver` (chat, achat, stream, astream) and return what it ends with."""
    prompt: list[ChatMessage] = [UserMessage(content="Pay the rent and the phone bill.")]
    if driver == "chat":
        return service.chat(model, prompt, **kw)
    if driver == "achat":
        return asyncio.run(service.achat(model, prompt, **kw))
    if driver == "stream":
        return list(service.stream(model, prompt, **kw))[-1]

    async def consume() -> Any:
        return [event async for event in service.astream(model, prompt, **kw)][-1]

    return asyncio.run(consume())


DRIVERS = ["chat", "achat", "stream", "astream"]

transfers: list[str] = []


@tool(sequential=True)
def transfer(to: str, amount: int) -> str:
    """Transfer money."""
    transfers.append(to)
    return f"sent {amount} to {to}"


@tool(max_retries=0, sequential=True)
def pay_bill(bill_id: int) -> str:
    """Pay a bill."""
    return f"paid {bill_id}"


def call(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments))


def assert_resumable(messages: Sequence[ChatMessage]) -> None:
    """Every tool call of every assistant message is answered, in order, right after it."""
    for position, message in enumerate(messages):
        if isinstance(message, AiMessage) and message.tool_calls:
            answers = messages[position + 1 : position + 1 + len(message.tool_calls)]
            assert all(isinstance(a, ToolResultMessage) for a in answers)
            assert [a.tool_call_id for a in answers] == [c.id for c in message.tool_calls]  # type: ignore[union-attr]


def resume_through_openai(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """Send `messages` back through the OpenAI provider; return the payload it sent."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Done."},
                    "finish_reason": "stop",
                }
            ],
        }
        return httpx.Response(200, json=body)

    model = OpenAIChatModel(
        "gpt-4o-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    assert ToolService([transfer, pay_bill]).chat(model, messages).text == "Done."
    return sent[0]


@pytest.mark.parametrize("driver", DRIVERS)
def test_arguments_error_after_retries_keeps_the_side_effect_of_the_round(driver: str) -> None:
    transfers.clear()
    model = scripted(
        AiMessage(
            tool_calls=[
                call("t1", "transfer", to="landlord", amount=900),
                call("b1", "pay_bill", bill_id="phone"),
                call("t2", "transfer", to="phone company", amount=40),
            ]
        )
    )
    with pytest.raises(ToolArgumentsError) as caught:
        drive(driver, ToolService([transfer, pay_bill]), model)

    error = caught.value
    assert transfers == ["landlord"]
    assert [e.call.id for e in error.tool_executions] == ["t1", "b1"]
    assert error.tool_executions[0].result.text == "sent 900 to landlord"
    assert error.tool_executions[1].result.error_kind == "arguments"
    assert error.usage == USAGE
    assert_resumable(error.messages)
    results = [m for m in error.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [
        ("t1", False),
        ("b1", True),
        ("t2", True),
    ]
    assert "$.bill_id" in results[1].text
    assert results[2].text == (
        "Tool `transfer` did not complete: the run stopped on ToolArgumentsError first."
    )
    payload = resume_through_openai(error.messages)
    tool_ids = [m["tool_call_id"] for m in payload["messages"] if m["role"] == "tool"]
    assert tool_ids == ["t1", "b1", "t2"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_unknown_tool_answers_every_call_of_the_round(driver: str) -> None:
    model = scripted(
        AiMessage(tool_calls=[call("t1", "transfer", to="x", amount=1), call("h1", "hack")])
    )
    with pytest.raises(UnknownToolError) as caught:
        drive(driver, ToolService([transfer]), model)

    error = caught.value
    assert error.tool_executions == ()
    assert_resumable(error.messages)
    assert [m.text for m in error.messages if isinstance(m, ToolResultMessage)] == [
        "Tool `transfer` did not complete: the run stopped on UnknownToolError first.",
        "Tool `hack` did not complete: the run stopped on UnknownToolError first.",
    ]


@pytest.mark.parametrize("driver", DRIVERS)
def test_model_error_in_a_later_round_carries_the_earlier_rounds(driver: str) -> None:
    transfers.clear()
    model = scripted(AiMessage(tool_calls=[call("t1", "transfer", to="landlord", amount=900)]))
    with pytest.raises(ModelError) as caught:
        drive(driver, ToolService([transfer]), model)

    error = caught.value
    assert [e.result.text for e in error.tool_executions] == ["sent 900 to landlord"]
    assert [m.role for m in error.messages] == ["user", "assistant", "tool"]
    assert error.usage == USAGE


@pytest.mark.parametrize("driver", DRIVERS)
def test_loop_limit_and_raising_handler_carry_the_run(driver: str) -> None:
    again = AiMessage(tool_calls=[call("t", "transfer", to="x", amount=1)])
    with pytest.raises(ToolLoopLimitError) as limit:
        drive(driver, ToolService([transfer], max_round_trips=2), scripted(again, again))
    assert len(limit.value.tool_executions) == 2
    assert limit.value.usage == USAGE + USAGE
    assert_resumable(limit.value.messages)

    @tool
    def explode() -> str:
        """Fail."""
        raise RuntimeError("boom")

    def stop(exception: BaseException, context: Any) -> str:
        raise ToolExecutionError(context.tool_name, str(exception)) from exception

    service = ToolService([explode, transfer], execution_error_handler=stop)
    model = scripted(
        AiMessage(tool_calls=[call("e", "explode"), call("t", "transfer", to="y", amount=2)])
    )
    with pytest.raises(ToolExecutionError) as handled:
        drive(
            driver,
            service,
            model,
        )
    assert_resumable(handled.value.messages)
    assert handled.value.tool_executions[0].call.id == "e"


def test_errors_outside_a_run_carry_empty_defaults() -> None:
    error = ModelError("nope")
    assert (error.messages, error.tool_executions, error.usage) == ((), (), TokenUsage())
    assert isinstance(error, AgentForgeError)


async def test_astream_several_failures_in_one_round_log_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(max_retries=0)
    async def fragile(n: int) -> str:
        """Fail on bad input."""
        return str(n)

    model = scripted(AiMessage(tool_calls=[call(f"c{i}", "fragile", n="bad") for i in range(5)]))
    service = ToolService([fragile])

    async def fail() -> None:
        with pytest.raises(ToolArgumentsError) as caught:
            async for _ in service.astream(model, [UserMessage(content="go")]):
                pass
        assert_resumable(caught.value.messages)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await fail()
        # The failed tasks are collected once the error (and its traceback) is gone.
        await asyncio.sleep(0)
        gc.collect()
    assert "never retrieved" not in caplog.text


def test_a_result_of_chat_is_still_a_plain_result() -> None:
    model = scripted(AiMessage(text="Nothing to do."))
    result: ToolChatResult[None] = ToolService([transfer]).chat(model, [UserMessage(content="hi")])
    assert result.text == "Nothing to do."


def test_achat_answers_a_cancelled_sibling_as_not_completed() -> None:
    started: list[str] = []

    @tool
    async def slow_transfer(to: str) -> str:
        """Transfer, slowly."""
        started.append(to)
        await asyncio.sleep(30)
        return "sent"

    @tool(max_retries=0)
    async def check(amount: int) -> str:
        """Check an amount."""
        return "ok"

    model = scripted(
        AiMessage(tool_calls=[call("s", "slow_transfer", to="bank"), call("b", "check")])
    )
    service = ToolService([slow_transfer, check])
    with pytest.raises(ToolArgumentsError) as caught:
        asyncio.run(service.achat(model, [UserMessage(content="go")]))

    error = caught.value
    assert started == ["bank"]  # it began, and was cancelled when its sibling failed
    assert [e.call.id for e in error.tool_executions] == ["b"]
    assert_resumable(error.messages)
    assert error.messages[-2].text == (  # type: ignore[union-attr]
        "Tool `slow_transfer` did not complete: the run stopped on ToolArgumentsError first."
    )


async def test_closing_a_run_while_its_tools_run_cancels_them_and_awaits_nothing() -> None:
    # A durable workflow torn down mid-round closes the run's coroutine: awaiting anything then
    # is "coroutine ignored GeneratorExit" (an error pytest reports); the calls are cancelled.
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(tool_calls=[ToolCall(id="c1", name="slow", arguments="{}")])

    run = ToolService([slow]).achat(FunctionModel(script), "go")
    waiting: Any = run.send(None)  # driven by hand, as a workflow runtime drives it
    while not started.is_set():
        await asyncio.sleep(0)
        if waiting.done():
            waiting = run.send(None)
    run.close()
    await asyncio.wait_for(cancelled.wait(), timeout=5)
