"""Human approval and external tools: a run pauses on calls that wait for a decision and resumes
from its history.

Nothing but the messages is stored between the pause and the resume: the calls awaiting a
decision are the calls of the history's last `AiMessage` that have no `ToolResultMessage` yet.
`ToolService` consults an `ApprovalState` at a few points of its loop (planning a call, finishing
a round, building the result); the rules live here.

When a run pauses, its message records what each waiting call waits for and a digest of the call
as shown (`PAUSED_CALLS`); the resume checks both before anything runs: a decision of another
kind than the call waits for, one made for another call (its carried digest), or a call changed
since the pause is refused. A history from before that record keeps the older rules: the reason
is inferred from the tool and the decision.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from .._identity import CONVERSATION_ID, PAUSED_CALLS, CallDigests
from .._messages import AiMessage, ChatMessage, ToolCall, history_adapter, shown_name
from .._records import (
    WAITS_FOR,
    Approval,
    Approved,
    Elicitation,
    ElicitationAnswer,
    PendingCall,
    PendingReason,
    PendingResult,
    SubRunResume,
    ToolExecution,
    ToolExecutionResult,
    ToolFailed,
    named_call,
    unanswered_calls,
)
from .._response import ChatResponse, FinishReason
from ..tools._base import ToolContext, ToolLike, approval_policy, is_external, may_wait
from ..tools._invoke import invoke, is_async_callable
from ..tools._outcomes import UnreadableValue, failure_result, reraise_uncontained, success_result

__all__ = [
    "ApprovalState",
    "Decided",
    "PausedCall",
    "SUB_RUN",
    "paused_record",
    "waiting_keys",
    "with_digest",
]

logger = logging.getLogger("agentforge_typed")


SUB_RUN: Literal["sub_run"] = "sub_run"
"""The recorded reason of a sub-run's call (`ToolService.as_tool`) that waits on calls inside
it: `result.pending` names those, each with its `key`."""


@dataclass(frozen=True, slots=True)
class PausedCall:
    """What a paused call waits for, as its message records it (`PAUSED_CALLS`)."""

    reason: PendingReason | Literal["sub_run"]
    digest: str
    """`PendingCall.digest` at the pause."""
    question: Elicitation | None = None
    """The question, for `"elicitation"`: the call is held on it again when left undecided."""
    arguments: str | None = None
    """The arguments the call paused with when they are not the message's (an approver's
    `Approved(arguments=...)` before the call asked a question)."""
    messages: list[ChatMessage] | None = None
    """For `"sub_run"`: the sub-run's history at the pause (`None`: its service's store keeps
    it). The digest covers it."""
    pending: list[PendingCall] | None = None
    """For `"sub_run"` when its store keeps the history: the calls it waits on (their keys the
    sub-run's), to check a decision against before anything runs."""


@functools.cache
def _adapters() -> tuple[TypeAdapter[PausedCall], TypeAdapter[dict[str, PausedCall]]]:
    """The record's adapters, built at the first pause: a validator built at import would load
    pydantic's plugin registry for every program."""
    return TypeAdapter(PausedCall), TypeAdapter(dict[str, PausedCall])


def covered(reason: str, messages: Sequence[ChatMessage] | None) -> Any:
    """What a paused call's digest covers beside the call: for a sub-run's, its carried history
    (a history held by the caller cannot change what the sub-run resumes from unnoticed)."""
    if reason != SUB_RUN or messages is None:
        return None
    return hashlib.sha256(history_adapter().dump_json(list(messages))).hexdigest()


_GIVEN: dict[PendingReason, str] = {
    "approval": "an approval",
    "external": "an external result",
    "elicitation": "an answer (ElicitationAnswer)",
}
_HOW: dict[PendingReason, str] = {
    "approval": "decide it in approvals= with True, False, a reason or Approved(...)",
    "external": "give its result in external_results=",
    "elicitation": "answer it in approvals= with an ElicitationAnswer",
}


@dataclass(frozen=True, slots=True)
class Decided:
    """The caller's decision on one unanswered call, as the run applies it."""

    call: ToolCall
    """The call to run (with the arguments of an `Approved` override)."""
    result: ToolExecutionResult | None = None
    """The result decided for it (a denial, an external result), or `None` to run it."""
    approved: bool = False
    """Whether a person approved it: it runs without being held again."""
    answer: ElicitationAnswer | SubRunResume | None = None
    """The user's answer to the question the call paused on, handed to the tool (for a sub-run's
    call, what resumes its sub-run)."""


_DEFERRED = PendingResult("Awaiting the approval policy.")
"""The placeholder of a call whose async `requires_approval` is awaited when the call settles."""


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
        self.paused: Mapping[str, PausedCall] = {}
        """What `paused_on` records of its calls (`PAUSED_CALLS`): empty for a history from
        before the record (the reason is then inferred from the tool and the decision)."""
        self.keyed = False
        """Whether the service keys its digests: every decision needs a recorded pause then."""
        self.routed: dict[Any, tuple[str, str]] = {}
        """The decisions on calls inside paused sub-runs: each key's sub-run call, and the key
        as the sub-run knows it."""
        self._inside: dict[str, set[str]] = {}
        """What each paused sub-run waits on (its keys), read once from its record."""
        self.sub_runs: dict[str, tuple[PendingResult, ToolCall]] = {}
        """The calls of this round whose sub-runs paused, by call id."""

    # -- resuming ------------------------------------------------------------------------------

    def unanswered(
        self, messages: Sequence[ChatMessage], conversation_id: str, digests: CallDigests
    ) -> list[ToolCall]:
        """The calls awaiting a decision at the end of `messages`, as they paused (the arguments
        an approver gave them, if any); raises `ValueError` for a decision on any other call, and
        for a paused call whose recorded digest does not match it (changed since the pause)."""
        self.paused_on, calls = unanswered_calls(messages)
        self.keyed = digests.keyed
        if self.paused_on is not None and PAUSED_CALLS in self.paused_on.attributes:
            self.paused = _recorded(self.paused_on)
            calls = [self._as_paused(call, conversation_id, digests) for call in calls]
        if not self.approvals and not self.external_results:
            return calls
        ids = Counter(call.id for call in calls)
        decided = self.approvals.keys() | self.external_results.keys()
        sub_runs = [c.id for c in calls if (p := self.paused.get(c.id)) and p.reason == SUB_RUN]
        for key in decided if sub_runs else ():
            self._route(key, sub_runs, key in ids)
        # `repr` before sorting: a caller's keys need not even be strings.
        unknown = sorted(map(repr, decided - ids.keys() - self.routed.keys()))
        if unknown:
            keys = waiting_keys(messages) if sub_runs else ids.keys()
            raise ValueError(
                f"no pending call has the id(s) {', '.join(unknown)}; pending: "
                f"{', '.join(sorted(map(repr, keys))) or 'none'}"
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

    def _route(self, key: Any, sub_runs: Sequence[str], own: bool) -> None:
        """Route a decision's `key` to the paused sub-run call whose id prefixes it; refuse a key
        that names more than one call (`own`: one of the run's own; ids may hold `/`, and
        nothing is guessed)."""
        if not isinstance(key, str):
            return
        owners = [c for c in sub_runs if key.startswith(c + "/") and len(key) > len(c) + 1]
        if len(owners) + own > 1:
            raise ValueError(
                f"the decision key {key!r} names a call in more than one place "
                f"({', '.join(map(repr, owners))}); nothing ran"
            )
        if not owners:
            return
        inner = key[len(owners[0]) + 1 :]
        # What the sub-run waits on, checked before anything runs: from the history the record
        # carries, or, when the sub-run's store keeps it, the keys recorded at the pause (the
        # sub-run checks its own decisions again as it resumes).
        if inner not in self._waiting_inside(owners[0]):
            return
        self.routed[key] = (owners[0], inner)

    def _waiting_inside(self, call_id: str) -> set[str]:
        """The keys of the calls the sub-run of the paused call `call_id` waits on (read once)."""
        waits = self._inside.get(call_id)
        if waits is None:
            waits = self._inside[call_id] = _inner_keys(self.paused[call_id])
        return waits

    def _as_paused(self, call: ToolCall, conversation_id: str, digests: CallDigests) -> ToolCall:
        """`call` as it paused, once its recorded digest is checked (`call` when none is)."""
        paused = self.paused.get(call.id)
        if paused is None:
            return call
        if paused.arguments is not None:
            call = call.model_copy(update={"arguments": paused.arguments})
        question = paused.question or covered(paused.reason, paused.messages)
        expected = digests.of(paused.reason, conversation_id, call, question)
        if CallDigests.same(expected, paused.digest):
            return call
        recorded_keyed = paused.digest.startswith("hmac-")
        if recorded_keyed and not digests.keyed:
            why = "its digest was made with a digest_secret, and this service has none"
        elif digests.keyed and not recorded_keyed:
            why = (
                "its digest was made without a digest_secret, and this service has one (a "
                "history kept elsewhere could have been changed)"
            )
        else:
            why = (
                "its tool, arguments, question or conversation are not the ones it paused with "
                "(or the digest was made with another digest_secret)"
            )
        raise ValueError(f"{named_call(call)} changed since it was shown: {why}; nothing ran")

    def decide(
        self, call: ToolCall, tool: ToolLike | None, conversation_id: str | None = None
    ) -> Decided:
        """Apply the caller's decision to an unanswered call (of `conversation_id`: an answer is
        checked against the question that conversation's call paused on).

        Returns:
            The call to run (its arguments replaced by an `Approved` override), the result decided
            for it (a denial, an external result, the question it is held on again) or `None` to
            run it, and whether a person approved it (then it runs without being held again: this
            call, in this round, only).

        Raises:
            ValueError: A decision of another kind than the call waits for (an approval for an
                external call or one that waits on a question, an answer for a call held for
                approval, ...), or made for another call (its digest).
            ToolArgumentsError: `Approved.arguments` that the tool does not accept.
        """
        paused = self.paused.get(call.id)
        if paused is not None and paused.reason == SUB_RUN:
            return self._resume_sub_run(call, paused, tool, conversation_id)
        kind = self._kind(call.id)
        if paused is not None:
            if kind is None:
                return _held_again(call, paused)
            self._check(call, paused, kind)
        elif kind is not None:
            self._check_unrecorded(call)
        external = tool is not None and is_external(tool)
        if kind == "external":
            if not external:
                raise ValueError(f"{named_call(call)} is not an external tool's call")
            value = self.external_results[call.id]
            if isinstance(value, ToolFailed):
                return Decided(call, ToolExecutionResult.error(value.message, "execution"))
            # As a tool's return value: content parts (a screenshot taken elsewhere) included;
            # their links are checked when the round runs, where names can be resolved off the
            # event loop (`_drivers.execute`).
            try:
                return Decided(call, success_result(value, urls="any"))
            except UnreadableValue as unreadable:  # it ran elsewhere: its result is unreadable
                return Decided(call, failure_result(call.name, unreadable))
        if kind is None:
            return Decided(call)
        if external:
            raise ValueError(f"{named_call(call)} is external: give its result in external_results")
        decision = self.approvals[call.id]
        if isinstance(decision, ElicitationAnswer):
            check = getattr(tool, "check_answer", None)
            if check is None:
                raise ValueError(f"{named_call(call)} asked no question to answer")
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
        reason = f": {decision}" if isinstance(decision, str) else "."
        text = f"The user denied the call to `{shown_name(call.name)}`{reason}"
        return Decided(call, ToolExecutionResult.error(text, "denied"))

    def _resume_sub_run(
        self,
        call: ToolCall,
        paused: PausedCall,
        tool: ToolLike | None,
        conversation_id: str | None,
    ) -> Decided:
        """A sub-run's call, run again to resume its sub-run with the decisions on its calls
        (none: its calls are held again, and the run pauses on them again). The decisions are
        checked here, as the sub-run will check them, before anything of the run runs."""
        check = getattr(tool, "check_resume", None)
        if check is None:
            raise ValueError(
                f"{named_call(call)} is recorded as waiting on a sub-run, and its tool is not "
                "one (ToolService.as_tool); nothing ran"
            )
        if call.id in self.approvals or call.id in self.external_results:
            raise ValueError(
                f"{named_call(call)} waits on calls inside its sub-run: decide those, by the keys "
                "result.pending gives them; nothing ran"
            )
        approvals: dict[str, Approval] = {}
        external: dict[str, Any] = {}
        for key, (owner, inner) in self.routed.items():
            if owner == call.id:
                if key in self.approvals:
                    approvals[inner] = self.approvals[key]
                else:
                    external[inner] = self.external_results[key]
        check(call, conversation_id, paused, approvals, external)
        messages = None if paused.messages is None else tuple(paused.messages)
        failed = {k: v.message for k, v in external.items() if isinstance(v, ToolFailed)}
        results = {k: v for k, v in external.items() if k not in failed}
        resume = SubRunResume(messages, approvals, results, failed)
        return Decided(call, approved=True, answer=resume)

    def check_recorded(self, waits: Sequence[PendingCall]) -> None:
        """Refuse a decision that does not answer what a recorded call waits for, or that carries
        the digest of another call (a sub-run kept by its store: its recorded calls)."""
        recorded = {p.key: p for p in waits}
        for key in (*self.approvals, *self.external_results):
            pending = recorded.get(key)
            if pending is None:
                raise ValueError(f"no pending call has the id {key!r}; nothing ran")
            kind = self._kind(key)
            assert kind is not None  # `key` is decided
            self._refuse_other(pending.call, key, pending.reason, pending.digest or "", kind)

    def _kind(self, key: str) -> PendingReason | None:
        """The kind of the decision keyed `key` (a call's id): what it answers (`None`: no
        decision)."""
        if key in self.external_results:
            return "external"
        if key not in self.approvals:
            return None
        decision = self.approvals[key]
        if isinstance(decision, ElicitationAnswer):
            return "elicitation"
        if isinstance(decision, bool | str | Approved):
            return "approval"
        raise TypeError(
            f"approval for {key!r} must be True, False, a reason, Approved(...) or "
            f"ElicitationAnswer(...), not {type(decision).__name__}"
        )

    def _check(self, call: ToolCall, paused: PausedCall, kind: PendingReason) -> None:
        """Refuse a decision that does not answer what the recorded call waits for, or that was
        made for another call or question."""
        assert paused.reason != SUB_RUN  # resumed apart (`_resume_sub_run`)
        self._refuse_other(call, call.id, paused.reason, paused.digest, kind)
        decision = self.approvals.get(call.id)
        if (
            isinstance(decision, ElicitationAnswer)
            and decision.question is not None
            and paused.question is not None
            and decision.question != paused.question
        ):
            raise ValueError(
                f"the answer for {named_call(call)} answers another question than the one the call "
                f"waits on ({paused.question.message!r}); nothing was sent"
            )

    def _refuse_other(
        self, call: ToolCall, key: str, reason: PendingReason, digest: str, kind: PendingReason
    ) -> None:
        """Refuse the decision keyed `key` on `call`, recorded as waiting for `reason` with
        `digest`, when it is of another kind or carries another call's digest."""
        if kind != reason:
            raise ValueError(
                f"{named_call(call)} waits for {WAITS_FOR[reason]}, not {_GIVEN[kind]}: "
                f"{_HOW[reason]}; nothing was sent"
            )
        decision = self.approvals.get(key)
        carried = decision.digest if isinstance(decision, Approved | ElicitationAnswer) else None
        if carried is not None and not CallDigests.same(carried, digest):
            raise ValueError(
                f"{named_call(call)} is not the call the decision was made for: it changed since it "
                "was shown (its digest differs); nothing was sent"
            )

    def _check_unrecorded(self, call: ToolCall) -> None:
        """Refuse a decision on a call whose pause is not recorded when it must be: under a
        digest secret, or when the decision carries a digest to check."""
        decision = self.approvals.get(call.id)
        carried = decision.digest if isinstance(decision, Approved | ElicitationAnswer) else None
        if self.keyed or carried is not None:
            raise ValueError(
                f"{named_call(call)} has no recorded pause to check the decision against (a history "
                "from before pauses were recorded, or one whose record was removed); nothing "
                "was sent"
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
        policy = approval_policy(tool)
        if not _valid(tool, call):
            return None
        if is_external(tool):
            return _waiting(call, "external")
        if policy is True:
            return _waiting(call, "approval")
        if not callable(policy):
            raise TypeError(f"requires_approval must be a bool or a callable, not {policy!r}")
        if self.asynchronous and is_async_callable(policy):
            return _DEFERRED
        return _waiting(call, "approval") if _decided(invoke(policy, (call, context))) else None

    def ask(self, call: ToolCall, tool: ToolLike) -> PendingResult | None:
        """The placeholder for a call a `CallRule` holds for approval (`None` for an invalid
        call: it goes back to the model as an arguments error)."""
        return _waiting(call, "approval") if _valid(tool, call) else None

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
        answer = await approval_policy(tool)(call, context)  # type: ignore[operator,misc]
        return _waiting(call, "approval") if _decided(answer) else None

    # -- pausing -------------------------------------------------------------------------------

    def set_aside(self, settled: Sequence[ToolExecution]) -> list[ToolExecution]:
        """The executions of a round that ran; the others are recorded as pending."""
        ran: list[ToolExecution] = []
        for execution in settled:
            result = execution.result
            if isinstance(result, PendingResult) and result.pending is not None:
                self.pending.append(result.pending)
            elif isinstance(result, PendingResult) and result.sub_run is not None:
                call = execution.call
                self.pending += [p.inside(call.name, call.id) for p in result.sub_run.pending]
                self.sub_runs[call.id] = (result, call)
            else:
                ran.append(execution)
        return ran

    def recorded(self, message: AiMessage, conversation_id: str) -> AiMessage:
        """`message`, the one the round paused on, recording the run's conversation id and what
        each waiting call waits for (`PAUSED_CALLS`); once none waits, without that record."""
        attributes = message.attributes
        if self.pending:
            arguments = {call.id: call.arguments for call in message.tool_calls}
            record = {
                p.call.id: _record(p, arguments.get(p.call.id))
                for p in self.pending
                if not p.call_ids
            }
            for call_id, (result, call) in self.sub_runs.items():
                record[call_id] = _sub_run_record(result, call, arguments.get(call_id))
            attributes = {**attributes, CONVERSATION_ID: conversation_id, PAUSED_CALLS: record}
        elif PAUSED_CALLS in attributes:
            attributes = {k: v for k, v in attributes.items() if k != PAUSED_CALLS}
        else:
            return message
        recorded = message.model_copy(update={"attributes": attributes})
        if self.paused_on is message:
            self.paused_on = recorded
        return recorded

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
                ", ".join(repr(p.key) for p in self.pending),
            )
        return ChatResponse(ai_message=self.paused_on, finish_reason=FinishReason.TOOL_EXECUTION)


def with_digest(
    result: PendingResult, conversation_id: str, digests: CallDigests, call: ToolCall
) -> PendingResult:
    """`result`, its pending call carrying the digest of what it shows (`PendingCall.digest`);
    a sub-run's (`call`'s), the digest of the call and the history it carries."""
    pending = result.pending
    if pending is None:
        paused = result.sub_run
        if paused is None:
            return result
        question = covered(SUB_RUN, paused.messages)
        digest = digests.of(SUB_RUN, conversation_id, call, question)
        return dataclasses.replace(result, sub_run=dataclasses.replace(paused, digest=digest))
    digest = digests.of(pending.reason, conversation_id, pending.call, pending.elicitation)
    if pending.digest == digest:
        return result
    return dataclasses.replace(result, pending=dataclasses.replace(pending, digest=digest))


def _record(pending: PendingCall, arguments: str | None) -> dict[str, Any]:
    """The record of one paused call, in its JSON form."""
    assert pending.digest is not None  # set when the call settled (`with_digest`)
    own = None if pending.call.arguments == arguments else pending.call.arguments
    paused = PausedCall(pending.reason, pending.digest, pending.elicitation, own)
    recorded: dict[str, Any] = _adapters()[0].dump_python(paused, mode="json", exclude_none=True)
    return recorded


MAX_SUB_RUN_RECORDS = 8
"""How deep a history's records of paused sub-runs are read (the loop's own bound is lower:
`as_tool`'s `max_depth`); a deeper one is refused."""


def waiting_keys(messages: Sequence[ChatMessage], depth: int = 0) -> set[str]:
    """The keys of the calls `messages` waits on (`PendingCall.key`): its unanswered calls', and
    for a sub-run's call, the calls inside it."""
    if depth > MAX_SUB_RUN_RECORDS:
        raise ValueError(
            f"the history's records nest paused sub-runs over {MAX_SUB_RUN_RECORDS} deep; "
            "nothing ran"
        )
    message, calls = unanswered_calls(messages)
    record = paused_record(message)
    keys: set[str] = set()
    for call in calls:
        paused = record.get(call.id)
        if paused is not None and paused.reason == SUB_RUN:
            keys.update(f"{call.id}/{key}" for key in _inner_keys(paused, depth + 1))
        else:
            keys.add(call.id)
    return keys


def _inner_keys(paused: PausedCall, depth: int = 1) -> set[str]:
    """The keys of the calls a paused sub-run waits on: from the history its record carries,
    or the calls recorded when its store keeps the history."""
    if paused.messages is None:
        return {p.key for p in paused.pending or ()}
    return waiting_keys(paused.messages, depth)


def _sub_run_record(result: PendingResult, call: ToolCall, arguments: str | None) -> dict[str, Any]:
    """The record of a sub-run's call that waits on calls inside it, in its JSON form (with the
    arguments it ran with when an approver's are not the message's: the digest covers them)."""
    paused = result.sub_run
    assert paused is not None and paused.digest is not None  # set by `with_digest`
    own = None if call.arguments == arguments else call.arguments
    if paused.messages is None:
        pending = list(paused.pending)
        record = PausedCall(SUB_RUN, paused.digest, arguments=own, pending=pending)
    else:
        messages = list(paused.messages)
        record = PausedCall(SUB_RUN, paused.digest, arguments=own, messages=messages)
    dumped: dict[str, Any] = _adapters()[0].dump_python(record, mode="json", exclude_none=True)
    return dumped


def paused_record(message: AiMessage | None) -> dict[str, PausedCall]:
    """What `message` records of the calls it paused on (`PAUSED_CALLS`), by call id; empty
    when it records none. Raises `ValueError` for a malformed record."""
    if message is None or PAUSED_CALLS not in message.attributes:
        return {}
    return _recorded(message)


def _recorded(message: AiMessage) -> dict[str, PausedCall]:
    """What `message` records of its paused calls (`PAUSED_CALLS`)."""
    try:
        return _adapters()[1].validate_python(message.attributes[PAUSED_CALLS])
    except ValidationError as error:
        raise ValueError(
            f"the history's record of its paused calls (attributes[{PAUSED_CALLS!r}]) is "
            f"malformed: {error.errors(include_url=False)[0]['msg']}; nothing ran"
        ) from None


def _held_again(call: ToolCall, paused: PausedCall) -> Decided:
    """An undecided recorded call: held again on what it waits for. A question stays the one the
    call paused on (sending the call again would ask it twice, its first request still open)."""
    if paused.reason != "elicitation":
        return Decided(call)  # the tool's policy holds it again
    pending = PendingCall(call, "elicitation", paused.question, paused.digest)
    return Decided(call, PendingResult("Awaiting the user's answer.", pending=pending))
