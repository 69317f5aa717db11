"""Questions an MCP server asks the user during a call (elicitation), as pauses of the run.

A server asks in one of two ways, depending on the protocol revision the session speaks.

Mid-call (the handshake revisions, up to 2025-11-25): the server sends `elicitation/create` while
the call is in flight. A call that may pause (under a `ToolService` run) is then sent from a task
of its own on the session's loop, apart from the run: when its server asks, the run gets a pending
result carrying the question and pauses, while the request stays open on the server, waiting. The
run resumes with an `ElicitationAnswer` for the call (after a JSON round trip of its history if
need be, in the same process): the answer goes to the waiting request and the run takes the call's
result, or its next question. A question unanswered for `elicitation_timeout` seconds is answered
`cancel`. The protocol does not say which request a question belongs to (nor does the SDK's
streamable HTTP client, which knows the response stream it came on but does not pass it on), so
it goes to the one call in flight on its session, counting every call (a direct
`tool.execute` too), and is declined when there are several, or when that call cannot pause.

In a result (the stateless revision, 2026-07-28): the call ends with `input_required`, carrying
the questions and an opaque request state. Nothing waits: the pending question carries its key
and the state, and the answer is sent with the call sent again, from this process or any other
(a restarted program, a durable run's next activity). The process that asked remembers the
question for `elicitation_timeout` seconds, so a bare `ElicitationAnswer` resumes it there.

Open calls and remembered questions belong to their conversation: they are kept in its scope
(`tools/_scope`, reached through `ToolContext.scope`) by the call's id, tool and arguments, never on
the server, so two conversations whose models make the very same call share nothing. The run
that opened or took one over holds it: when the run ends without pausing on it (it failed, was
cancelled, its stream was closed) the entry is removed and an open request cancelled; a question
the run paused on outlives it for `elicitation_timeout` (an open call, plus the time its call may
still take). An answer that carries its question is checked against the one remembered for its
conversation's call, never silently replaced by it.

An accepted answer that leaves out properties with a `default` in the requested schema gets
those defaults (SEP-1034) before it is validated and sent. Every form of property the
specification allows is posed, single- and multi-select enums (SEP-1330) among them.

A URL-mode question (2025-11-25) asks the user to go through a page, out of band: the run pauses
on it (`Elicitation.url`), and the answer carries no content. Asked mid-call, `"accept"` (the user
went there) goes to the waiting request, and the server goes on. Asked by failing the call with
`URLElicitationRequired` (-32042), the call is sent again once the user accepts (nothing waits on
the server meanwhile); only the process that asked can do that, as for a question asked mid-call.

Either way, what a server sends is bounded: a requested schema over `MAX_SCHEMA_CHARS`
characters, a schema that is not an object of such properties, or a URL-mode question whose URL
is not `http`/`https`, is over `MAX_URL_CHARS` characters or has no `elicitationId` is declined
at once, a request state over `MAX_STATE_CHARS` characters, more than `MAX_INPUT_REQUESTS`
questions at once or more than `MAX_INPUT_ROUNDS` rounds of `input_required` end the call with
an error the model reads; a conversation keeps at most `_scope.MAX_ENTRIES` open calls and
questions (the one due soonest is dropped to make room).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic_core

from ..._messages import ToolCall, shown_name
from ..._records import (
    Elicitation,
    ElicitationAnswer,
    PendingCall,
    PendingResult,
    ToolExecutionResult,
)
from ..._sync import running_loop
from ..._transport._redaction import NO_SECRETS, Redactor
from .._base import ToolContext
from .._outcomes import execution_error_result
from .._schema_arguments import SchemaArguments
from .._schema_tool import valid_arguments
from .._scope import Scope

if TYPE_CHECKING:
    import anyio

__all__ = [
    "MAX_INPUT_REQUESTS",
    "MAX_INPUT_ROUNDS",
    "MAX_SCHEMA_CHARS",
    "MAX_STATE_CHARS",
    "MAX_URL_CHARS",
    "Desk",
    "Flight",
    "OpenCall",
    "Resend",
    "filled",
    "scope_of",
]

logger = logging.getLogger("agentforge_typed.mcp")

MAX_SCHEMA_CHARS = 10_000
"""The largest requested schema (as JSON) a question may carry; a larger one is declined."""
MAX_STATE_CHARS = 64_000
"""The longest request state a server may ask to be sent back (it travels in pending calls)."""
MAX_INPUT_ROUNDS = 10
"""The most `input_required` results one call may answer with before it is an error."""
MAX_INPUT_REQUESTS = 32
"""The most questions one `input_required` result may carry."""
MAX_URL_CHARS = 2_048
"""The longest URL a URL-mode question may send the user to."""
_MAX_ELICITATION_ID_CHARS = 256
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})
_GRACE = 1.0
"""Seconds an open call is kept beyond the time it may take once its question is given up."""

CallKey = tuple[str, str, str]
"""A call's id, tool name and arguments: what open calls and questions are kept by, within
their conversation."""


def key_of(call: ToolCall) -> CallKey:
    return call.id, call.name, call.arguments


def scope_of(context: ToolContext[Any]) -> Scope | None:
    """Where a call keeps what outlives it: its run's scope; outside a run, its conversation's
    (what it keeps then lives for its TTL); `None` without a conversation."""
    if context.scope is not None:
        scope: Scope = context.scope
        return scope
    return None if context.conversation_id is None else Scope(context.conversation_id)


@dataclass(eq=False)
class OpenCall:
    """A call sent apart from the run, that may stop at a question asked mid-call."""

    changed: anyio.Event
    """Set when `question` or `outcome` is set (replaced by whoever waits on it)."""
    answered: anyio.Event
    deadline: anyio.CancelScope | None = None
    """The request's timeout, set aside while a person answers."""
    question: Elicitation | None = None
    validator: SchemaArguments | None = None
    answer: ElicitationAnswer | None = None
    outcome: ToolExecutionResult | None = None
    cancelled: bool = False
    """Set by `cancel`: the call stops (or never starts)."""
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: anyio.CancelScope | None = None

    def started(self, stop: anyio.CancelScope) -> None:
        """The call's task runs under `stop`, on this loop (cancelled at once if `cancel` came
        first)."""
        self._loop, self._stop = asyncio.get_running_loop(), stop
        if self.cancelled:
            self._end()

    def cancel(self) -> None:
        """Stop the call: its request is cancelled (the server gets `notifications/cancelled`)
        and a question it waits on is answered `cancel`. From any thread."""
        self.cancelled = True
        loop = self._loop
        if loop is None:  # not started: `started` sees the flag
            return
        if running_loop() is loop:
            self._end()
        else:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs there
                loop.call_soon_threadsafe(self._end)

    def _end(self) -> None:
        if self._stop is not None:
            self._stop.cancel()
        self.answered.set()


@dataclass(eq=False)
class Flight:
    """A `tools/call` request in flight on a session: the open call a question asked during it
    goes to, or `None` with why it cannot pause."""

    opened: OpenCall | None
    cannot: str = ""
    refused: str = ""
    """Why the call ends with an error, whatever the server answers: it asked a question that
    holds a secret (set with the request cancelled)."""
    stop: anyio.CancelScope | None = None
    """The request's scope, cancelled to end it."""


@dataclass(frozen=True)
class _Asked:
    """A keyed question the run paused on, or a URL-mode question a call failed for (`again`):
    nothing waits for it here."""

    question: Elicitation
    validator: SchemaArguments | None
    again: bool = False
    """Accepted, the call is sent again as it was (the answer goes nowhere)."""


@dataclass(frozen=True)
class Resend:
    """Send the call again with these `input_responses` and `request_state` (the stateless
    revision's way to give a server its answers)."""

    responses: dict[str, dict[str, Any]]
    state: str | None


@dataclass(eq=False)
class Desk:
    """How one server's calls pause on questions. It keeps nothing of a call: open calls and
    keyed questions are kept in their conversation's scope, under keys that start with the desk.

    Args:
        label: The server's, for warnings.
        timeout: The calls' own timeout (restarted once a question is answered).
        answer_timeout: Seconds a question waits for its answer (or is remembered).
        deadline: The longest a call takes, reconnection and a second try included: with
            `answer_timeout`, how long an open call a run waits on is kept.
        redactor: Gives the server's redactor: a form question's message and schema are shown
            redacted, and a URL-mode question that holds a secret ends its call (a link cannot
            be redacted and still work).
    """

    label: str
    timeout: float
    answer_timeout: float
    deadline: float = 0.0
    redactor: Callable[[], Redactor] = lambda: NO_SECRETS
    """The server's redactor as it is now (it learns tokens as a flow obtains them)."""

    @property
    def _open_ttl(self) -> float:
        """How long an open call is kept while a run waits on it: however long the call takes."""
        return self.answer_timeout + self.deadline

    @property
    def _paused_ttl(self) -> float:
        """How long an open call is kept once its run paused on its question: the question waits
        `answer_timeout`, then the call has its `timeout` to end (a late answer reads how)."""
        return self.answer_timeout + self.timeout + _GRACE

    def _open_key(self, call: ToolCall) -> tuple[Any, ...]:
        return (self, "open", *key_of(call))

    def _asked_key(self, call: ToolCall) -> tuple[Any, ...]:
        return (self, "asked", *key_of(call))

    def open(self, call: ToolCall, scope: Scope | None) -> OpenCall | None:
        """A new open call, held by the run, or `None` when it cannot wait: no conversation to
        keep it in, or the same call of the conversation waits already."""
        import anyio

        key = self._open_key(call)
        if scope is None or scope.get(key) is not None:
            return None
        opened = OpenCall(anyio.Event(), anyio.Event())
        scope.put(key, opened, ttl=self._open_ttl, drop=opened.cancel)
        return opened

    async def next(self, call: ToolCall, opened: OpenCall, scope: Scope) -> ToolExecutionResult:
        """The call's result (the open call forgotten), or a pending result carrying its
        server's question (the open call kept past the run); a caller that stops waiting
        (cancelled) cancels the call."""
        import anyio

        key = self._open_key(call)
        try:
            while opened.outcome is None and opened.question is None:
                opened.changed = anyio.Event()
                await opened.changed.wait()
        except BaseException:
            scope.discard(key)
            raise
        if opened.outcome is not None:
            scope.take(key)
            return opened.outcome
        assert opened.question is not None
        scope.keep(key, ttl=self._paused_ttl)
        return _pending(call, opened.question)

    async def resume(
        self, call: ToolCall, tool_name: str, answer: ElicitationAnswer, scope: Scope | None
    ) -> ToolExecutionResult | Resend:
        """Give the conversation's waiting request its answer (the call's result, or its next
        question), or say how to send a keyed question's answer."""
        if scope is None:
            return _resend(tool_name, answer.question, answer)
        opened: OpenCall | None = scope.hold(self._open_key(call), ttl=self._open_ttl)
        if opened is not None:
            differ = _differ(answer.question, opened.question)
            if differ:
                return execution_error_result(tool_name, differ)
            if opened.outcome is None and opened.question is not None:
                opened.answer, opened.question = answer, None
                opened.answered.set()
            return await self.next(call, opened, scope)
        asked: _Asked | None = scope.take(self._asked_key(call))
        if asked is not None:
            differ = _differ(answer.question, asked.question)
            if differ:
                return execution_error_result(tool_name, differ)
            if asked.again:
                return _again(tool_name, asked.question, answer)
        return _resend(tool_name, answer.question or (asked.question if asked else None), answer)

    def check(
        self,
        call: ToolCall,
        tool_name: str,
        answer: ElicitationAnswer,
        conversation_id: str | None,
    ) -> None:
        """Refuse an answer whose question differs from the one its conversation's call paused
        on, one its question's schema does not accept (`ToolArgumentsError`), or content with a
        refusal (`ValueError`). Without a question known, nothing to check: the call then tells
        the model the question is gone."""
        remembered = self._remembered(call, conversation_id)
        if remembered is not None:
            differ = _differ(answer.question, remembered[0])
            if differ:
                raise ValueError(differ)
        question = remembered[0] if remembered is not None else answer.question
        if question is not None and question.url is not None:
            if answer.content is not None:
                raise ValueError(
                    "the answer to a URL-mode question carries no content: the user answers it "
                    "at its URL"
                )
            return
        if answer.action != "accept":
            if answer.content is not None:
                raise ValueError(f"a {answer.action!r} answer carries no content")
            return
        validator = remembered[1] if remembered is not None else None
        if validator is None and answer.question is not None:
            posed = _pose(
                {"message": answer.question.message, "requestedSchema": answer.question.schema}
            )
            if not isinstance(posed, tuple):  # a form question is never `_Refused`
                raise ValueError(f"the answered question cannot be answered: {posed}")
            validator = posed[1]
        if validator is None or question is None:
            return
        content = pydantic_core.to_json(filled(answer.content, question.schema))
        valid_arguments(tool_name, validator.validate(content))

    def settle(
        self,
        call: ToolCall,
        tool_name: str,
        required: Mapping[str, Any],
        *,
        may_pause: bool,
        scope: Scope | None,
    ) -> ToolExecutionResult | Resend:
        """What to do with an `input_required` result (wire form) of a call that may pause or
        not: pause on its first question the user can answer (remembered in the conversation's
        `scope`), else answer every question `decline` and send the call again; an error result
        for what this client cannot answer or keep."""
        state = required.get("requestState")
        if state is not None and (not isinstance(state, str) or len(state) > MAX_STATE_CHARS):
            return execution_error_result(
                tool_name, f"the server's request state is over {MAX_STATE_CHARS:,} characters"
            )
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
            posed = _pose(request.get("params") or {}, self.redactor())
            if isinstance(posed, _Refused):
                return self._refused(tool_name, posed)
            if isinstance(posed, str):
                logger.warning("MCP server %s: a question declined: %s", self.label, posed)
            elif may_pause:
                question = dataclasses.replace(posed[0], key=name, state=state)
                if scope is not None:  # for a bare answer (one that carries it needs none)
                    self._remember(call, _Asked(question, posed[1]), scope)
                return _pending(call, question)
            responses[name] = {"action": "decline"}
        return Resend(responses, state)

    def required(
        self,
        call: ToolCall,
        tool_name: str,
        data: Any,
        *,
        scope: Scope | None,
        cannot: str,
    ) -> ToolExecutionResult:
        """What to do with a call the server failed with `URLElicitationRequired` (`data`: the
        error's data): pause on the first of its URL-mode questions the user can go through (in
        the conversation's `scope`), to send the call again once accepted; an error result when
        the call cannot pause (`cannot` says why) or none can be posed."""
        elicitations = data.get("elicitations") if isinstance(data, Mapping) else None
        for params in (elicitations if isinstance(elicitations, list) else [])[:MAX_INPUT_REQUESTS]:
            posed = (
                _pose(params, self.redactor())
                if isinstance(params, Mapping)
                else "it is not an object"
            )
            if isinstance(posed, _Refused):
                return self._refused(tool_name, posed)
            if not isinstance(posed, str) and posed[0].url is None:
                posed = "it is a form question, where only URL-mode ones may be"
            if isinstance(posed, str):
                logger.warning("MCP server %s: a question declined: %s", self.label, posed)
                continue
            if scope is None:
                return execution_error_result(
                    tool_name,
                    "the server requires the user to go through a page first (a URL-mode "
                    f"question), and the call cannot pause for it ({cannot})",
                )
            self._remember(call, _Asked(posed[0], None, again=True), scope)
            return _pending(call, posed[0])
        return execution_error_result(
            tool_name,
            "the server requires the user to go through a page first (a URL-mode question), "
            "and sent none this client can show",
        )

    def _remember(self, call: ToolCall, asked: _Asked, scope: Scope) -> None:
        """Keep the question the conversation's call pauses on, past the run, for
        `answer_timeout`."""
        key = self._asked_key(call)
        scope.put(key, asked, ttl=self.answer_timeout)
        scope.keep(key, ttl=self.answer_timeout)

    def _refused(self, tool_name: str, refused: _Refused) -> ToolExecutionResult:
        logger.warning("MCP server %s: a question refused: %s", self.label, refused.reason)
        return execution_error_result(tool_name, refused.reason)

    def callback(self, flights: set[Flight]) -> Any:
        """The session's `elicitation_callback` (`flights`: the calls in flight on it), for
        questions asked mid-call."""

        async def elicit(context: Any, params: Any) -> Any:
            from mcp.types import ElicitResult

            opened, reason = self._asking(flights, params)
            if opened is None:
                logger.warning("MCP server %s: a question declined: %s", self.label, reason)
                return ElicitResult(action="decline")
            question = opened.question
            answer = await self._wait(opened)
            if answer is None:
                return ElicitResult(action="cancel")
            return ElicitResult.model_validate(_reply(answer, question))

        return elicit

    def _asking(self, flights: set[Flight], params: Any) -> tuple[OpenCall | None, str]:
        """The open call a question belongs to, with its question set; or why it is declined.
        The protocol does not say which request asked: only a lone call in flight can have."""
        if len(flights) != 1:
            if not flights:
                return None, "no call was in flight on the session to have asked it"
            return None, (
                f"{len(flights)} calls were in flight on the session, and the protocol does not "
                "say which one asked it"
            )
        (flight,) = flights
        posed = _pose(
            params.model_dump(mode="json", by_alias=True, exclude_none=True), self.redactor()
        )
        if isinstance(posed, _Refused):  # the call ends, whatever the server answers
            flight.refused = posed.reason
            if flight.stop is not None:
                flight.stop.cancel()
            return None, posed.reason
        opened = flight.opened
        if opened is None:
            return None, f"the call in flight cannot pause for an answer ({flight.cannot})"
        if opened.question is not None or opened.cancelled:
            return None, "the call in flight waits on an answer to another question already"
        if isinstance(posed, str):
            return None, posed
        opened.question, opened.validator = posed
        return opened, ""

    def _remembered(
        self, call: ToolCall, conversation_id: str | None
    ) -> tuple[Elicitation, SchemaArguments | None] | None:
        """The question the conversation's call paused on, with its validator, if this process
        remembers it."""
        if conversation_id is None:
            return None
        scope = Scope(conversation_id)
        opened: OpenCall | None = scope.get(self._open_key(call))
        if opened is not None and opened.question is not None:
            return opened.question, opened.validator
        asked: _Asked | None = scope.get(self._asked_key(call))
        return None if asked is None else (asked.question, asked.validator)

    async def _wait(self, opened: OpenCall) -> ElicitationAnswer | None:
        """Pause the request's timeout, tell the run, and wait for the answer (bounded)."""
        import anyio

        if opened.deadline is not None:
            opened.deadline.deadline = math.inf
        opened.answered = anyio.Event()
        opened.changed.set()
        with anyio.move_on_after(self.answer_timeout):
            await opened.answered.wait()
        answer, opened.answer, opened.question = opened.answer, None, None
        if opened.deadline is not None:
            opened.deadline.deadline = anyio.current_time() + self.timeout
        return answer


def _resend(
    tool_name: str, question: Elicitation | None, answer: ElicitationAnswer
) -> ToolExecutionResult | Resend:
    """How to send `answer` to a keyed `question` (nothing waits for it); for any other, the
    error result saying it is gone."""
    if question is None or question.key is None:
        return execution_error_result(
            tool_name,
            "the server's question is no longer open (its session ended, or the program "
            "restarted); call the tool again",
        )
    return Resend({question.key: _reply(answer, question)}, question.state)


def _again(
    tool_name: str, question: Elicitation, answer: ElicitationAnswer
) -> ToolExecutionResult | Resend:
    """Send the call again once the user went through the page it failed for; an error result
    when they did not."""
    if answer.action == "accept":
        return Resend({}, None)
    done = "declined" if answer.action == "decline" else "dismissed"
    return execution_error_result(
        tool_name,
        f"the call was not sent again: the server required the user to go through a page first, "
        f"and the user {done} it ({question.message!r})",
    )


def _differ(carried: Elicitation | None, remembered: Elicitation | None) -> str:
    """Why an answer's own question is not the one its call paused on (`""`: it is, or the
    answer carries none)."""
    if carried is None or remembered is None or carried == remembered:
        return ""
    names = ("message", "schema", "key", "state", "url", "elicitation_id")
    fields = [n for n in names if getattr(carried, n) != getattr(remembered, n)]
    verb = "differs" if len(fields) == 1 else "differ"
    return (
        "the answer carries a question that differs from the one its call paused on in this "
        f"conversation (its {' and '.join(fields)} {verb}); answer the question in result.pending"
    )


def _reply(answer: ElicitationAnswer, question: Elicitation | None) -> dict[str, Any]:
    """`answer` as the server reads it (an `ElicitResult`'s wire form): the content, its left
    out defaults filled from `question`'s schema, only with an acceptance of a form."""
    if answer.action == "accept" and (question is None or question.url is None):
        schema = question.schema if question is not None else {}
        return {"action": "accept", "content": filled(answer.content, schema)}
    return {"action": answer.action}


def _pending(call: ToolCall, question: Elicitation) -> PendingResult:
    return PendingResult(
        "Awaiting the user's answer.", pending=PendingCall(call, "elicitation", question)
    )


def _answerable(field: Any) -> bool:
    """Whether a requested schema's property is one of the forms the specification allows
    (2025-11-25): a string, number, integer or boolean, a single-select enum (`enum`, `oneOf` of
    `const`/`title`, legacy `enumNames`), or a multi-select one (`"type": "array"` whose `items`
    hold an `enum` or an `anyOf` of `const`/`title`, SEP-1330)."""
    if not isinstance(field, dict):
        return False
    if field.get("type") in _PRIMITIVES or "enum" in field:
        return True
    items = field.get("items")
    return field.get("type") == "array" and isinstance(items, dict) and _selects(items)


def _selects(items: dict[str, Any]) -> bool:
    if isinstance(items.get("enum"), list):
        return True
    choices = items.get("anyOf", items.get("oneOf"))
    return isinstance(choices, list) and all(
        isinstance(choice, dict) and "const" in choice for choice in choices
    )


def filled(content: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> dict[str, Any]:
    """`content` with each property it leaves out that has a `default` in `schema` set to that
    default (SEP-1034): what is validated and sent."""
    answer = dict(content or {})
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, field in properties.items():
            if name not in answer and isinstance(field, Mapping) and "default" in field:
                answer[name] = field["default"]
    return answer


@dataclass(frozen=True)
class _Refused:
    """A question that must reach no one, and ends its call with an error (`reason`)."""

    reason: str


_LEAK = (
    "the server asked the user to go to a page (a URL-mode question) whose {} holds a secret "
    "this client keeps for the server (a token or a key); the question was refused and the "
    "call ended"
)


def _pose(
    params: Mapping[str, Any], redactor: Redactor = NO_SECRETS
) -> tuple[Elicitation, SchemaArguments | None] | str | _Refused:
    """A question the user can answer, from `elicitation/create` params (wire form), with its
    answers' validator; or why it is declined; or `_Refused`, for a URL-mode question whose URL
    or message holds one of `redactor`'s secrets. A form question's message and schema are
    redacted."""
    mode = params.get("mode", "form")
    if mode == "url":
        for part, named in (("url", "URL"), ("message", "message"), ("elicitationId", "id")):
            text = params.get(part)
            if isinstance(text, str) and redactor.replace(text) != text:
                return _Refused(_LEAK.format(named))
        return _pose_url(params)
    if mode != "form":
        return f"its mode {shown_name(str(mode))!r} is neither 'form' nor 'url'"
    schema = params.get("requestedSchema")
    if not isinstance(schema, dict):
        return "it has no requested schema"
    size = len(pydantic_core.to_json(schema))  # as the server sent it, before it is walked
    if size > MAX_SCHEMA_CHARS:
        return f"its schema has {size} characters, over {MAX_SCHEMA_CHARS}"
    schema = redactor.redact(schema)
    properties = schema.get("properties") or {}
    flat = isinstance(properties, dict) and all(map(_answerable, properties.values()))
    if schema.get("type") != "object" or not flat:
        return "its schema is not an object of primitive and enum properties"
    try:
        validator = SchemaArguments(schema, tool_name="answer", extra_arguments="forbid")
    except ValueError as exc:
        return str(exc)
    return Elicitation(redactor.replace(str(params.get("message", ""))), schema), validator


def _pose_url(params: Mapping[str, Any]) -> tuple[Elicitation, None] | str:
    """A URL-mode question the user can be shown; or why it is declined. Only `http` and
    `https` URLs are shown: a page of another scheme (`javascript:`, `file:`) is never a link."""
    url, elicitation_id = params.get("url"), params.get("elicitationId")
    if not isinstance(url, str) or not url:
        return "its URL is missing"
    if len(url) > MAX_URL_CHARS:
        return f"its URL has {len(url)} characters, over {MAX_URL_CHARS}"
    parts = urllib.parse.urlsplit(url) if url.isprintable() and " " not in url else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return f"its URL {shown_name(url)!r} is not an http or https URL"
    if (
        not isinstance(elicitation_id, str)
        or not 0 < len(elicitation_id) <= _MAX_ELICITATION_ID_CHARS
    ):
        return f"it has no elicitationId of at most {_MAX_ELICITATION_ID_CHARS} characters"
    message = params.get("message")
    return Elicitation(str(message or ""), {}, url=url, elicitation_id=elicitation_id), None
