"""AG-UI 1.0 (`POST /ag-ui`): a `RunAgentInput` read into a `Turn`, a run's moments rendered as
the protocol's events, each built from the `ag-ui-protocol` package's models.

The run's shape on the wire: `RUN_STARTED`; per model round, the assistant's text message
(opened empty when the round only calls tools: a tool call's `parentMessageId` must name a
message the client has), its reasoning, its tool calls with their arguments as they stream,
their results; then each new or changed message's seal (`REASONING_ENCRYPTED_VALUE`: the
message's `encryptedValue`, which the client sends back); then `RUN_FINISHED` — its outcome an
interrupt per call the run waits on (approval, a question, an external result), the interrupt's
id the call's digest — or `RUN_ERROR`, after which nothing follows.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core
from ag_ui.core import (
    PROTOCOL_VERSION,
    AssistantMessage,
    AudioPart,
    BaseEvent,
    CustomEvent,
    DataSource,
    DocumentPart,
    FunctionCall,
    ImagePart,
    Interrupt,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.core import TokenUsage as AGUITokenUsage
from ag_ui.core import ToolCall as AGUIToolCall
from pydantic import ValidationError

from .._content import BinaryContent, Content, TextContent
from .._messages import AiMessage, ChatMessage, ToolResultMessage
from .._messages import UserMessage as ChatUserMessage
from .._response import TokenUsage
from ._conversation import (
    Answer,
    Turn,
    Waiting,
    binary_part,
    checked_id,
    shown,
    stateless_turn,
    stored_turn,
)
from ._errors import InputError
from ._reader import (
    CallChunk,
    CallProgress,
    CallReady,
    CallResult,
    CallStarted,
    Failed,
    Finished,
    Moment,
    Paused,
    Sealed,
    TextChunk,
    TextEnded,
    TextStarted,
    ThinkingChunk,
    ThinkingEnded,
    ThinkingStarted,
)

if TYPE_CHECKING:
    from ._seal import Sealer

__all__ = [
    "APPROVAL_SCHEMA",
    "EXTERNAL_SCHEMA",
    "AGUIRenderer",
    "interrupts",
    "parse",
    "renderer",
    "thread_messages",
    "turn",
]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an approval's resume payload is: `{"approved": true}`, `{"approved": false, "reason":
"..."}`."""

EXTERNAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {}, "error": {"type": "string"}},
    "additionalProperties": False,
}
"""What an external call's resume payload is: `{"result": value}` or `{"error": "why"}`."""

NO_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
"""What a URL-mode question's resume payload is: nothing (the user answers at its `url`)."""

_REASONS = {"approval": "tool_call", "elicitation": "input_required"}


def parse(body: bytes) -> RunAgentInput:
    """The request body as a `RunAgentInput` (422 when it is not one)."""
    try:
        return RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        raise InputError(422, f"not an AG-UI RunAgentInput: {_first(error)}") from None


def _first(error: ValidationError) -> str:
    problem = error.errors(include_url=False)[0]
    where = ".".join(map(str, problem["loc"])) or "body"
    return f"{where}: {problem['msg']}"


def turn(
    request: RunAgentInput,
    *,
    sealer: Sealer | None,
    stored: Sequence[ChatMessage] | None,
    instructions: str | None,
) -> Turn:
    """What `request` asks of the loop: with `stored` (the thread's conversation in the store),
    its last user messages and its resume entries; without, its whole history, rebuilt from the
    user's messages and the seals of the others."""
    thread_id = checked_id(request.thread_id, "threadId")
    checked_id(request.run_id, "runId")
    answers = [Answer(e.interrupt_id, e.status, e.payload) for e in request.resume or ()]
    if stored is not None:
        new: list[ChatMessage] = []
        new_ids: list[str | None] = []
        for message in reversed(request.messages):
            if not isinstance(message, UserMessage):
                break
            new.insert(0, _user(message))
            new_ids.insert(0, message.id)
        return stored_turn(thread_id, stored, new, new_ids, answers, instructions)
    assert sealer is not None
    history: list[ChatMessage] = []
    ids: list[str | None] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            history.append(_user(message))
            ids.append(message.id)
        elif isinstance(message, AssistantMessage | ToolMessage):
            what = f"the {message.role} message {shown(message.id, 40)}"
            for sealed in sealer.open(thread_id, message.encrypted_value, what):
                history.append(sealed)
                ids.append(message.id)
        elif message.role in ("system", "developer"):
            raise InputError(
                400,
                f"a client may not send {message.role} messages: the server's instructions are "
                "its own (create_app(instructions=...))",
            )
        # Reasoning messages are the client's copy of what the assistant's seal holds; activity
        # messages are the client's own.
    return stateless_turn(thread_id, history, ids, answers, instructions)


def renderer(request: RunAgentInput, turn: Turn) -> tuple[AGUIRenderer, None]:
    """The renderer of `request`'s run (each message of it shown on its own)."""
    return AGUIRenderer(turn.thread_id, request.run_id), None


def _user(message: UserMessage) -> ChatMessage:
    if isinstance(message.content, str):
        return ChatUserMessage(content=message.content)
    parts: list[Content] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append(TextContent(text=part.text))
            continue
        source = getattr(part, "source", None)
        if not isinstance(source, DataSource) or part.type == "video":
            raise InputError(
                422,
                f"a user message's {part.type} part is not taken: a client sends text, and "
                "images, documents and audio inline (a data source)",
            )
        parts.append(binary_part(part.type, source.mime_type, source.value))
    if not parts:
        raise InputError(422, f"the user message {shown(message.id, 40)} has no content")
    return ChatUserMessage(content=parts)


class AGUIRenderer:
    """A run's moments as AG-UI events, framed for SSE (`data: <json>\\n\\n`: the official
    client splits frames on `\\n\\n` alone)."""

    content_type = "text/event-stream"

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id

    def start(self) -> bytes:
        started = _plain(
            RunStartedEvent,
            thread_id=self.thread_id,
            run_id=self.run_id,
            protocol_version=PROTOCOL_VERSION,
        )
        return _frames([started])

    def end(self) -> bytes:
        return b""

    def render(self, moments: Sequence[Moment]) -> bytes:
        events: list[BaseEvent | bytes] = []
        for moment in moments:
            self._event(moment, events)
        return _frames(events)

    def _event(self, moment: Moment, events: list[BaseEvent | bytes]) -> None:
        # The events made of ids and text, most of a run's, are written without building their
        # models: a model costs several times its JSON (`tests/ui/test_ui.py` checks the bytes are
        # the models').
        if isinstance(moment, TextChunk):
            events.append(
                _plain(TextMessageContentEvent, message_id=moment.message_id, delta=moment.text)
            )
        elif isinstance(moment, CallChunk):
            events.append(_plain(ToolCallArgsEvent, tool_call_id=moment.call_id, delta=moment.text))
        elif isinstance(moment, TextStarted):
            events.append(
                _plain(TextMessageStartEvent, message_id=moment.message_id, role="assistant")
            )
        elif isinstance(moment, TextEnded):
            events.append(_plain(TextMessageEndEvent, message_id=moment.message_id))
        elif isinstance(moment, ThinkingStarted):
            events.append(_plain(ReasoningStartEvent, message_id=moment.thinking_id))
            events.append(_plain(ReasoningMessageStartEvent, message_id=moment.thinking_id))
        elif isinstance(moment, ThinkingChunk):
            events.append(
                _plain(
                    ReasoningMessageContentEvent, message_id=moment.thinking_id, delta=moment.text
                )
            )
        elif isinstance(moment, ThinkingEnded):
            events.append(_plain(ReasoningMessageEndEvent, message_id=moment.thinking_id))
            events.append(_plain(ReasoningEndEvent, message_id=moment.thinking_id))
        elif isinstance(moment, CallStarted):
            events.append(
                _plain(
                    ToolCallStartEvent,
                    tool_call_id=moment.call_id,
                    tool_call_name=moment.name,
                    parent_message_id=moment.message_id,
                )
            )
        elif isinstance(moment, CallReady):
            events.append(_plain(ToolCallEndEvent, tool_call_id=moment.call_id))
        elif isinstance(moment, CallResult):
            events.append(
                ToolCallResultEvent(
                    message_id=moment.message_id,
                    tool_call_id=moment.call_id,
                    content=_content(moment.text, moment.content),
                    role="tool",
                    metadata={"isError": True} if moment.is_error else None,
                )
            )
        elif isinstance(moment, CallProgress):
            value = {
                "toolCallId": moment.call_id,
                "progress": moment.progress,
                "total": moment.total,
                "message": moment.message,
            }
            events.append(CustomEvent(name="agentforge.progress", value=value))
        elif isinstance(moment, Sealed):
            events.append(
                _plain(
                    ReasoningEncryptedValueEvent,
                    subtype="message",
                    entity_id=moment.message_id,
                    encrypted_value=moment.token,
                )
            )
        elif isinstance(moment, Paused):
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts(moment.waiting))
            events.append(self._finished(outcome, moment.usage))
        elif isinstance(moment, Finished):
            events.append(self._finished(RunFinishedSuccessOutcome(), moment.usage))
        elif isinstance(moment, Failed):
            events.append(RunErrorEvent(message=moment.message, code=moment.code))
        # Steps are not shown: a round is its assistant message.

    def _finished(self, outcome: Any, usage: TokenUsage | None) -> RunFinishedEvent:
        used = None
        if usage is not None:
            used = [
                AGUITokenUsage(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    total_tokens=usage.total_tokens,
                )
            ]
        return RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, usage=used
        )


def _frames(events: Sequence[BaseEvent | bytes]) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else _json(e)) + b"\n\n" for e in events)


def _plain(kind: type[BaseEvent], **values: Any) -> bytes:
    """The JSON of the event `kind(**values)` as its model writes it (`model_dump_json(
    by_alias=True)`), without building the model: for the events made of our own ids and text,
    whose values need no validation."""
    wire: dict[str, Any] = {}
    for name, alias, omittable, default in _wire_fields(kind):
        value = values.get(name, default)
        if value is not None or not omittable:
            wire[alias] = value
    return pydantic_core.to_json(wire)


@functools.cache
def _wire_fields(kind: type[BaseEvent]) -> tuple[tuple[str, str, bool, Any], ...]:
    """Each field of an event class: its name, its name on the wire, whether it is left out
    when `None` (an optional field without a value, as the models' own serializer does), and
    its default."""
    return tuple(
        (
            name,
            field.alias or name,
            not field.is_required() and field.default is None,
            None if field.is_required() else field.default,
        )
        for name, field in kind.model_fields.items()
    )


def _json(event: BaseEvent) -> bytes:
    """`event.model_dump_json(by_alias=True)`, a third of its cost: the models serialize through
    a Python wrap serializer on every event; this reads their fields once per class
    (`tests/ui/test_ui.py` checks it writes the same bytes for every event a run sends)."""
    wire: dict[str, Any] = {}
    for name, alias, omittable, _ in _wire_fields(type(event)):
        value = getattr(event, name)
        if value is not None or not omittable:
            wire[alias] = value
    if event.model_extra:
        wire.update(event.model_extra)
    return pydantic_core.to_json(wire, by_alias=True)


def _content(text: str, content: Sequence[Content]) -> Any:
    """A tool result's content as AG-UI has it: its text, or its parts."""
    if not content:
        return text
    parts: list[Any] = []
    for part in content:
        if isinstance(part, TextContent):
            parts.append(TextPart(text=part.text))
        elif isinstance(part, BinaryContent):
            inline = part.base64_data()
            source: Any
            if inline is not None:
                source = DataSource(value=inline[1], mime_type=inline[0])
            else:
                source = UrlSource(value=part.url or "", mime_type=part.media_type)
            if part.kind == "image":
                parts.append(ImagePart(source=source))
            elif part.kind == "audio":
                parts.append(AudioPart(source=source))
            else:
                parts.append(DocumentPart(source=source))
    return parts


def interrupts(waiting: Sequence[Waiting]) -> list[Interrupt]:
    """An interrupt per call the run waits on: its id the call's digest, its metadata the tool
    and the arguments shown (`toolName`, `arguments`, `digest`, `kind`)."""
    return [_interrupt(w) for w in waiting]


def _interrupt(waiting: Waiting) -> Interrupt:
    call = waiting.call
    metadata = {
        "kind": waiting.reason,
        "toolName": call.name,
        "arguments": _arguments(call.arguments),
        "digest": waiting.digest,
    }
    question = waiting.question
    if waiting.reason == "elicitation" and question is not None:
        if question.url is not None:  # answered at the page: resolved with no payload
            metadata["url"] = question.url
        return Interrupt(
            id=waiting.interrupt_id,
            reason="input_required",
            message=question.message,
            tool_call_id=call.id,
            response_schema=dict(question.schema) if question.url is None else NO_ANSWER_SCHEMA,
            metadata=metadata,
        )
    if waiting.reason == "external":
        return Interrupt(
            id=waiting.interrupt_id,
            reason="agentforge:external_result",
            message=f"{call.name} runs outside the server: give its result",
            tool_call_id=call.id,
            response_schema=EXTERNAL_SCHEMA,
            metadata=metadata,
        )
    return Interrupt(
        id=waiting.interrupt_id,
        reason=_REASONS["approval"],
        message=f"Approve the call to {call.name}?",
        tool_call_id=call.id,
        response_schema=APPROVAL_SCHEMA,
        metadata=metadata,
    )


def _arguments(arguments: str) -> Any:
    try:
        return pydantic_core.from_json(arguments or "{}")
    except ValueError:
        return arguments


def thread_messages(history: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """A stored conversation as AG-UI messages (what the page shows after a reload): the
    user's, the assistant's with their calls, the tools' results; ids by position."""
    messages: list[Any] = []
    for position, message in enumerate(history):
        message_id = f"m{position}"
        if isinstance(message, ChatUserMessage):
            content: Any = message.content
            if not isinstance(content, str):
                content = _content("", content)
            messages.append(UserMessage(id=message_id, content=content))
        elif isinstance(message, AiMessage):
            calls = [
                AGUIToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                for c in message.tool_calls
            ]
            messages.append(
                AssistantMessage(id=message_id, content=message.text, tool_calls=calls or None)
            )
        elif isinstance(message, ToolResultMessage):
            messages.append(
                ToolMessage(
                    id=message_id,
                    tool_call_id=message.tool_call_id,
                    content=_content(message.text, message.content),
                    error=message.text if message.is_error else None,
                )
            )
    return [m.model_dump(mode="json", by_alias=True) for m in messages]
