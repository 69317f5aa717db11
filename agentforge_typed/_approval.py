"""Human approval and external tools: a run pauses on calls that wait for a decision and resumes
from its history.

Nothing but the messages is stored between the pause and the resume: the calls awaiting a
decision are the calls of the history's last `AiMessage` that have no `ToolResultMessage` yet.
`ToolService` consults an `ApprovalState` at a few points of its loop (planning a call, finishing
a round, building the result); the rules live here.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core

from ._messages import AiMessage, ChatMessage, ToolCall
from ._response import ChatResponse, FinishReason
from .tools._base import ApprovalPolicy, ToolContext, ToolExecutionResult, ToolLike
from .tools._invoke import invoke, is_async_callable
from .tools._outcomes import reraise_uncontained, success_result

if TYPE_CHECKING:
    from ._results import ToolExecution

__all__ = [
    "Approval",
    "ApprovalPolicy",
    "ApprovalState",
    "Approved",
    "Decided",
    "Elicitation",
    "ElicitationAnswer",
    "PendingCall",
    "PendingReason",
    "ToolFailed",
    "may_wait",
    "pending_calls",
    "unanswered_calls",
]

logger = logging.getLogger("agentforge_typed")

PendingReason = Literal["approval", "external", "elicitation"]
"""Why a call waits: a person's decision, the result of a tool executed outside the loop, or the
user's answer to a question the tool asked (MCP elicitation)."""


@dataclass(frozen=True, slots=True)
class Approved:
    """An approval that replaces the model's arguments (validated again before the call runs)."""

    arguments: Mapping[str, Any] | None = None
    """The arguments to run the call with; `None` keeps the model's."""


@dataclass(frozen=True, slots=True)
class ToolFailed:
    """The failure of an external tool, reported as an error result the model reads."""

    message: str
    """What the model reads."""


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A question a tool asked the user during a call (an MCP server's `elicitation/create`)."""

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
    question in a process that did not ask it; the process that did remembers it."""


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


@dataclass(frozen=True, slots=True)
class Decided:
    """The caller's decision on one unanswered call, as the run applies it."""

    call: ToolCall
    """The call to run (with the arguments of an `Approved` override)."""
    result: ToolExecutionResult | None = None
    """The result decided for it (a denial, an external result), or `None` to run it."""
    approved: bool = False
    """Whether a person approved it: it runs without being held again."""
    answer: ElicitationAnswer | None = None
    """The user's answer to the question the call paused on, handed to the tool."""


@dataclass(slots=True)
class PendingResult(ToolExecutionResult):
    """The placeholder result of a call that waits: hooks and stream events see it; the
    conversation never does."""

    pending: PendingCall | None = None


_DEFERRED = PendingResult("Awaiting the approval policy.")
"""The placeholder of a call whose async `requires_approval` is awaited when the call settles."""


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


def _policy(tool: ToolLike) -> ApprovalPolicy:
    return getattr(tool, "requires_approval", False)


def _is_external(tool: ToolLike) -> bool:
    return bool(getattr(tool, "external", False))


def may_wait(tool: ToolLike) -> bool:
    """Whether calls of `tool` may wait (it has an approval policy or is external); read from
    the tool on every call, as a policy may change after registration (an MCP server's)."""
    return _policy(tool) is not False or _is_external(tool)


def _valid(tool: ToolLike, call: ToolCall) -> bool:
    """Whether the call's arguments validate (a tool kind without a validator counts as valid).

    Arguments whose validation raised anything else (a `KeyError` in a `field_validator`) are not
    valid either: the call runs, and its execution reports the failure as it would for a tool
    without approval.
    """
    validate = getattr(tool, "validate_arguments", None)
    if validate is None:
        return True
    try:
        validate(call.arguments)
    except BaseException as exc:
        reraise_uncontained(exc)
        return False
    return True


def _decided(answer: object) -> bool:
    if not isinstance(answer, bool):
        raise TypeError(f"requires_approval returned {type(answer).__name__}, not bool")
    return answer


def _waiting(call: ToolCall, reason: PendingReason) -> PendingResult:
    text = "Awaiting approval." if reason == "approval" else "Awaiting an external result."
    return PendingResult(text, pending=PendingCall(call, reason))


class ApprovalState:
    """What one run knows about approvals: the decisions it was given, and the calls it paused on.

    Args:
        approvals: Decisions on pending calls, by call id.
        external_results: Results of external calls, by call id (a value, or `ToolFailed`).
        asynchronous: Whether the run is async (`achat`/`astream`): an async `requires_approval`
            is then awaited in `ahold` rather than run on a private event loop in `hold`.
    """

    def __init__(
        self,
        approvals: Mapping[str, Approval] | None,
        external_results: Mapping[str, Any] | None,
        *,
        asynchronous: bool,
    ) -> None:
        self.approvals = dict(approvals or {})
        self.external_results = dict(external_results or {})
        both = self.approvals.keys() & self.external_results.keys()
        if both:
            named = ", ".join(sorted(map(repr, both)))
            raise ValueError(f"calls {named} have both an approval and an external result")
        self.asynchronous = asynchronous
        self.pending: list[PendingCall] = []
        self.paused_on: AiMessage | None = None
        """The `AiMessage` whose calls the run resumed or paused on."""

    # -- resuming ------------------------------------------------------------------------------

    def unanswered(self, messages: Sequence[ChatMessage]) -> list[ToolCall]:
        """The calls awaiting a decision at the end of `messages`; raises `ValueError` for a
        decision on any other call."""
        self.paused_on, calls = _unanswered(messages)
        if not self.approvals and not self.external_results:
            return calls
        ids = Counter(call.id for call in calls)
        decided = self.approvals.keys() | self.external_results.keys()
        # `repr` before sorting: a caller's keys need not even be strings.
        unknown = sorted(map(repr, decided - ids.keys()))
        if unknown:
            raise ValueError(
                f"no pending call has the id(s) {', '.join(unknown)}; pending: "
                f"{', '.join(sorted(map(repr, ids))) or 'none'}"
            )
        # The loop gives every call it admits an id of its own; a history written elsewhere may
        # still end with two calls of one id, and one decision must never settle both.
        shared = sorted(repr(call_id) for call_id in decided if ids[call_id] > 1)
        if shared:
            raise ValueError(
                f"several pending calls have the id(s) {', '.join(shared)}: a decision cannot "
                "tell them apart"
            )
        return calls

    def decide(
        self, call: ToolCall, tool: ToolLike | None, conversation_id: str | None = None
    ) -> Decided:
        """Apply the caller's decision to an unanswered call (of `conversation_id`: an answer is
        checked against the question that conversation's call paused on).

        Returns:
            The call to run (its arguments replaced by an `Approved` override), the result decided
            for it (a denial, an external result) or `None` to run it, and whether a person
            approved it (then it runs without being held again: this call, in this round, only).

        Raises:
            ValueError: An approval for an external call, or an external result for a call that
                is not external.
            ToolArgumentsError: `Approved.arguments` that the tool does not accept.
        """
        external = tool is not None and _is_external(tool)
        if call.id in self.external_results:
            if not external:
                raise ValueError(f"call {call.id!r} ({call.name}) is not an external tool's call")
            value = self.external_results[call.id]
            if isinstance(value, ToolFailed):
                return Decided(call, ToolExecutionResult.error(value.message, "execution"))
            # As a tool's return value: content parts (a screenshot taken elsewhere) included.
            return Decided(call, success_result(value))
        if call.id not in self.approvals:
            return Decided(call)
        if external:
            raise ValueError(
                f"call {call.id!r} ({call.name}) is external: give its result in external_results"
            )
        decision = self.approvals[call.id]
        if isinstance(decision, ElicitationAnswer):
            check = getattr(tool, "check_answer", None)
            if check is None:
                raise ValueError(f"call {call.id!r} ({call.name}) asked no question to answer")
            # A person's mistake is theirs to fix, not the model's.
            check(call, decision, conversation_id)
            return Decided(call, approved=True, answer=decision)
        if isinstance(decision, Approved):
            if decision.arguments is not None:
                arguments = pydantic_core.to_json(dict(decision.arguments)).decode()
                call = call.model_copy(update={"arguments": arguments})
                validate = getattr(tool, "validate_arguments", None)
                if validate is not None:
                    validate(call.arguments)  # a person's mistake is theirs to fix, not the model's
            return Decided(call, approved=True)
        if decision is True:
            return Decided(call, approved=True)
        if decision is False or isinstance(decision, str):
            reason = f": {decision}" if isinstance(decision, str) else "."
            text = f"The user denied the call to `{call.name}`{reason}"
            return Decided(call, ToolExecutionResult.error(text, "denied"))
        raise TypeError(
            f"approval for {call.id!r} must be True, False, a reason, Approved(...) or "
            f"ElicitationAnswer(...), not {type(decision).__name__}"
        )

    # -- holding -------------------------------------------------------------------------------

    def hold(
        self, call: ToolCall, context: ToolContext[Any], tool: ToolLike
    ) -> PendingResult | None:
        """The placeholder for a call that must wait, or `None` to run it now. An invalid call is
        never held: it goes back to the model as an arguments error. Under an async run, an async
        `requires_approval` gives a placeholder that `deferred` recognises, for `ahold`."""
        if not may_wait(tool):
            return None
        policy = _policy(tool)
        if not _valid(tool, call):
            return None
        if _is_external(tool):
            return _waiting(call, "external")
        if policy is True:
            return _waiting(call, "approval")
        if not callable(policy):
            raise TypeError(f"requires_approval must be a bool or a callable, not {policy!r}")
        if self.asynchronous and is_async_callable(policy):
            return _DEFERRED
        return _waiting(call, "approval") if _decided(invoke(policy, (call, context))) else None

    @staticmethod
    def deferred(result: ToolExecutionResult | None) -> bool:
        """Whether `result` is the placeholder of a call whose async policy is still to decide."""
        return result is _DEFERRED

    async def ahold(
        self, call: ToolCall, context: ToolContext[Any], tool: ToolLike
    ) -> PendingResult | None:
        """Await the async `requires_approval` of a `deferred` call: the placeholder of a call
        that must wait, or `None` when the policy lets this call run (it is planned again, not
        held: the policy's answer covers it alone)."""
        answer = await _policy(tool)(call, context)  # type: ignore[operator,misc]
        return _waiting(call, "approval") if _decided(answer) else None

    # -- pausing -------------------------------------------------------------------------------

    def set_aside(self, settled: Sequence[ToolExecution]) -> list[ToolExecution]:
        """The executions of a round that ran; the others are recorded as pending."""
        ran: list[ToolExecution] = []
        for execution in settled:
            result = execution.result
            if isinstance(result, PendingResult) and result.pending is not None:
                self.pending.append(result.pending)
            else:
                ran.append(execution)
        return ran

    def final_response(self) -> ChatResponse:
        """The response a run reports when it made no model call (it resumed and paused or ended
        again): the tool-calling message it resumed."""
        assert self.paused_on is not None
        if self.pending:
            # Easy to miss: `result.text` is `None`, and nothing else changed.
            logger.warning(
                "the run paused again without calling the model: %d call(s) still wait for a "
                "decision (%s); pass approvals= or external_results= for them",
                len(self.pending),
                ", ".join(repr(p.call.id) for p in self.pending),
            )
        return ChatResponse(ai_message=self.paused_on, finish_reason=FinishReason.TOOL_EXECUTION)


async def no_events() -> AsyncIterator[Any]:
    """An empty async stream: the model round a resumed run skips."""
    return
    yield  # pragma: no cover - makes this an async generator
