"""Events of the streaming tool loop (`ToolService.stream` / `astream`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeAlias

from typing_extensions import TypeVar

from .._messages import ToolCall
from .._model import StreamEvent
from .._records import ToolExecution
from ._results import Outcome

__all__ = [
    "FinalResultEvent",
    "OutputCallEvent",
    "PartialArgumentsEvent",
    "SubRunEvent",
    "ToolCallEvent",
    "ToolLoopEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
]

OutputT = TypeVar("OutputT", default=None)


@dataclass(frozen=True)
class PartialArgumentsEvent:
    """Best-effort parse of a tool call's arguments so far, for live displays only.

    Never used for execution: tools run from the complete response.
    """

    index: int
    name: str | None
    arguments: Any
    """What the partial JSON parses to so far (usually a dict missing its tail)."""


@dataclass(frozen=True)
class ToolCallEvent:
    """A complete tool call from the model's response, about to run."""

    call: ToolCall


@dataclass(frozen=True)
class ToolProgressEvent:
    """A call in flight reported how far it is (`ToolContext.report_progress`; an MCP server's
    `notifications/progress`), between its `ToolCallEvent` and its `ToolResultEvent`."""

    call: ToolCall
    progress: float
    """Grows with each event of a call; its unit is the tool's."""
    total: float | None = None
    """What `progress` counts up to, when the tool knows."""
    message: str | None = None
    """What the tool is doing, at most 1,000 characters (longer ones are cut)."""


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call finished (after the error policies were applied)."""

    execution: ToolExecution


@dataclass(frozen=True)
class OutputCallEvent:
    """The model answered through the structured-output tool (`final_result`, or the name its
    `OutputSpec` gives): the validation of that call, in place of the `ToolCallEvent` and
    `ToolResultEvent` a tool gets. A failed one (`execution.failed`) went back to the model,
    which answers again; a valid one ends the run with `FinalResultEvent`."""

    execution: ToolExecution


@dataclass(frozen=True)
class FinalResultEvent(Generic[OutputT]):
    """The last event: the whole run's result, equal to what `chat` returns."""

    result: Outcome[OutputT]


@dataclass(frozen=True)
class SubRunEvent:
    """An event of a sub-run (a tool made by `ToolService.as_tool`) in its parent's stream,
    marked with its path: the calls that started it, outermost first. A sub-run's own sub-runs'
    events come as one `SubRunEvent` with the longer path, never nested."""

    path: tuple[str, ...]
    """The names of the tools whose calls started it, outermost first."""
    call_ids: tuple[str, ...]
    """The ids of those calls, in the same order."""
    event: Any
    """The sub-run's event (a `ToolLoopEvent` of its own stream, its `FinalResultEvent` last)."""

    @classmethod
    def of(cls, name: str, call_id: str, event: Any) -> SubRunEvent:
        """`event` of the sub-run started by the call `call_id` of tool `name`."""
        if isinstance(event, SubRunEvent):
            return cls((name, *event.path), (call_id, *event.call_ids), event.event)
        return cls((name,), (call_id,), event)


_Output = TypeVar("_Output", default=Any)

ToolLoopEvent: TypeAlias = (
    StreamEvent
    | PartialArgumentsEvent
    | ToolCallEvent
    | ToolProgressEvent
    | ToolResultEvent
    | OutputCallEvent
    | SubRunEvent
    | FinalResultEvent[_Output]
)
"""Any event of the streaming tool loop: the model's own stream events for every round, plus
the loop's tool events and, last, `FinalResultEvent`. Generic in the run's output type:
`stream(..., output_type=City)` yields `ToolLoopEvent[City]`; a bare `ToolLoopEvent` is any
run's."""
