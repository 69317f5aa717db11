from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FinalResultEvent,
    FunctionModel,
    PartialArgumentsEvent,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolChatResult,
    ToolLoopEvent,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers._function import response_events

executed: list[str] = []


@tool
def weather(city: str) -> str:
    """Weather for a city."""
    executed.append(city)
    return f"{city}: sunny"


def two_rounds(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if len(messages) == 1:
        return AiMessage(
            text="Checking both.",
            tool_calls=[
                ToolCall(id="a", name="weather", arguments='{"city": "Oslo"}'),
                ToolCall(id="b", name="weather", arguments='{"city": "Rome"}'),
            ],
        )
    return AiMessage(text="Sunny in both.")


def same_result(streamed: ToolChatResult[Any], blocking: ToolChatResult[Any]) -> None:
    assert streamed.messages == blocking.messages
    assert streamed.final_response == blocking.final_response
    assert streamed.intermediate_responses == blocking.intermediate_responses
    assert [(e.call, e.result) for e in streamed.tool_executions] == [
        (e.call, e.result) for e in blocking.tool_executions
    ]
    assert streamed.usage == blocking.usage


def shape(events: Sequence[ToolLoopEvent]) -> list[str]:
    names = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            names.append(f"call:{event.call.id}")
        elif isinstance(event, ToolResultEvent):
            names.append(f"result:{event.execution.call.id}")
        elif isinstance(event, (ResponseComplete, FinalResultEvent)):
            names.append(type(event).__name__)
    return names


def test_stream_event_order_and_final_result_equal_chat() -> None:
    model = FunctionModel(two_rounds)
    service = ToolService([weather])
    events = list(service.stream(model, [UserMessage(content="Oslo and Rome?")]))
    assert shape(events) == [
        "ResponseComplete",
        "call:a",
        "result:a",
        "call:b",
        "result:b",
        "ResponseComplete",
        "FinalResultEvent",
    ]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Checking both.Sunny in both."
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    same_result(final.result, service.chat(model, [UserMessage(content="Oslo and Rome?")]))


async def test_astream_yields_results_as_they_finish() -> None:
    gate = asyncio.Event()

    @tool
    async def slow(name: str) -> str:
        """Waits for the fast one."""
        await gate.wait()
        return name

    @tool
    async def fast(name: str) -> str:
        """Opens the gate."""
        gate.set()
        return name

    def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if len(messages) == 1:
            return AiMessage(
                tool_calls=[
                    ToolCall(id="s", name="slow", arguments='{"name": "s"}'),
                    ToolCall(id="f", name="fast", arguments='{"name": "f"}'),
                ]
            )
        return AiMessage(text="done")

    service = ToolService([slow, fast])
    model = FunctionModel(script)
    events = [e async for e in service.astream(model, [UserMessage(content="?")])]
    assert shape(events) == [
        "ResponseComplete",
        "call:s",
        "call:f",
        "result:f",
        "result:s",
        "ResponseComplete",
        "FinalResultEvent",
    ]
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    gate.clear()
    same_result(final.result, await service.achat(model, [UserMessage(content="?")]))
    # Results stay in the model's order in the history, whatever the finishing order.
    assert [m.tool_call_id for m in final.result.messages if m.role == "tool"] == ["s", "f"]


class ChunkedArguments:
    """A model whose stream splits a tool call's arguments into tiny, often invalid, pieces."""

    def __init__(self, arguments: str) -> None:
        self.arguments = arguments
        self.calls = 0

    def _response(self) -> ChatResponse:
        self.calls += 1
        if self.calls == 1:
            call = ToolCall(id="c", name="weather", arguments=self.arguments)
            return ChatResponse(ai_message=AiMessage(tool_calls=[call]))
        return ChatResponse(ai_message=AiMessage(text="ok"))

    def _events(self, response: ChatResponse) -> Iterator[StreamEvent]:
        calls = response.ai_message.tool_calls
        if calls:
            yield ToolCallDelta(index=0, id="c", name="weather")
            for i in range(0, len(self.arguments), 3):
                yield ToolCallDelta(index=0, arguments_delta=self.arguments[i : i + 3])
            yield ResponseComplete(response=response)
        else:
            yield from response_events(response)

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self._response()

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self._response()

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield from self._events(self._response())

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self._events(self._response()):
            yield event


def test_partial_arguments_are_for_display_only() -> None:
    executed.clear()
    model = ChunkedArguments('{"city": "Zürich", "extra": [1, 2, {"a": "b"}]}')
    events = list(
        ToolService([weather], unknown_tool_handler=None).stream(model, [UserMessage(content="?")])
    )
    partials = [e for e in events if isinstance(e, PartialArgumentsEvent)]
    assert len(partials) > 5
    assert partials[-1].arguments == {"city": "Zürich", "extra": [1, 2, {"a": "b"}]}
    assert any(p.arguments == {"city": "Zü"} or p.arguments == {"city": "Z"} for p in partials)
    assert all(p.name == "weather" for p in partials)
    # Only the complete call ran (and failed on the extra argument): partials never execute.
    assert executed == []
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(results) == 1 and results[0].execution.failed


@pytest.mark.parametrize(
    "arguments", ['{"city": "Oslo"', '{"city": "Os\\', "]]]", '{"a": tru', "{,", '"\\u12'], ids=repr
)
def test_malformed_partial_json_never_raises(arguments: str) -> None:
    executed.clear()
    model = ChunkedArguments(arguments)
    events = list(ToolService([weather]).stream(model, [UserMessage(content="?")]))
    assert isinstance(events[-1], FinalResultEvent)
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.execution.failed and executed == []


def test_stream_with_output_type() -> None:
    def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(
            tool_calls=[
                ToolCall(id="o", name="final_result", arguments=json.dumps({"result": [3, 4]}))
            ]
        )

    events = list(
        ToolService().stream(
            FunctionModel(script), [UserMessage(content="?")], output_type=list[int]
        )
    )
    final = events[-1]
    assert isinstance(final, FinalResultEvent) and final.result.output == [3, 4]


async def test_astream_keeps_identical_calls_apart() -> None:
    executed.clear()
    same = ToolCall(id="dup", name="weather", arguments='{"city": "Oslo"}')

    def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if len(messages) == 1:
            return AiMessage(tool_calls=[same, same.model_copy(), same])
        return AiMessage(text="done")

    events = [
        e
        async for e in ToolService([weather]).astream(
            FunctionModel(script), [UserMessage(content="?")]
        )
    ]
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    assert len(final.result.tool_executions) == 3 and executed == ["Oslo"] * 3
    assert [m.role for m in final.result.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]


async def test_astream_waits_for_its_calls_without_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    # Calls finishing at different steps of the event loop, taken as soon as each finishes:
    # the stream is woken by the calls themselves, never by `asyncio.sleep(0)` turns.
    from asyncio import sleep as step

    @tool
    async def steps(n: int) -> int:
        """Finish after n steps of the event loop."""
        for _ in range(n):
            await step(0)
        return n

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(
            tool_calls=[
                ToolCall(id=f"c{i}", name="steps", arguments=json.dumps({"n": i % 4}))
                for i in range(12)
            ]
        )

    polls = 0
    real_sleep = asyncio.sleep

    async def counting(delay: float, *args: Any, **kwargs: Any) -> Any:
        nonlocal polls
        polls += delay == 0
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", counting)
    results = [
        event.execution.result.value
        async for event in ToolService([steps]).astream(FunctionModel(model), "go")
        if isinstance(event, ToolResultEvent)
    ]
    assert sorted(results) == sorted(i % 4 for i in range(12))
    assert results[:3] == [0, 0, 0]  # in the order they finished
    assert polls == 0
