"""History processors: what the model is sent of the conversation, chosen before each model call.

A processor takes the messages about to be sent (a fresh list it may edit) and returns the ones to
send: drop old tool results, keep the last rounds, summarise. `ToolService(history_processors=...)`
runs them in order before every model call, under every driver and in durable runs; the run's
history itself is never changed, so `result.messages` keeps every message.

A processor may drop messages but never split a tool call from its result (providers refuse an
assistant message whose calls have no results, or a result without its call): such an answer is
refused with a `HistoryProcessorError` naming the processor and the call, before anything is sent.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, get_args

from .._exceptions import AgentForgeError
from .._messages import AiMessage, ChatMessage, ToolResultMessage

__all__ = [
    "EXACT_MESSAGE_TYPES",
    "MESSAGE_TYPES",
    "HistoryProcessor",
    "HistoryProcessorError",
    "aprocess",
    "check_processors",
    "drop_old_tool_results",
    "is_message",
    "keep_last_rounds",
    "process",
    "unsendable",
]

HistoryProcessor = Callable[
    [list[ChatMessage]], "Sequence[ChatMessage] | Awaitable[Sequence[ChatMessage]]"
]
"""A function (sync or async) from the messages about to be sent to the messages to send."""

MESSAGE_TYPES: tuple[type, ...] = get_args(get_args(ChatMessage)[0])
"""The classes of `ChatMessage`."""
EXACT_MESSAGE_TYPES = frozenset(MESSAGE_TYPES)


def is_message(value: object) -> bool:
    """Whether `value` is a chat message."""
    # The exact-type test first: `isinstance` on pydantic classes costs several times more, and a
    # long history pays it per message.
    return type(value) in EXACT_MESSAGE_TYPES or isinstance(value, MESSAGE_TYPES)


class HistoryProcessorError(AgentForgeError):
    """A history processor failed, or returned messages that cannot be sent (none, something that
    is not a message, or a tool call split from its result); nothing was sent. Like every loop
    error it carries the run so far, whose `messages` are the whole, unprocessed history.

    Attributes:
        processor: The processor's name.
    """

    def __init__(self, processor: str, message: str) -> None:
        self.processor = processor
        super().__init__(f"history processor {processor} {message}")


def check_processors(processors: Sequence[HistoryProcessor] | None) -> tuple[HistoryProcessor, ...]:
    """The processors as a tuple; a `TypeError` for one that is not callable."""
    found = tuple(processors or ())
    for position, processor in enumerate(found):
        if not callable(processor):
            raise TypeError(
                f"history_processors[{position}] is a {type(processor).__name__}, not a function "
                "taking and returning a list of messages"
            )
    return found


def process(
    processors: Sequence[HistoryProcessor], messages: Sequence[ChatMessage]
) -> Sequence[ChatMessage]:
    """The messages to send, `processors` applied in order; an async one runs to completion
    through `_sync.run_sync` (a blocking run)."""
    for processor in processors:
        answer = _call(processor, messages)
        if inspect.isawaitable(answer):
            answer = _guarded(processor, partial(_blocking, answer))
        messages = _checked(processor, answer, messages)
    return messages


async def aprocess(
    processors: Sequence[HistoryProcessor], messages: Sequence[ChatMessage]
) -> Sequence[ChatMessage]:
    """`process` for async runs: an async processor is awaited on the run's own loop."""
    for processor in processors:
        answer = _call(processor, messages)
        if inspect.isawaitable(answer):
            try:
                answer = await answer
            except Exception as exc:
                raise _failed(processor, exc) from exc
        messages = _checked(processor, answer, messages)
    return messages


def _blocking(awaitable: Awaitable[Any]) -> Any:
    from .._sync import run_sync

    return run_sync(lambda: awaitable)


def _name(processor: HistoryProcessor) -> str:
    return f"`{getattr(processor, '__qualname__', None) or repr(processor)}`"


def _failed(processor: HistoryProcessor, exc: Exception) -> AgentForgeError:
    # A package error (a summarising model call that failed) passes as it is; anything else is
    # contained in a `HistoryProcessorError`, so the failed run still carries its history.
    if isinstance(exc, AgentForgeError):
        return exc
    return HistoryProcessorError(_name(processor), f"raised {type(exc).__name__}: {exc}")


def _guarded(processor: HistoryProcessor, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:
        raise _failed(processor, exc) from exc


def _call(processor: HistoryProcessor, messages: Sequence[ChatMessage]) -> Any:
    return _guarded(processor, lambda: processor(list(messages)))


def _checked(
    processor: HistoryProcessor, answer: object, given: Sequence[ChatMessage]
) -> Sequence[ChatMessage]:
    """`answer` when it can be sent; otherwise a `HistoryProcessorError` saying why."""
    if not isinstance(answer, (list, tuple)):
        raise HistoryProcessorError(
            _name(processor), f"returned a {type(answer).__name__}, not a list of messages"
        )
    if not answer:
        raise HistoryProcessorError(
            _name(processor), "returned no messages; a model call needs at least one"
        )
    problem = unsendable(answer)
    if problem is not None and unsendable(given) is None:
        raise HistoryProcessorError(_name(processor), problem)
    return answer


def unsendable(messages: Sequence[object]) -> str | None:
    """What makes `messages` unsendable, worded to follow "the processor": something that is not
    a message, a tool call whose result is missing, a result whose call is missing; `None` when
    nothing does. One pass, linear."""
    unanswered: dict[str, str] = {}
    """The calls of the last assistant message that have no result yet, id → tool name."""
    for position, message in enumerate(messages):
        if not is_message(message):
            return f"returned messages[{position}], a {type(message).__name__}, not a chat message"
        if isinstance(message, AiMessage):
            if unanswered:
                break
            unanswered = {call.id: call.name for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            if unanswered.pop(message.tool_call_id, None) is None:
                return (
                    f"would split a tool call from its result: messages[{position}] is the "
                    f"result of call {message.tool_call_id!r} (`{message.tool_name}`) without "
                    "the assistant message that made the call"
                )
    if not unanswered:
        return None
    call_id, name = next(iter(unanswered.items()))
    return (
        f"would split a tool call from its result: the call {call_id!r} (`{name}`) is kept "
        "without its result"
    )


def keep_last_rounds(rounds: int) -> Callable[[list[ChatMessage]], list[ChatMessage]]:
    """A processor that keeps the start of the conversation and its last `rounds` rounds.

    The start is every message up to the first user message (the system prompt and the task). A
    round is one answer of the model with the results of its calls, and what came after them
    before the next answer (a user's follow-up): the model always sees a question before an
    answer, and never a call without its result. Everything between is dropped.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"keep_last_rounds needs a whole number of rounds >= 1, got {rounds!r}")

    def keep(messages: list[ChatMessage]) -> list[ChatMessage]:
        answers = [i for i, message in enumerate(messages) if isinstance(message, AiMessage)]
        if len(answers) <= rounds:
            return messages
        # The dropped part ends after the results of the answer before the kept rounds.
        cut = answers[-rounds - 1] + 1
        while cut < len(messages) and isinstance(messages[cut], ToolResultMessage):
            cut += 1
        head = next((i + 1 for i, message in enumerate(messages) if message.role == "user"), 0)
        if cut <= head:
            return messages
        return messages[:head] + messages[cut:]

    keep.__qualname__ = f"keep_last_rounds({rounds})"
    return keep


DROPPED_RESULT = "[result dropped from the context]"
"""The text `drop_old_tool_results` puts in place of an old result."""


def drop_old_tool_results(
    keep: int = 3, *, placeholder: str = DROPPED_RESULT
) -> Callable[[list[ChatMessage]], list[ChatMessage]]:
    """A processor that replaces the text (and content parts) of every tool result but the last
    `keep` with `placeholder`: the calls and their pairing stay (every call still has its result), but old,
    long results stop costing input tokens on every round."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ValueError(f"drop_old_tool_results needs keep >= 0, got {keep!r}")

    def drop(messages: list[ChatMessage]) -> list[ChatMessage]:
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
        for i in results[: max(len(results) - keep, 0)]:
            result = messages[i]
            assert isinstance(result, ToolResultMessage)
            if result.text != placeholder or result.content:
                # Its content parts go too: an old screenshot costs more than its text.
                messages[i] = result.model_copy(update={"text": placeholder, "content": ()})
        return messages

    drop.__qualname__ = f"drop_old_tool_results({keep})"
    return drop
