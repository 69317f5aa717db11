"""What a `ToolService` run returns: every tool execution and the final answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeAlias

from typing_extensions import TypeVar

from .._messages import ChatMessage
from .._records import PendingCall, ToolExecution
from .._response import ChatResponse, TokenUsage

__all__ = ["FinishedChatResult", "Outcome", "PausedChatResult", "ToolChatResult"]

OutputT = TypeVar("OutputT", default=None)


@dataclass(frozen=True)
class ToolChatResult(Generic[OutputT]):
    """The outcome of `ToolService.chat`: the final answer and everything that led to it.

    A run returns one of its two kinds, told apart by `paused` (which type checkers narrow
    on): a `FinishedChatResult`, whose `output` is the output type, or a `PausedChatResult`,
    which waits on `pending` and has no output yet."""

    final_response: ChatResponse
    """The last model response: the final answer, or the tool-calling response when a
    `ReturnBehavior` ended the loop early."""
    messages: Sequence[ChatMessage]
    """The whole conversation, the caller's messages first."""
    tool_executions: Sequence[ToolExecution]
    intermediate_responses: Sequence[ChatResponse]
    """Every model response before `final_response`."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Token usage summed over every model call of the run."""
    output: OutputT | None = None
    """The validated structured output, when `output_type` was given (`None` while paused)."""
    returned_immediately: bool = False
    """Whether a `ReturnBehavior` ended the loop on tool results instead of a final answer."""
    pending: Sequence[PendingCall] = ()
    """The calls the run paused on (awaiting approval or an external result), in the model's
    order; resume with `approvals=` / `external_results=` and the `messages`."""
    conversation_id: str | None = None
    """The run's conversation id: the `conversation_id=` given, the one of the paused calls it
    resumed (recorded on their message), or a random one."""

    @property
    def paused(self) -> bool:
        """Whether the run waits on `pending` (approvals, external results, questions)."""
        return bool(self.pending)

    @property
    def text(self) -> str | None:
        """The final answer's text."""
        return self.final_response.ai_message.text


@dataclass(frozen=True)
class FinishedChatResult(ToolChatResult[OutputT]):
    """A run that ended: on its final answer (with `output` when an output type was given) or
    by a `ReturnBehavior`."""

    output: OutputT = None  # type: ignore[assignment]
    """The validated structured output, when `output_type` was given."""
    paused: ClassVar[Literal[False]] = False

    def __post_init__(self) -> None:
        if self.pending:
            raise ValueError(
                "a FinishedChatResult waits on no call: pending calls make a PausedChatResult"
            )


@dataclass(frozen=True)
class PausedChatResult(ToolChatResult[OutputT]):
    """A run that waits on `pending`: resume it with the decisions (`approvals=`,
    `external_results=`) to get its output."""

    output: None = None
    """Nothing yet: the output comes with the resumed run's result."""
    paused: ClassVar[Literal[True]] = True

    def __post_init__(self) -> None:
        if not self.pending:
            raise ValueError("a PausedChatResult waits on its pending calls: it needs at least one")


Outcome: TypeAlias = FinishedChatResult[OutputT] | PausedChatResult[OutputT]
"""What a run returns: finished or paused, told apart by `result.paused`."""


def outcome(**fields: Any) -> Outcome[Any]:
    """The result of a run, from every one of its fields: paused when it has `pending` calls.
    The generated `__init__` of a frozen dataclass sets each field through
    `object.__setattr__`, which made building the result cost a twentieth of a short run;
    nothing else differs (`__post_init__` only checks the kind against `pending`, by which it
    is chosen here)."""
    result: Outcome[Any]
    if fields["pending"]:
        result = object.__new__(PausedChatResult)
    else:
        result = object.__new__(FinishedChatResult)
    object.__setattr__(result, "__dict__", fields)  # the keywords' own new dict
    return result
