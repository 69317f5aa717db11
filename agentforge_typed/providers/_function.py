"""`FunctionModel`: a `ChatModel` scripted by a Python function, for tests and demos."""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence

from .._messages import AiMessage, ChatMessage
from .._model import ResponseComplete, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse, FinishReason
from .._sync import run_sync
from ._tracing import traced

__all__ = ["FunctionModel", "response_events"]

ModelFunctionResult = AiMessage | ChatResponse
ModelFunction = Callable[
    [Sequence[ChatMessage], ChatRequestParameters],
    ModelFunctionResult | Awaitable[ModelFunctionResult],
]

_WORD = re.compile(r"\S+\s*|\s+")


def _as_response(result: ModelFunctionResult) -> ChatResponse:
    if isinstance(result, ChatResponse):
        return result
    reason = FinishReason.TOOL_EXECUTION if result.has_tool_calls else FinishReason.STOP
    return ChatResponse(ai_message=result, finish_reason=reason)


def response_events(response: ChatResponse) -> Iterator[StreamEvent]:
    """Replay a complete response as a stream: word-sized text and thinking deltas, one delta per
    tool call, then `ResponseComplete`."""
    message = response.ai_message
    for piece in _WORD.findall(message.thinking or ""):
        yield ThinkingDelta(text=piece)
    for piece in _WORD.findall(message.text or ""):
        yield TextDelta(text=piece)
    for index, call in enumerate(message.tool_calls):
        yield ToolCallDelta(index=index, id=call.id, name=call.name, arguments_delta=call.arguments)
    yield ResponseComplete(response=response)


@traced
class FunctionModel:
    """A `ChatModel` whose every turn is computed by `fn(messages, parameters)`.

    `fn` may be sync or async and returns an `AiMessage` (finish reason inferred: tool calls →
    `TOOL_EXECUTION`, else `STOP`) or a full `ChatResponse`. Streaming replays the same response
    as deltas, so `stream()` ends with exactly what `chat()` returns.

    Args:
        fn: The function.
        name: The model's name, as spans (`gen_ai.request.model`), its `repr` and a
            `FallbackModel`'s metadata show it: `FunctionModel('fn', name='primary')`.
    """

    def __init__(self, fn: ModelFunction, *, name: str = "function") -> None:
        self.fn = fn
        self.name = name

    def __repr__(self) -> str:
        function = repr(getattr(self.fn, "__name__", self.fn))
        if self.name == "function":
            return f"FunctionModel({function})"
        return f"FunctionModel({function}, name={self.name!r})"

    def _arguments(
        self, request: ChatRequest
    ) -> tuple[Sequence[ChatMessage], ChatRequestParameters]:
        return request.messages, request.parameters or ChatRequestParameters()

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Call `fn`; an async `fn` runs to completion in a fresh event loop (on a worker thread
        when one is already running here)."""
        result = self.fn(*self._arguments(request))
        if inspect.isawaitable(result):
            awaitable = result
            result = run_sync(lambda: awaitable)
        return _as_response(result)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Call `fn`, awaiting it when it is async."""
        result = self.fn(*self._arguments(request))
        if inspect.isawaitable(result):
            result = await result
        return _as_response(result)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Replay `chat()`'s response as deltas."""
        yield from response_events(self.chat(request))

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Replay `achat()`'s response as deltas."""
        for event in response_events(await self.achat(request)):
            yield event
