"""A thread as a request gives it, whatever the protocol: its history checked like any history,
what it waits on, and a client's answers as the loop's decisions.

Each protocol's module reads its request into a `Turn` through these functions, so the rules
are written once: a tool result answers a call made just before it, once; a call cut short gets
a result saying so, never a second run; a thread that waits on a decision takes no new message
until it is given; an answer names something the thread waits on, or the request is refused
whole; an approval carries the digest of the call as it was shown, which the loop checks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from .._content import BinaryContent, Content
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    history_adapter,
)
from .._records import (
    Approval,
    Approved,
    Elicitation,
    ElicitationAnswer,
    PendingCall,
    PendingReason,
    ToolFailed,
    unanswered_calls,
)
from ._errors import InputError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "CUT_SHORT",
    "MAX_ID_CHARS",
    "Answer",
    "Turn",
    "Waiting",
    "binary_part",
    "checked",
    "checked_id",
    "decisions",
    "shown",
    "stateless_turn",
    "stored_turn",
    "waiting_calls",
    "with_instructions",
]

MAX_ID_CHARS = 256
"""The longest thread, run, message or interrupt id a client may send."""

CUT_SHORT = (
    "The call was cut short before its result came back (the run ended with it in flight); it "
    "may or may not have taken effect."
)
"""The result a call without one gets when the history goes on past it: it is never run again."""

_RECORD = "paused_calls"
"""`AiMessage.attributes` key of the loop's record of the calls a run paused on (see the
approval guide: `{id: {"reason": ..., "digest": ..., "question": ...}}`)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call the thread waits on, as the loop recorded it when the run paused."""

    call: ToolCall
    """The call as it was shown (with the arguments it paused with)."""
    reason: PendingReason
    digest: str
    """The loop's digest of the call as shown: the interrupt's id, the approval's id."""
    question: Elicitation | None = None
    call_ids: tuple[str, ...] = ()
    """For a call inside a sub-run: the ids of the calls that started it, the thread's own first
    (`PendingCall.call_ids`)."""

    @property
    def key(self) -> str:
        """What the loop's decisions name it by (`PendingCall.key`)."""
        return "/".join((*self.call_ids, self.call.id)) if self.call_ids else self.call.id

    @property
    def shown_call_id(self) -> str:
        """The thread's own call it waits in: itself, or the call that started its sub-run."""
        return self.call_ids[0] if self.call_ids else self.call.id

    @property
    def interrupt_id(self) -> str:
        """What a client names it by: the digest (unique to the call, its thread and what it
        waits for)."""
        return self.digest


@dataclass(frozen=True, slots=True)
class Answer:
    """A client's answer to one thing the thread waits on, in AG-UI's terms (the AI SDK's
    approvals and tool outputs are read into the same)."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    """An approval: `{"approved": bool, "reason": str}`; a question: the answer object; an
    external call: `{"result": value}` or `{"error": "why"}`."""


@dataclass
class Turn:
    """What one request asks of the loop."""

    thread_id: str
    history: list[ChatMessage]
    """The whole conversation as the run starts from it."""
    ids: list[str | None]
    """The protocol's id of the message each history message was shown as (`None`: none)."""
    new: list[ChatMessage] = field(default_factory=list)
    """What the request adds to a stored conversation (its user messages)."""
    approvals: dict[str, Approval] = field(default_factory=dict)
    external_results: dict[str, Any] = field(default_factory=dict)
    waiting: list[Waiting] = field(default_factory=list)
    """What the thread waited on before this request."""


class _ApprovalPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approved: StrictBool
    reason: str | None = Field(default=None, max_length=2000)


class _ExternalPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    result: Any = None
    error: str | None = Field(default=None, max_length=10000)


@functools.cache
def _question() -> TypeAdapter[Elicitation]:
    from pydantic import TypeAdapter

    return TypeAdapter(Elicitation)


_MAX_DEPTH = 8
"""How deep the sub-runs' records are read (the loop's own bound is lower: `max_depth`)."""


def shown(text: str, limit: int = 80) -> str:
    """A client's string as an error message quotes it: `repr`, cut to `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def checked_id(value: str, what: str) -> str:
    """`value`, refused (400) when empty or longer than `MAX_ID_CHARS`."""
    if not value or len(value) > MAX_ID_CHARS:
        raise InputError(400, f"{what} must be 1 to {MAX_ID_CHARS} characters")
    return value


def waiting_calls(history: Sequence[ChatMessage], within: tuple[str, ...] = ()) -> list[Waiting]:
    """The calls `history` waits on: those of its last tool-calling message that have no result
    and that the loop recorded when the run paused on them; for a sub-run's call whose record
    carries the sub-run's history, the calls inside it (`within`: the calls that started
    `history`'s run, when it is a sub-run's)."""
    message, calls = unanswered_calls(history)
    if message is None:
        return []
    record = message.attributes.get(_RECORD)
    if not isinstance(record, Mapping):
        return []
    waiting = []
    for call in calls:
        entry = record.get(call.id)
        if not isinstance(entry, Mapping):
            continue
        reason, digest = entry.get("reason"), entry.get("digest")
        if reason == "sub_run" and len(within) < _MAX_DEPTH:
            waiting += _inside(entry, (*within, call.id))
            continue
        if reason not in ("approval", "external", "elicitation") or not isinstance(digest, str):
            continue
        arguments = entry.get("arguments")
        if isinstance(arguments, str):
            call = call.model_copy(update={"arguments": arguments})
        question = entry.get("question")
        try:
            asked = None if question is None else _question().validate_python(question)
        except ValidationError:
            asked = None
        waiting.append(Waiting(call, reason, digest, asked, within))
    return waiting


def _inside(entry: Mapping[str, Any], within: tuple[str, ...]) -> list[Waiting]:
    """The calls a paused sub-run's record says it waits on: from the history it carries, or
    the calls recorded when its store keeps the history."""
    try:
        if isinstance(entry.get("messages"), list):
            return waiting_calls(history_adapter().validate_python(entry["messages"]), within)
        recorded = _recorded_calls().validate_python(entry.get("pending") or [])
    except ValidationError:
        return []
    return [
        Waiting(p.call, p.reason, p.digest or "", p.elicitation, (*within, *p.call_ids))
        for p in recorded
    ]


@functools.cache
def _recorded_calls() -> TypeAdapter[list[PendingCall]]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[PendingCall])


def checked(
    history: Sequence[ChatMessage], ids: Sequence[str | None]
) -> tuple[list[ChatMessage], list[str | None]]:
    """A client's history as the loop may take it, and the ids beside it.

    Raises `InputError` for a tool result that answers no call made just before it (or answers
    one twice), for a call id used twice, and for a message sent while the thread waits on a
    decision. A call without a result that the history goes on past, or that ends it without
    the loop having paused on it (a run cut short), gets a result saying so (`CUT_SHORT`).
    """
    out: list[ChatMessage] = []
    out_ids: list[str | None] = []
    made: set[str] = set()
    open_calls: dict[str, ToolCall] = {}
    paused: Mapping[str, Any] = {}

    def cut_short(*, ending: bool) -> None:
        held = [call_id for call_id in open_calls if call_id in paused]
        if held and not ending:
            raise InputError(
                409,
                f"the thread waits for a decision on {', '.join(map(shown, held))}: answer it "
                "(approve, deny or answer it) before sending a new message",
            )
        for call in list(open_calls.values()):
            if call.id in paused:
                continue
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id, tool_name=call.name, text=CUT_SHORT, is_error=True
                )
            )
            out_ids.append(None)
            del open_calls[call.id]

    for message, message_id in zip(history, ids, strict=True):
        if message.role == "tool":
            if open_calls.pop(message.tool_call_id, None) is None:
                raise InputError(
                    400,
                    f"a tool result answers the call {shown(message.tool_call_id)}, which the "
                    "message before it did not make (or which has a result already)",
                )
        else:
            cut_short(ending=False)
            if isinstance(message, AiMessage) and message.tool_calls:
                for call in message.tool_calls:
                    if call.id in made:
                        raise InputError(400, f"the call id {shown(call.id)} is used twice")
                    made.add(call.id)
                open_calls = {call.id: call for call in message.tool_calls}
                record = message.attributes.get(_RECORD)
                paused = record if isinstance(record, Mapping) else {}
        out.append(message)
        out_ids.append(message_id)
    cut_short(ending=True)
    return out, out_ids


def decisions(
    waiting: Sequence[Waiting], answers: Sequence[Answer]
) -> tuple[dict[str, Approval], dict[str, Any]]:
    """The loop's `approvals` and `external_results` for `answers`.

    An approval carries the digest of the call as shown (`PendingCall.approve()`), so the loop
    runs the call only if it is still that call; an answer carries its question and digest.
    Raises `InputError` for an answer to something the thread does not wait on (refused whole:
    nothing runs), one given twice, or a payload of the wrong shape.
    """
    by_id = {w.interrupt_id: w for w in waiting}
    approvals: dict[str, Approval] = {}
    external: dict[str, Any] = {}
    seen: set[str] = set()
    for answer in answers:
        w = by_id.get(answer.interrupt_id)
        if w is None:
            known = ", ".join(shown(i, 40) for i in by_id) or "nothing"
            raise InputError(
                409,
                f"the thread does not wait on {shown(answer.interrupt_id, 40)} (it waits on "
                f"{known}); nothing ran",
            )
        if answer.interrupt_id in seen:
            raise InputError(400, f"{shown(answer.interrupt_id, 40)} is answered twice")
        seen.add(answer.interrupt_id)
        call_id = w.key
        if w.reason == "approval":
            if answer.status == "cancelled":
                approvals[call_id] = False
                continue
            approval = _payload(_ApprovalPayload, answer.payload, w)
            if approval.approved:
                approvals[call_id] = Approved(digest=w.digest)
            else:
                approvals[call_id] = approval.reason or False
        elif w.reason == "elicitation":
            if answer.status == "cancelled":
                approvals[call_id] = ElicitationAnswer(None, "cancel", w.question, w.digest)
                continue
            if w.question is not None and w.question.url is not None:
                if answer.payload not in (None, {}):
                    raise InputError(
                        422,
                        f"{shown(w.interrupt_id, 40)} is answered at its URL: resolve it with "
                        "no payload once done",
                    )
                approvals[call_id] = ElicitationAnswer(None, "accept", w.question, w.digest)
                continue
            if not isinstance(answer.payload, dict):
                raise InputError(
                    422, f"the answer to {shown(w.interrupt_id, 40)} must be a JSON object"
                )
            approvals[call_id] = ElicitationAnswer(answer.payload, "accept", w.question, w.digest)
        else:
            if answer.status == "cancelled":
                external[call_id] = ToolFailed("The user cancelled the call.")
                continue
            result = _payload(_ExternalPayload, answer.payload, w)
            external[call_id] = ToolFailed(result.error) if result.error else result.result
    return approvals, external


def _payload(model: type[Any], payload: Any, waiting: Waiting) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(map(str, problem["loc"])) or "payload"
        raise InputError(
            422,
            f"the answer to {shown(waiting.interrupt_id, 40)} ({waiting.reason}) is malformed: "
            f"{where}: {problem['msg']}",
        ) from None


def with_instructions(
    instructions: str | None, history: list[ChatMessage], ids: list[str | None]
) -> None:
    """Put the server's instructions first (a client's history never holds a system message)."""
    if instructions:
        history.insert(0, SystemMessage(text=instructions))
        ids.insert(0, None)


def stateless_turn(
    thread_id: str,
    history: list[ChatMessage],
    ids: list[str | None],
    answers: Sequence[Answer],
    instructions: str | None,
) -> Turn:
    """The turn of a client that holds its conversation: `history` rebuilt from its messages
    and the seals they carry (checked here), `answers` to what it waits on."""
    history, ids = checked(history, ids)
    waiting = waiting_calls(history)
    approvals, external = decisions(waiting, answers)
    _check_something_to_do(waiting, answers, bool(history) and history[-1].role != "assistant")
    with_instructions(instructions, history, ids)
    return Turn(thread_id, history, ids, [], approvals, external, waiting)


def stored_turn(
    thread_id: str,
    stored: Sequence[ChatMessage],
    new: list[ChatMessage],
    new_ids: list[str | None],
    answers: Sequence[Answer],
    instructions: str | None,
) -> Turn:
    """The turn of a thread a store keeps: `new` (the client's last user messages) goes after
    `stored`, or `answers` decide what it waits on; never both."""
    waiting = waiting_calls(stored)
    if waiting and new:
        held = ", ".join(shown(w.call.id) for w in waiting)
        raise InputError(
            409,
            f"the thread waits for a decision on {held}: answer it (approve, deny or answer it) "
            "before sending a new message",
        )
    approvals, external = decisions(waiting, answers)
    _check_something_to_do(waiting, answers, bool(new))
    if not stored:
        with_instructions(instructions, new, new_ids)
    history = [*stored, *new]
    ids: list[str | None] = [*([None] * len(stored)), *new_ids]
    return Turn(thread_id, history, ids, new, approvals, external, waiting)


def _check_something_to_do(
    waiting: Sequence[Waiting], answers: Sequence[Answer], new_input: bool
) -> None:
    if waiting and not answers:
        held = ", ".join(shown(w.interrupt_id, 40) for w in waiting)
        raise InputError(409, f"the thread waits on {held}: answer it to go on")
    if not waiting and not new_input:
        raise InputError(400, "nothing to run: the conversation does not end with a user message")


def binary_part(kind: str, media_type: str, data: str) -> Content:
    """A client's inline part (base64 `data`) as a content part of its kind: `image`, `audio`,
    `document` (and, for the AI SDK's files, by media type); refused (422) when not base64."""
    from .._content import AudioContent, DocumentContent, FileContent, ImageContent

    if kind == "file":
        kind = media_type.partition("/")[0]
        if media_type == "application/pdf" or kind == "text":
            kind = "document"
    kinds: dict[str, type[BinaryContent]] = {
        "image": ImageContent,
        "audio": AudioContent,
        "document": DocumentContent,
    }
    try:
        part = kinds.get(kind, FileContent).model_validate({"data": data, "media_type": media_type})
        return part  # type: ignore[return-value]  # one of the `Content` classes
    except ValidationError:
        raise InputError(422, f"a {kind} part's data is not base64") from None
