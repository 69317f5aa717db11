"""The `ChatModel` protocol every provider and test double implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Protocol, runtime_checkable

from ._events import StreamEvent
from ._request import ChatRequest
from ._response import ChatResponse

__all__ = ["ChatModel"]


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
