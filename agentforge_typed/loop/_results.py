"""What a `ToolService` run returns: every tool execution and the final answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

from typing_extensions import TypeVar

from .._messages import ChatMessage
from .._records import PendingCall, ToolExecution
from .._response import ChatResponse, TokenUsage

__all__ = ["ToolChatResult"]

OutputT = TypeVar("OutputT", default=None)


class _Output:
    """`ToolChatResult.output`: the run's output, refused while the run waits on calls (a paused
    run has none, whatever `OutputT` says)."""

    def __get__(self, result: Any, owner: Any = None) -> Any:
        if result is None:
            return None  # the field's default
        fields = result.__dict__
        output = fields.get("_output")
        pending = fields.get("pending")
        if output is None and pending:
            raise ValueError(
                f"the run paused on {len(pending)} call(s) that wait for a decision "
                f"({', '.join(repr(p.key) for p in pending)}): it has no output yet; resume it "
                "with the decisions (see result.pending)"
            )
        return output

    def __set__(self, result: Any, value: Any) -> None:
        result.__dict__["_output"] = value


@dataclass(frozen=True)
class ToolChatResult(Generic[OutputT]):
    """The outcome of `ToolService.chat`: the final answer and everything that led to it."""

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
    output: OutputT = _Output()  # type: ignore[assignment]
    """The validated structured output, when `output_type` was given (`None` without one).

    Raises:
        ValueError: The run paused on calls that wait (`pending`): it has no output yet, and
            `None` is not one. Resume it; `output` is there when the run ends.
    """
    returned_immediately: bool = False
    """Whether a `ReturnBehavior` ended the loop on tool results instead of a final answer."""
    pending: Sequence[PendingCall] = ()
    """The calls the run paused on (awaiting approval or an external result), in the model's
    order; resume with `approvals=` / `external_results=` and the `messages`."""
    conversation_id: str | None = None
    """The run's conversation id: the `conversation_id=` given, the one of the paused calls it
    resumed (recorded on their message), or a random one."""

    def __repr__(self) -> str:
        # By the stored fields: `output` raises on a paused run, and a repr never does.
        shown = ", ".join(f"{name.lstrip('_')}={value!r}" for name, value in self.__dict__.items())
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    @property
    def text(self) -> str | None:
        """The final answer's text."""
        return self.final_response.ai_message.text

    @classmethod
    def _of(cls, **fields: Any) -> ToolChatResult[Any]:
        """The result of a run, from every one of its fields. The generated `__init__` of a
        frozen dataclass sets each field through `object.__setattr__`, which made building the
        result cost a twentieth of a short run; nothing else differs (there is no
        `__post_init__`)."""
        result = object.__new__(cls)
        fields["_output"] = fields.pop("output", None)  # what `output` reads
        object.__setattr__(result, "__dict__", fields)  # the keywords' own new dict
        return result
