"""What a streaming driver reads from one round's model stream: the complete response, and the
tool-call arguments so far, parsed leniently for display (`PartialArgumentsEvent`s), at a cost
linear in the arguments' size."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pydantic_core

from .._exceptions import ModelError
from .._model import ResponseComplete, StreamEvent, ToolCallDelta
from .._response import ChatResponse
from ._events import PartialArgumentsEvent

logger = logging.getLogger("agentforge_typed")


__all__ = ["RoundReader", "no_events"]


_EVERY_DELTA_BELOW = 1024
"""Arguments shorter than this (in characters) are parsed for display on every delta."""


class _PartialCall:
    """One streamed tool call as the loop reads it: its name, and references to the provider's
    argument deltas (the strings themselves, not a copy), joined only to be parsed."""

    __slots__ = ("chunks", "name", "parsed_size", "size")

    def __init__(self) -> None:
        self.name: str | None = None
        self.chunks: list[str] = []
        self.size = 0
        self.parsed_size = 0

    def due(self) -> bool:
        """Whether to parse now: on every delta while short, then each time the arguments have
        grown by a quarter, so that parsing costs a bounded multiple of their size in all."""
        grown = self.size - self.parsed_size
        return self.size < _EVERY_DELTA_BELOW or grown >= self.parsed_size // 4


class RoundReader:
    """What the loop reads from one round's model stream: the complete response, and the
    tool-call arguments so far, parsed leniently for display."""

    def __init__(self) -> None:
        self.calls: dict[int, _PartialCall] = {}
        self.complete: ChatResponse | None = None

    def feed(self, event: StreamEvent) -> PartialArgumentsEvent | None:
        """Take one stream event; return the arguments parsed so far when it extends them (and
        a parse is due)."""
        if isinstance(event, ResponseComplete):
            self.complete = event.response
            self.calls = {}  # the response holds the arguments now; the deltas can go
        elif isinstance(event, ToolCallDelta):
            return self._arguments(event)
        return None

    def response(self) -> ChatResponse:
        """The round's complete response; raises `ModelError` when the stream ended without one."""
        if self.complete is None:
            raise ModelError("the model stream ended without a complete response")
        return self.complete

    def _arguments(self, delta: ToolCallDelta) -> PartialArgumentsEvent | None:
        call = self.calls.get(delta.index)
        if call is None:
            call = self.calls[delta.index] = _PartialCall()
        if delta.name:
            call.name = delta.name
        if not delta.arguments_delta:
            return None
        call.chunks.append(delta.arguments_delta)
        call.size += len(delta.arguments_delta)
        if not call.due():
            return None
        # Counted even when the text does not parse yet, so a broken stream stays linear too.
        call.parsed_size = call.size
        try:
            parsed = pydantic_core.from_json("".join(call.chunks), allow_partial="trailing-strings")
        except ValueError:
            return None
        return PartialArgumentsEvent(delta.index, call.name, parsed)


async def no_events() -> AsyncIterator[Any]:
    """An empty async stream: the model round a resumed run skips."""
    return
    yield  # pragma: no cover - makes this an async generator
