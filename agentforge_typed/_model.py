"""The `ChatModel` protocol every provider and test double implements, and the events of a model
stream: deltas as they arrive, then the fully aggregated response."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import Field

from ._content import FrozenModel
from ._request import ChatRequest
from ._response import ChatResponse

__all__ = [
    "ChatModel",
    "ResponseComplete",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
]


class TextDelta(FrozenModel):
    """A piece of the answer's visible text."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(FrozenModel):
    """A piece of the model's reasoning text."""

    kind: Literal["thinking_delta"] = "thinking_delta"
    text: str


class ToolCallDelta(FrozenModel):
    """A piece of a tool call; `id` and `name` usually arrive with the first piece of each `index`.

    Deltas are for display only: tools run from the aggregated `ResponseComplete.response`.
    """

    kind: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class ResponseComplete(FrozenModel):
    """The last event of a stream: the aggregated response, equal to what `chat()` returns."""

    kind: Literal["response_complete"] = "response_complete"
    response: ChatResponse


StreamEvent = Annotated[
    TextDelta | ThinkingDelta | ToolCallDelta | ResponseComplete, Field(discriminator="kind")
]
"""Any event of a model stream."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: blocking and streaming, sync and async.

    `stream`/`astream` yield deltas and end with exactly one `ResponseComplete` whose response equals
    what `chat`/`achat` return for the same exchange.
    """

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and wait for the whole answer."""
        ...

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        ...

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` and yield events as the answer arrives."""
        ...

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        ...
