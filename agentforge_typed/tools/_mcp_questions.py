"""Questions an MCP server asks the user during a call (elicitation), as pauses of the run.

A server asks in one of two ways, depending on the protocol revision the session speaks.

Mid-call (the handshake revisions, up to 2025-11-25): the server sends `elicitation/create` while
the call is in flight. A call that may pause (under a `ToolService` run) is then sent from a task
of its own on the session's loop, apart from the run: when its server asks, the run gets a pending
result carrying the question and pauses, while the request stays open on the server, waiting. The
run resumes with an `ElicitationAnswer` for the call (after a JSON round trip of its history if
need be, in the same process): the answer goes to the waiting request and the run takes the call's
result, or its next question. A question unanswered for `elicitation_timeout` seconds is answered
`cancel`; one that cannot be told apart (two calls in flight on one session) is declined.

In a result (the stateless revision, 2026-07-28): the call ends with `input_required`, carrying
the questions and an opaque request state. Nothing waits: the pending question carries its key
and the state, and the answer is sent with the call sent again, from this process or any other
(a restarted program, a durable run's next activity). The process that asked remembers the
question for `elicitation_timeout` seconds, so a bare `ElicitationAnswer` resumes it there.

Either way, what a server sends is bounded: at most `MAX_OPEN` calls of a server wait open, a
requested schema over `MAX_SCHEMA_CHARS` characters, a URL-mode question or a schema that is not
an object of primitive properties is declined at once, a request state over `MAX_STATE_CHARS`
characters, more than `MAX_INPUT_REQUESTS` questions at once or more than `MAX_INPUT_ROUNDS`
rounds of `input_required` end the call with an error the model reads. Open calls and questions are kept by the call's id, tool and arguments; past
`MAX_OPEN` remembered keyed questions, the oldest is forgotten (its answer must then carry it).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_core

from .._approval import Elicitation, ElicitationAnswer, PendingCall, PendingResult
from .._messages import ToolCall
from ._base import ToolExecutionResult
from ._outcomes import execution_error_result
from ._schema_arguments import SchemaArguments
from ._schema_tool import valid_arguments

if TYPE_CHECKING:
    import anyio

__all__ = [
    "MAX_INPUT_REQUESTS",
    "MAX_INPUT_ROUNDS",
    "MAX_OPEN",
    "MAX_SCHEMA_CHARS",
    "MAX_STATE_CHARS",
    "Desk",
    "OpenCall",
    "Resend",
]

logger = logging.getLogger("agentforge_typed.mcp")

MAX_SCHEMA_CHARS = 10_000
"""The largest requested schema (as JSON) a question may carry; a larger one is declined."""
MAX_OPEN = 100
"""The most calls of one server that may wait for an answer; past it, a call's questions are
declined."""
MAX_STATE_CHARS = 64_000
"""The longest request state a server may ask to be sent back (it travels in pending calls)."""
MAX_INPUT_ROUNDS = 10
"""The most `input_required` results one call may answer with before it is an error."""
MAX_INPUT_REQUESTS = 32
"""The most questions one `input_required` result may carry."""
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})

CallKey = tuple[str, str, str]
"""A call's id, tool name and arguments: what open calls and questions are kept by. The id alone
is the loop's within one conversation only; two conversations whose models reuse an id would
otherwise share a question."""


def key_of(call: ToolCall) -> CallKey:
    return call.id, call.name, call.arguments


@dataclass
class OpenCall:
    """A call sent apart from the run, that may stop at a question asked mid-call."""

    changed: anyio.Event
    """Set when `question` or `outcome` is set (replaced by whoever waits on it)."""
    answered: anyio.Event
    session: Any = None
    """The session the request went to (a question comes from it)."""
    scope: anyio.CancelScope | None = None
    """The request's timeout, set aside while a person answers."""
    question: Elicitation | None = None
    validator: SchemaArguments | None = None
    answer: ElicitationAnswer | None = None
    outcome: ToolExecutionResult | None = None


@dataclass(frozen=True)
class _Asked:
    """A keyed question the run paused on: nothing waits for it here."""

    question: Elicitation
    validator: SchemaArguments
    until: float
    """`time.monotonic()` after which it is forgotten."""


@dataclass(frozen=True)
class Resend:
    """Send the call again with these `input_responses` and `request_state` (the stateless
    revision's way to give a server its answers)."""

    responses: dict[str, dict[str, Any]]
    state: str | None


@dataclass
class Desk:
    """The open calls and keyed questions of one server, by `CallKey`.

    Args:
        label: The server's, for warnings.
        timeout: The calls' own timeout (restarted once a question is answered).
        answer_timeout: Seconds a question waits for its answer (or is remembered).
    """

    label: str
    timeout: float
    answer_timeout: float
    calls: dict[CallKey, OpenCall] = field(default_factory=dict)
    asked: dict[CallKey, _Asked] = field(default_factory=dict)

    def open(self, call: ToolCall) -> OpenCall | None:
        """A new open call, or `None` when it cannot wait (too many wait, or the call does)."""
        import anyio

        key = key_of(call)
        if len(self.calls) >= MAX_OPEN or key in self.calls:
            return None
        opened = self.calls[key] = OpenCall(anyio.Event(), anyio.Event())
        return opened

    async def next(self, call: ToolCall, opened: OpenCall) -> ToolExecutionResult:
        """The call's result, or a pending result carrying its server's question."""
        import anyio

        while opened.outcome is None and opened.question is None:
            opened.changed = anyio.Event()
            await opened.changed.wait()
        if opened.outcome is not None:
            self.calls.pop(key_of(call), None)
            return opened.outcome
        assert opened.question is not None
        return _pending(call, opened.question)

    async def resume(
        self, call: ToolCall, tool_name: str, answer: ElicitationAnswer
    ) -> ToolExecutionResult | Resend:
        """Give the waiting request its answer (the call's result, or its next question), or
        say how to send a keyed question's answer."""
        key = key_of(call)
        opened = self.calls.get(key)
        if opened is not None:
            if opened.outcome is None and opened.question is not None:
                opened.answer, opened.question = answer, None
                opened.answered.set()
            return await self.next(call, opened)
        asked = self._take(key)
        question = asked.question if asked is not None else answer.question
        if question is None or question.key is None:
            return execution_error_result(
                tool_name,
                "the server's question is no longer open (its session ended, or the program "
                "restarted); call the tool again",
            )
        return Resend({question.key: _reply(answer)}, question.state)

    def check(self, call: ToolCall, tool_name: str, answer: ElicitationAnswer) -> None:
        """Refuse an answer its question's schema does not accept (`ToolArgumentsError`), or
        content with a refusal (`ValueError`). Without a question known, nothing to check: the
        call then tells the model the question is gone."""
        if answer.action != "accept":
            if answer.content is not None:
                raise ValueError(f"a {answer.action!r} answer carries no content")
            return
        validator = self._validator(key_of(call), answer)
        if validator is None:
            return
        content = pydantic_core.to_json(dict(answer.content or {}))
        valid_arguments(tool_name, validator.validate(content))

    def settle(
        self, call: ToolCall, tool_name: str, required: Mapping[str, Any], *, may_pause: bool
    ) -> ToolExecutionResult | Resend:
        """What to do with an `input_required` result (wire form) of a call that may pause or
        not: pause on its first question the user can answer, else answer every question
        `decline` and send the call again; an error result for what this client cannot answer
        or keep."""
        state = required.get("requestState")
        if state is not None and (not isinstance(state, str) or len(state) > MAX_STATE_CHARS):
            return execution_error_result(
                tool_name, f"the server's request state is over {MAX_STATE_CHARS:,} characters"
            )
        self._forget_expired()
        requests = required.get("inputRequests") or {}
        if len(requests) > MAX_INPUT_REQUESTS:
            return execution_error_result(
                tool_name, f"the server asked more than {MAX_INPUT_REQUESTS} questions at once"
            )
        responses: dict[str, dict[str, Any]] = {}
        for name, request in requests.items():
            method = request.get("method") if isinstance(request, Mapping) else None
            if method != "elicitation/create":
                return execution_error_result(
                    tool_name,
                    f"the server asked for {method!r}, which this client does not offer",
                )
            posed = _pose(request.get("params") or {})
            if isinstance(posed, str):
                logger.warning("MCP server %s: a question declined: %s", self.label, posed)
            elif may_pause:
                question = Elicitation(posed[0].message, posed[0].schema, name, state)
                self._remember(
                    call, _Asked(question, posed[1], time.monotonic() + self.answer_timeout)
                )
                return _pending(call, question)
            responses[name] = {"action": "decline"}
        return Resend(responses, state)

    def callback(self, session_of: Callable[[], Any]) -> Any:
        """The session's `elicitation_callback` (`session_of()` is the session it serves), for
        questions asked mid-call."""

        async def elicit(context: Any, params: Any) -> Any:
            from mcp.types import ElicitResult

            opened, reason = self._asking(session_of(), params)
            if opened is None:
                logger.warning("MCP server %s: a question declined: %s", self.label, reason)
                return ElicitResult(action="decline")
            answer = await self._wait(opened)
            if answer is None:
                return ElicitResult(action="cancel")
            return ElicitResult.model_validate(_reply(answer))

        return elicit

    def _asking(self, session: Any, params: Any) -> tuple[OpenCall | None, str]:
        """The open call a question belongs to, with its question set; or why it is declined."""
        waiting = [c for c in self.calls.values() if c.session is session and c.outcome is None]
        if len(waiting) != 1 or waiting[0].question is not None:
            return None, f"{len(waiting)} calls in flight could have asked it"
        posed = _pose(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        if isinstance(posed, str):
            return None, posed
        opened = waiting[0]
        opened.question, opened.validator = posed
        return opened, ""

    def _remember(self, call: ToolCall, asked: _Asked) -> None:
        """Keep a keyed question for a bare answer in this process; at most `MAX_OPEN`, the
        oldest forgotten first (an answer that carries its question needs none of this)."""
        if len(self.asked) >= MAX_OPEN:
            del self.asked[min(self.asked, key=lambda k: self.asked[k].until)]
        self.asked[key_of(call)] = asked

    def _take(self, key: CallKey) -> _Asked | None:
        """The keyed question remembered for `key`, forgotten now."""
        self._forget_expired()
        return self.asked.pop(key, None)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for stale in [k for k, asked in self.asked.items() if asked.until < now]:
            del self.asked[stale]

    def _validator(self, key: CallKey, answer: ElicitationAnswer) -> SchemaArguments | None:
        opened = self.calls.get(key)
        if opened is not None:
            return opened.validator
        asked = self.asked.get(key)
        if asked is not None:
            return asked.validator
        if answer.question is None:
            return None
        posed = _pose(
            {"message": answer.question.message, "requestedSchema": answer.question.schema}
        )
        if isinstance(posed, str):
            raise ValueError(f"the answered question cannot be answered: {posed}")
        return posed[1]

    async def _wait(self, opened: OpenCall) -> ElicitationAnswer | None:
        """Pause the request's timeout, tell the run, and wait for the answer (bounded)."""
        import anyio

        if opened.scope is not None:
            opened.scope.deadline = math.inf
        opened.answered = anyio.Event()
        opened.changed.set()
        with anyio.move_on_after(self.answer_timeout):
            await opened.answered.wait()
        answer, opened.answer, opened.question = opened.answer, None, None
        if opened.scope is not None:
            opened.scope.deadline = anyio.current_time() + self.timeout
        return answer


def _reply(answer: ElicitationAnswer) -> dict[str, Any]:
    """`answer` as the server reads it (an `ElicitResult`'s wire form): the content only with
    an acceptance."""
    if answer.action == "accept":
        return {"action": "accept", "content": dict(answer.content or {})}
    return {"action": answer.action}


def _pending(call: ToolCall, question: Elicitation) -> PendingResult:
    return PendingResult(
        "Awaiting the user's answer.", pending=PendingCall(call, "elicitation", question)
    )


def _pose(params: Mapping[str, Any]) -> tuple[Elicitation, SchemaArguments] | str:
    """A question the user can answer, from `elicitation/create` params (wire form), with its
    answers' validator; or why it is declined."""
    if params.get("mode", "form") != "form":
        return "only form questions are answered (not URL mode)"
    schema = params.get("requestedSchema")
    if not isinstance(schema, dict):
        return "it has no requested schema"
    size = len(pydantic_core.to_json(schema))
    if size > MAX_SCHEMA_CHARS:
        return f"its schema has {size} characters, over {MAX_SCHEMA_CHARS}"
    properties = schema.get("properties") or {}
    flat = isinstance(properties, dict) and all(
        isinstance(p, dict) and (p.get("type") in _PRIMITIVES or "enum" in p)
        for p in properties.values()
    )
    if schema.get("type") != "object" or not flat:
        return "its schema is not an object of primitive properties"
    try:
        validator = SchemaArguments(schema, tool_name="answer", extra_arguments="forbid")
    except ValueError as exc:
        return str(exc)
    return Elicitation(str(params.get("message", "")), schema), validator
