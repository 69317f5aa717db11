"""The conversation a run keeps: the caller's messages checked before any model call, a call's
result as the message that answers it, whose conversation it is, the history an error that ends
the run carries, and the answers the loop refuses to act on (a call cut off mid-arguments, an
awaitable where a sync hook's answer belongs)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import pydantic_core

from .._exceptions import AgentForgeError, ModelError
from .._identity import random_id, recorded_conversation
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage, shown_name
from .._records import ToolExecution, ToolExecutionResult
from ._history import EXACT_MESSAGE_TYPES, MESSAGE_TYPES, is_message


def result_message(execution: ToolExecution) -> ToolResultMessage:
    """The message that answers an executed call in the history: its text, and any content
    beyond text."""
    call, result = execution.call, execution.result
    if type(result) is ToolExecutionResult or not result.content:  # a plain result has none
        return ToolResultMessage(
            tool_call_id=call.id, tool_name=call.name, text=result.text, is_error=result.is_error
        )
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        text=result.text,
        content=result.content,
        is_error=result.is_error,
    )


def owner(given: str | None, paused: AiMessage | None) -> str:
    """The run's conversation id: the one given, else the one recorded on the message whose calls
    it resumes, else a new random one. A given id that differs from the recorded one is refused:
    the paused calls, their questions and their idempotency keys belong to that conversation."""
    recorded = None if paused is None else recorded_conversation(paused)
    if not given:
        return recorded or random_id()
    if recorded is not None and recorded != given:
        raise ValueError(
            f"the history's pending calls belong to conversation {recorded!r}, not "
            f"{given!r}; resume them with conversation_id={recorded!r} (or without one)"
        )
    return given


_CARRIED = "_agentforge_carried"
"""The history attributes a run set on an exception of the program's own."""


def carry(error: Exception, **history: Any) -> None:
    """Set the run's history (`messages`, `tool_executions`, `usage`) on `error`. An
    `AgentForgeError` declares them; an exception of the program's own (a hook or handler that
    raised, a model of its own that failed) propagates as it is and carries them too, unless it
    has attributes of those names of its own, which are left as they are."""
    carried = getattr(error, _CARRIED, ())
    if not isinstance(error, AgentForgeError):
        history = {
            name: value
            for name, value in history.items()
            if name in carried or not hasattr(error, name)
        }
    try:
        for name, value in history.items():
            # `object.__setattr__`: a frozen dataclass exception takes them too.
            object.__setattr__(error, name, value)
        if not isinstance(error, AgentForgeError):
            object.__setattr__(error, _CARRIED, tuple(history))
    except (AttributeError, TypeError):  # an exception that takes no attributes at all
        pass


def refuse_cut_off(calls: Sequence[ToolCall]) -> None:
    """Raise `ModelError` for an answer cut off by the token limit in the middle of a call (its
    arguments are not whole JSON): such a call is never executed, and the model could only guess
    what it was told it did wrong. The calls of the answer are then answered as not completed, so
    the history can be resumed (with a larger `max_tokens`)."""
    for call in calls:
        try:
            pydantic_core.from_json(call.arguments or "{}")
        except ValueError:
            raise ModelError(
                f"the answer was cut off by the token limit (finish_reason 'length') in the "
                f"middle of the call to `{shown_name(call.name)}`, which was not executed; raise "
                "max_tokens",
                code="cut_off_tool_call",
            ) from None


def not_awaitable(value: Any, hook: str) -> Any:
    """`value`, unless a hook gave an awaitable where it is not awaited (a sync function that
    returns a coroutine): a `TypeError` rather than a coroutine the loop would treat as an answer."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "coroutine was never awaited" warning
        raise TypeError(
            f"{hook} returned an awaitable; make it an async function (run under achat/astream)"
        )
    return value


def conversation(messages: str | Iterable[ChatMessage] | None) -> list[ChatMessage]:
    """The caller's messages as a new list: a string is one user message; anything that is not a
    message is refused here, before any model call."""
    if isinstance(messages, str):
        return [UserMessage(content=messages)]
    if messages is None:
        raise TypeError(
            "messages is required: a run resumes without new input only from a stored "
            "conversation (ToolService(store=...) and conversation_id=...)"
        )
    if not isinstance(messages, (list, tuple)) and not isinstance(messages, Iterable):
        raise TypeError(
            f"messages must be a string or an iterable of chat messages, not {type(messages).__name__}"
        )
    conversation = list(messages)
    if EXACT_MESSAGE_TYPES.issuperset(map(type, conversation)):
        return conversation  # the common case, one C-level pass
    for position, message in enumerate(conversation):
        if not is_message(message):
            raise TypeError(
                f"messages[{position}] is of type {type(message).__name__!r}, not a chat message"
                f" ({', '.join(t.__name__ for t in MESSAGE_TYPES)})"
            )
    return conversation
