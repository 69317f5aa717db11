"""Stream events: deltas as they arrive, then the fully aggregated response."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ._frozen import FrozenModel
from ._response import ChatResponse

__all__ = ["ResponseComplete", "StreamEvent", "TextDelta", "ThinkingDelta", "ToolCallDelta"]


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
