"""The records every layer shares: a tool call's result and execution, and what a paused call
waits for and is decided with.

Tools build results (`ToolExecutionResult`); the loop records executions (`ToolExecution`),
pauses on calls (`PendingCall`, `PendingResult`) and takes decisions (`Approval`: `Approved`,
`ToolFailed`, `ElicitationAnswer`); an MCP tool asks questions (`Elicitation`); a durable run and
a server carry them. Plain dataclasses, built on every call, so they stay cheap: no validation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ._content import Content
from ._messages import AiMessage, ChatMessage, ToolCall, shown_name

__all__ = [
    "ALLOWED",
    "WAITS_FOR",
    "Approval",
    "Approved",
    "CallDecision",
    "GuardrailOutcome",
    "Elicitation",
    "ElicitationAnswer",
    "ErrorKind",
    "PendingCall",
    "PendingReason",
    "PendingResult",
    "SubRunPause",
    "SubRunResume",
    "ToolExecution",
    "ToolExecutionResult",
    "ToolFailed",
    "named_call",
    "new_execution",
    "pending_calls",
    "unanswered_calls",
]

ErrorKind = Literal[
    "arguments", "retry", "execution", "timeout", "unknown_tool", "denied", "unreadable_result"
]
"""Why a result is an error: invalid arguments, `ModelRetry`, an exception, a timeout, an
unknown tool name, a call refused (by a person, a `CallRule`, a guardrail or a `before_tool_call`
hook) or a result a guardrail withheld, or a tool that ran but whose
return value could not be turned into the text the model reads (its effects took place: the
model is told not to call it again for its result)."""


@dataclass(slots=True)
class ToolExecutionResult:
    """The outcome of one tool call: text for the model plus the raw value beside it.

    Treat it as immutable (use `dataclasses.replace`); it is a plain slotted dataclass because one
    is built on every tool call, and a frozen or validated model costs several times more.
    """

    text: str
    """What the model reads: at most the result budget's characters (see `full_text`)."""
    value: Any = None
    """The tool's raw return value (`None` for errors, but for an `"unreadable_result"`: the tool
    ran, and what it returned is kept for the program)."""
    is_error: bool = False
    error_kind: ErrorKind | None = None
    repairs: tuple[str, ...] = ()
    """Envelope repairs applied to the arguments before validation (and dropped extra arguments)."""
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    """The exception behind an error result, for handlers and logs; never sent to the model."""

    @classmethod
    def error(
        cls,
        text: str,
        kind: ErrorKind,
        *,
        exception: BaseException | None = None,
        repairs: tuple[str, ...] = (),
    ) -> ToolExecutionResult:
        """An error result the model can read."""
        return cls(text, None, True, kind, repairs, exception)

    @property
    def full_text(self) -> str | None:
        """The whole text when `text` was cut to the result budget (`max_result_chars`), else
        `None`: the model reads `text`, the program may read this."""
        # A property here, a field on the results that were cut: every result is built per call,
        # and a seventh field would cost each of them.
        return None

    @property
    def content(self) -> tuple[Content, ...]:
        """The result's parts in order (within the budget) when it has content beyond text
        (images, documents, audio, files); empty for a result of text alone."""
        return ()

    @property
    def content_notes(self) -> tuple[str, ...]:
        """One note per part left out of `content`, saying what and why (the same text stands in
        the part's place): a link its tool may not forward, a part over the result's byte or
        part cap, a part the model cannot take. Empty when nothing was left out."""
        return ()

    @property
    def cached(self) -> bool:
        """Whether the result was served from its tool's result cache (`@tool(cache=...)`): the
        body did not run for this call."""
        return False


@dataclass(frozen=True, slots=True)
class CallDecision:
    """Whether a call might run, and which rule said so (`ToolExecution.decision`)."""

    outcome: Literal["allowed", "asked", "refused"]
    """`"allowed"`: it ran (or its answer was given); `"asked"`: it waits for a person or an
    external result; `"refused"`: it did not run, the model reads why."""
    rule: str
    """What decided, in the documented order: `"selection"` (a tool the run does not offer),
    `"approval"` (a person's decision), `"external"`, `"rule:NAME"` (a `CallRule`),
    `"requires_approval"` (the tool's own policy, MCP trust tiers included),
    `"guardrail:NAME"` (a call guardrail), `"before_tool_call"`, or `"default"`."""
    reason: str | None = None
    """Why, when the rule said (a refusal's reason, a rule's own words)."""


ALLOWED = CallDecision("allowed", "default")
"""The decision on a call that nothing held, refused or answered."""


@dataclass(frozen=True, slots=True)
class GuardrailOutcome:
    """A guardrail that acted on a call or its result (`ToolExecution.guardrails`)."""

    guardrail: str
    """The guardrail's name."""
    point: Literal["call", "result"]
    action: Literal["blocked", "redacted"]
    reason: str


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One tool call and its outcome, with wall-clock timestamps."""

    call: ToolCall
    result: ToolExecutionResult
    started_at: datetime
    finished_at: datetime
    decision: CallDecision = ALLOWED
    """The one decision on whether the call might run (see `CallDecision`)."""
    guardrails: tuple[GuardrailOutcome, ...] = ()
    """The guardrails that blocked the call or blocked or redacted its result, in order."""

    @property
    def duration(self) -> timedelta:
        """How long the call took."""
        return self.finished_at - self.started_at

    @property
    def failed(self) -> bool:
        """Whether the result is an error the model was told about."""
        return self.result.is_error

    @property
    def repairs(self) -> tuple[str, ...]:
        """Envelope repairs applied to the arguments before validation."""
        return self.result.repairs

    @property
    def cached(self) -> bool:
        """Whether the call was answered from its tool's result cache: the body did not run."""
        return self.result.cached

    @property
    def pending(self) -> PendingCall | None:
        """The call's wait, when it did not run but waits for approval or an external result
        (as `after_tool_call` hooks and `ToolResultEvent`s see it); `None` for a call that ran."""
        return getattr(self.result, "pending", None)


_CALL, _RESULT, _STARTED, _FINISHED, _DECISION, _GUARDRAILS = (
    getattr(ToolExecution, name).__set__
    for name in ("call", "result", "started_at", "finished_at", "decision", "guardrails")
)


def new_execution(
    call: ToolCall, result: ToolExecutionResult, started_at: datetime, finished_at: datetime
) -> ToolExecution:
    """`ToolExecution(call, result, started_at, finished_at)`, as the loop builds one per call,
    each slot set directly (see `tools._base.run_context`)."""
    execution = object.__new__(ToolExecution)
    _CALL(execution, call)
    _RESULT(execution, result)
    _STARTED(execution, started_at)
    _FINISHED(execution, finished_at)
    _DECISION(execution, ALLOWED)
    _GUARDRAILS(execution, ())
    return execution


PendingReason = Literal["approval", "external", "elicitation"]
"""Why a call waits: a person's decision, the result of a tool executed outside the loop, or the
user's answer to a question the tool asked (MCP elicitation)."""


@dataclass(frozen=True, slots=True)
class Approved:
    """An approval: of the call as shown (`PendingCall.approve()` makes one that carries its
    digest), or with other arguments (validated again before the call runs)."""

    arguments: Mapping[str, Any] | None = None
    """The arguments to run the call with; `None` keeps the model's."""
    digest: str | None = None
    """The digest of the call the approver was shown (`PendingCall.digest`): the call runs only
    if it is still that call. `None` checks only the digest the history recorded."""


@dataclass(frozen=True, slots=True)
class ToolFailed:
    """The failure of an external tool, reported as an error result the model reads."""

    message: str
    """What the model reads."""


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A question a tool asked the user during a call (an MCP server's `elicitation/create`):
    a form to fill in (`schema`), or a page to go through (`url`)."""

    message: str
    """What to show the user."""
    schema: Mapping[str, Any]
    """The JSON Schema of the answer: an object of string, number, integer, boolean and enum
    properties (the MCP specification's requested schema)."""
    key: str | None = None
    """The server's name for the question when it asked it in a result (the stateless MCP
    revision, 2026-07-28): the answer then goes back with the call sent again, so any process
    can give it. `None` for a question asked mid-call, which only this process can answer."""
    state: str | None = None
    """The server's opaque state to send back with the answer (with `key`)."""
    url: str | None = None
    """A URL-mode question's page (an `http`/`https` URL): show it to the user, who completes
    the question there, out of band; `schema` is then empty and the answer carries no content
    (`"accept"`: the user opened it and went through it). `None` for a form question."""
    elicitation_id: str | None = None
    """The server's id of a URL-mode question."""

    def answer(
        self,
        content: Mapping[str, Any] | None = None,
        action: Literal["accept", "decline", "cancel"] = "accept",
    ) -> ElicitationAnswer:
        """The reply to this question, carrying it: what resumes the call in another process
        (after a restart, or in a durable run) when the question is `key`ed."""
        return ElicitationAnswer(content, action, question=self)


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """The user's reply to an `Elicitation`, given as the call's decision in `approvals=`:
    `content` that the question's schema accepts (`action="accept"`), or a refusal
    (`"decline"`: the user said no; `"cancel"`: the user dismissed the question)."""

    content: Mapping[str, Any] | None = None
    action: Literal["accept", "decline", "cancel"] = "accept"
    question: Elicitation | None = None
    """The question answered (`Elicitation.answer` sets it). Only needed to resume a `key`ed
    question in a process that did not ask it; the process that did remembers it. An answer to
    another question than the one its call paused on is refused."""
    digest: str | None = None
    """The digest of the paused call the user was shown (`PendingCall.answer` sets it): the
    answer goes to the call only if it is still that call."""


Approval = bool | str | Approved | ElicitationAnswer
"""A decision on a pending call: `True` runs it, `False` denies it, a string denies it with that
reason (shown to the model), `Approved(arguments=...)` runs it with other arguments, an
`ElicitationAnswer` answers the question it paused on."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call the run paused on."""

    call: ToolCall
    """The call as the model made it (its arguments are valid)."""
    reason: PendingReason
    """`"approval"`: answer it in `approvals=`; `"external"`: in `external_results=`;
    `"elicitation"`: an `ElicitationAnswer` in `approvals=`."""
    elicitation: Elicitation | None = None
    """The question, for `"elicitation"`."""
    digest: str | None = None
    """A digest of the call as shown here (why it waits, its conversation, id, tool, arguments
    and question), also recorded in the history: a decision made with `approve()` or `answer()`
    carries it, and runs the call only if it is still this one."""
    path: tuple[str, ...] = ()
    """For a call inside a sub-run (`ToolService.as_tool`): the tools whose calls started it,
    outermost first, as `SubRunEvent.path`; empty for the run's own call."""
    call_ids: tuple[str, ...] = ()
    """The ids of the calls of `path`, in the same order (the first is the run's own call)."""

    @property
    def key(self) -> str:
        """What to decide it by in `approvals=` / `external_results=`: its call's id, prefixed
        with `call_ids` for a call inside a sub-run (`"call_1/call_7"`)."""
        return "/".join((*self.call_ids, self.call.id)) if self.call_ids else self.call.id

    def inside(self, name: str, call_id: str) -> PendingCall:
        """This call, waiting inside the sub-run that the call `call_id` of tool `name` started."""
        return dataclasses.replace(
            self, path=(name, *self.path), call_ids=(call_id, *self.call_ids)
        )

    def approve(self, arguments: Mapping[str, Any] | None = None) -> Approved:
        """The approval of this call as shown (or with other `arguments`), carrying its digest.

        Raises:
            ValueError: The call waits for something else than an approval.
        """
        if self.reason != "approval":
            raise ValueError(f"{named_call(self.call)} waits for {WAITS_FOR[self.reason]}")
        return Approved(arguments, self.digest)

    def answer(
        self,
        content: Mapping[str, Any] | None = None,
        action: Literal["accept", "decline", "cancel"] = "accept",
    ) -> ElicitationAnswer:
        """The user's reply to this call's question, carrying the question and the digest.

        Raises:
            ValueError: The call waits for something else than an answer.
        """
        if self.reason != "elicitation":
            raise ValueError(f"{named_call(self.call)} waits for {WAITS_FOR[self.reason]}")
        return ElicitationAnswer(content, action, self.elicitation, self.digest)


WAITS_FOR: dict[PendingReason, str] = {
    "approval": "approval",
    "external": "an external result",
    "elicitation": "the answer to its question",
}


def named_call(call: ToolCall) -> str:
    return f"call {shown_name(call.id)!r} ({shown_name(call.name)})"


@dataclass(slots=True)
class PendingResult(ToolExecutionResult):
    """The placeholder result of a call that waits: hooks and stream events see it; the
    conversation never does."""

    pending: PendingCall | None = None
    sub_run: SubRunPause | None = None
    """For the call of a sub-run's tool (`ToolService.as_tool`): what the sub-run waits on."""


@dataclass(frozen=True, slots=True)
class SubRunPause:
    """A sub-run that paused: the calls it waits on, and its history when its service keeps none."""

    pending: tuple[PendingCall, ...]
    """The sub-run's own pending calls (their `key`s are the sub-run's)."""
    messages: tuple[ChatMessage, ...] | None
    """The sub-run's history at the pause; `None` when its service's store keeps it."""
    digest: str | None = None
    """The digest of the sub-run's call as it paused, set by the run that made the call."""


@dataclass(frozen=True, slots=True)
class SubRunResume:
    """What resumes a paused sub-run, handed to its call (`ToolContext.answer`): its history when
    the parent's record carries it, and the decisions on its own calls (keyed as in the sub-run)."""

    messages: tuple[ChatMessage, ...] | None
    approvals: dict[str, Approval]
    external_results: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)
    """External calls that failed, with what the model reads (`ToolFailed`, apart: a durable
    run's payload would read one back as a plain value)."""


def pending_calls(messages: Sequence[ChatMessage]) -> list[ToolCall]:
    """The calls a stored history waits on: those of its last `AiMessage` without a result (when
    only results follow it), in the model's order. These are the ids `approvals=` and
    `external_results=` may name when the run resumes."""
    return _unanswered(messages)[1]


def unanswered_calls(messages: Sequence[ChatMessage]) -> tuple[AiMessage | None, list[ToolCall]]:
    """The `AiMessage` a stored history waits on (`None` when it waits on nothing) and its calls
    without a result, as `pending_calls` gives them."""
    return _unanswered(messages)


def _unanswered(messages: Sequence[ChatMessage]) -> tuple[AiMessage | None, list[ToolCall]]:
    # By role rather than `isinstance`, which costs several times more on pydantic models.
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role == "tool":
            continue
        if message.role == "assistant" and message.tool_calls:
            answered = {m.tool_call_id for m in messages[position + 1 :]}  # type: ignore[union-attr]
            calls = [call for call in message.tool_calls if call.id not in answered]
            return (message if calls else None), calls
        break
    return None, []
