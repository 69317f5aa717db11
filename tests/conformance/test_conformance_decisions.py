"""Conformance: a decision runs the call it was made for, once (the Decided and Once invariants).

*Decision kind and digest.* Every reason a call waits for — a person's approval, an external
result, the answer to a question an MCP server asked mid-call (handshake revision) or in a result
(a keyed question, stateless revision), a page the server sent the user to mid-call (a URL-mode
question, answered without content) — meets every kind of decision: `True`, `False`, a reason,
`Approved()`, `Approved(arguments=...)`, `pending.approve()`, an `ElicitationAnswer`, a question's
own `.answer(...)`, `pending.answer(...)`, an external result and `ToolFailed`. Only the kinds
that answer what the call waits for proceed (and an answer to a question no server asked — a
forged URL — does not); any other is refused before anything is sent,
naming both kinds. A call changed since the pause (its arguments, its conversation) is refused,
however the decision is given; a decision carrying the digest of another call is refused; under a
`digest_secret`, a record made with another secret, or none, is refused too. The questions come
from the real MCP server of test_mcp_elicitation.py, over stdio.

*Run-once.* A body never runs twice for one decision: a decision given again for a call that has
a result is refused, a resume retried after a failure mid-round runs nothing again, a question
answered twice reaches its request once, an undecided question is held again (never sent again
while its first request is open), and a `FallbackModel` that switches models after a tool ran
does not run it again. Where the loop alone cannot tell — the same paused history resumed twice,
by two callers, with no store between them — the call keeps its idempotency key.

Every check runs under the four `ToolService` drivers; the durable driver's `decide` update is
checked in test_temporal.py and test_temporal_mcp.py (named in `DURABLE`), its run-once in
test_conformance_once.py.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from conformance import assert_covers
from test_mcp import FIXTURE_SERVER
from test_mcp_elicitation import HISTORY

from agentforge_typed import (
    AiMessage,
    Approved,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    Elicitation,
    ElicitationAnswer,
    FallbackModel,
    FinalResultEvent,
    FunctionModel,
    MCPServer,
    ModelError,
    ModelRetry,
    PendingCall,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolExecutionError,
    ToolFailed,
    ToolResultMessage,
    ToolService,
    tool,
)
from agentforge_typed._identity import CallDigests
from agentforge_typed.tools.mcp._session import Revision

Drive = Callable[..., ToolChatResult[None]]


def _chat(service: ToolService, model: Any, messages: Any, **options: Any) -> ToolChatResult[None]:
    return service.chat(model, messages, **options)


def _achat(service: ToolService, model: Any, messages: Any, **options: Any) -> ToolChatResult[None]:
    return asyncio.run(service.achat(model, messages, **options))


def _final(events: Sequence[object]) -> ToolChatResult[None]:
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    return final.result


def _stream(
    service: ToolService, model: Any, messages: Any, **options: Any
) -> ToolChatResult[None]:
    return _final(list(service.stream(model, messages, **options)))


def _astream(
    service: ToolService, model: Any, messages: Any, **options: Any
) -> ToolChatResult[None]:
    async def collect() -> list[object]:
        return [event async for event in service.astream(model, messages, **options)]

    return _final(asyncio.run(collect()))


DRIVERS: dict[str, Drive] = {"chat": _chat, "achat": _achat, "stream": _stream, "astream": _astream}
"""The `ToolService` drivers, each a function running one conversation to its result."""

DURABLE = {
    "test_temporal": "test_a_durable_decision_of_another_kind_or_for_another_call_is_refused",
    "test_temporal_mcp": "test_a_durable_question_takes_only_its_own_answer",
}
"""The durable driver's checks of decision kind and digest (its `decide` update), by module."""

BY_DRIVER = pytest.mark.parametrize("drive", list(DRIVERS.values()), ids=list(DRIVERS))

# -- the reasons a call waits for ----------------------------------------------------------------

REASONS = ("approval", "external", "mid-call", "keyed", "url")
"""Why the paused call waits: approval (an MCP tool held for it), an external tool, a question
asked mid-call (handshake revision), a keyed question (stateless revision), a URL-mode question
asked mid-call (handshake revision)."""

WAITS_FOR = {
    "approval": "approval",
    "external": "external",
    "mid-call": "elicitation",
    "keyed": "elicitation",
    "url": "elicitation",
}


@tool(external=True)
def open_page(url: str) -> str:
    """Open a page in the user's browser (the front end does it)."""
    raise AssertionError("an external tool never runs in the loop")


TOOL = {
    "approval": "add",
    "external": "open_page",
    "mid-call": "ask",
    "keyed": "ask",
    "url": "visit",
}
ARGUMENTS = {
    "approval": '{"a": 1, "b": 2}',
    "external": '{"url": "https://a.example"}',
    "mid-call": "{}",
    "keyed": "{}",
    "url": '{"who": "ada"}',
}
CHANGED = {
    "approval": '{"a": 1, "b": 99999}',
    "external": '{"url": "https://evil.example"}',
    "mid-call": '{"twice": true}',
    "keyed": '{"twice": true}',
    "url": '{"who": "mallory"}',
}
"""Each call's arguments as an attacker edits them in the stored history."""


_numbers = itertools.count(1)


class Setting:
    """A service whose conversation pauses on one call for `reason`, and what ran. The call's id
    is new in the module: the module's MCP servers keep the questions of every test's calls."""

    def __init__(self, reason: str, service: ToolService, executed: list[ToolExecution]) -> None:
        self.reason = reason
        self.call_id = f"c{next(_numbers)}"
        self.service = service
        self.executed = executed
        self.asked: list[Sequence[ChatMessage]] = []

    def model(self) -> FunctionModel:
        """Makes the call, then says what its result was; records every request."""

        reason = self.reason

        def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
            self.asked.append(list(messages))
            results = [m for m in messages if isinstance(m, ToolResultMessage)]
            if results:
                return AiMessage(text=f"the tool said: {results[-1].text}")
            call = ToolCall(id=self.call_id, name=TOOL[reason], arguments=ARGUMENTS[reason])
            return AiMessage(tool_calls=[call])

        return FunctionModel(reply)

    def pause(self, drive: Drive, **options: Any) -> tuple[ToolChatResult[None], PendingCall]:
        paused = drive(self.service, self.model(), "go", **options)
        (pending,) = paused.pending
        assert (pending.call.id, pending.reason) == (self.call_id, WAITS_FOR[self.reason])
        assert pending.digest is not None
        return paused, pending

    def refused(self, drive: Drive, messages: Any, match: str, **decisions: Any) -> None:
        """Resuming with `decisions` is refused before the model or any tool is called."""
        asked, executed = len(self.asked), len(self.executed)
        with pytest.raises(ValueError, match=match):
            drive(self.service, self.model(), messages, **decisions)
        assert (len(self.asked), len(self.executed)) == (asked, executed)


def _held(call: ToolCall, context: ToolContext[Any]) -> bool:
    """`ask` waits for approval when its call's id says so."""
    return call.id.startswith("held-")


def _server(errlog: TextIO, reason: str) -> MCPServer:
    revision: Revision = "handshake" if reason in ("mid-call", "url") else "newest"
    return MCPServer.stdio(
        sys.executable,
        [FIXTURE_SERVER],
        errlog=errlog,
        revision=revision,
        requires_approval={"add": True, "ask": _held},
    )


Servers = dict[str, MCPServer]


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    """The MCP servers of the module, by reason: one per revision, entered once."""
    with (
        open(os.devnull, "w") as errlog,
        _server(errlog, "mid-call") as handshake,
        _server(errlog, "keyed") as newest,
    ):
        yield {"approval": newest, "mid-call": handshake, "keyed": newest, "url": handshake}


@contextmanager
def setting(servers: Servers, reason: str, **options: Any) -> Iterator[Setting]:
    """`reason`'s setting: a service of its MCP server (of an external tool's, for "external")
    that records what ran."""
    executed: list[ToolExecution] = []
    source = open_page if reason == "external" else servers[reason]
    service = ToolService([source], after_tool_call=executed.append, **options)
    yield Setting(reason, service, executed)


# -- the kinds of decision -----------------------------------------------------------------------

MADE_UP = Elicitation("Made up?", {"type": "object", "properties": {"name": {"type": "string"}}})
"""A question no server asked."""
FORGED = Elicitation(
    "Sign in, ada",
    {},
    url="https://evil.example/consent?who=ada",
    elicitation_id="visit-ada",
)
"""A URL-mode question no server asked: the one `visit` asks, sending the user elsewhere."""

Decide = Callable[[PendingCall], dict[str, Any]]


def _approve(decision: Any) -> Decide:
    return lambda pending: {"approvals": {pending.call.id: decision}}


def _external(value: Any) -> Decide:
    return lambda pending: {"external_results": {pending.call.id: value}}


def _content(pending: PendingCall, name: str) -> dict[str, Any] | None:
    """An answer's content for `pending`'s question: none for a URL-mode one."""
    question = pending.elicitation
    return None if question is not None and question.url is not None else {"name": name}


KINDS: dict[str, tuple[str, Decide]] = {
    "True": ("approval", _approve(True)),
    "False": ("approval", _approve(False)),
    "a reason": ("approval", _approve("not now")),
    "Approved()": ("approval", _approve(Approved())),
    "Approved(arguments=...)": ("approval", _approve(Approved(arguments={"a": 5, "b": 6}))),
    "pending.approve()": ("approval", lambda p: {"approvals": {p.call.id: p.approve()}}),
    "ElicitationAnswer": (
        "elicitation",
        lambda p: {"approvals": {p.call.id: ElicitationAnswer(_content(p, "Ada"))}},
    ),
    "question.answer()": (
        "elicitation",
        lambda p: {"approvals": {p.call.id: (p.elicitation or MADE_UP).answer(_content(p, "Bo"))}},
    ),
    "pending.answer()": (
        "elicitation",
        lambda p: {"approvals": {p.call.id: p.answer(_content(p, "Cy"))}},
    ),
    "an external result": ("external", _external("Hello")),
    "ToolFailed": ("external", _external(ToolFailed("no such page"))),
}
"""Every kind of decision, with what it answers and how it is given for a pending call."""

ELICITATION_KINDS = ("ElicitationAnswer", "question.answer()", "pending.answer()")

OUTCOMES = {
    ("approval", "True"): "3",
    ("approval", "False"): "The user denied the call to `add`.",
    ("approval", "a reason"): "The user denied the call to `add`: not now",
    ("approval", "Approved()"): "3",
    ("approval", "Approved(arguments=...)"): "11",
    ("approval", "pending.approve()"): "3",
    ("external", "an external result"): "Hello",
    ("external", "ToolFailed"): "no such page",
    **{
        (reason, kind): f"answer: accept {name}"
        for reason in ("mid-call", "keyed")
        for kind, name in [
            ("ElicitationAnswer", "Ada"),
            ("question.answer()", "Bo"),
            ("pending.answer()", "Cy"),
        ]
    },
    **{("url", kind): "visit: accept" for kind in ELICITATION_KINDS},
}
"""What the model reads after each decision that answers what its call waits for."""

GIVEN = {
    "approval": "an approval",
    "external": "an external result",
    "elicitation": r"an answer \(ElicitationAnswer\)",
}
WANTED = {
    "approval": "approval",
    "external": "an external result",
    "elicitation": "the answer to its question",
}


def _decisions(kind: str, pending: PendingCall) -> dict[str, Any] | str:
    """The decisions of `kind` for `pending`, or the text of the `ValueError` that making them
    raised (`pending.approve()` for a call that waits for an answer)."""
    try:
        return KINDS[kind][1](pending)
    except ValueError as error:
        return str(error)


def _given(kind: str, pending: PendingCall) -> dict[str, Any]:
    """The decisions of `kind`, one that answers what `pending` waits for."""
    decisions = _decisions(kind, pending)
    assert isinstance(decisions, dict), decisions
    return decisions


def _edited(messages: Sequence[ChatMessage], **changes: Any) -> list[ChatMessage]:
    """`messages`, the calls of the message they pause on given other `arguments=` (all have
    one call), or that message other `attributes=`, as whoever keeps the history may."""
    edited = list(messages)
    position = max(i for i, m in enumerate(edited) if isinstance(m, AiMessage))
    message = edited[position]
    assert isinstance(message, AiMessage)
    if "arguments" in changes:
        calls = [
            c.model_copy(update={"arguments": changes["arguments"]}) for c in message.tool_calls
        ]
        message = message.model_copy(update={"tool_calls": calls})
    if "attributes" in changes:
        message = message.model_copy(update={"attributes": changes["attributes"]})
    edited[position] = message
    return edited


MATCHING = {
    "approval": "True",
    "external": "an external result",
    "mid-call": "ElicitationAnswer",
    "keyed": "ElicitationAnswer",
    "url": "ElicitationAnswer",
}
"""For each reason, a bare decision that answers it: no digest of its own."""


SHOWN = {
    "approval": "pending.approve()",
    "mid-call": "pending.answer()",
    "keyed": "pending.answer()",
    "url": "pending.answer()",
}
"""For each reason whose decision may carry the digest of the call shown, a decision that does."""


def _paused_on(messages: Sequence[ChatMessage]) -> AiMessage:
    return next(m for m in reversed(messages) if isinstance(m, AiMessage))


@BY_DRIVER
@pytest.mark.parametrize("reason", REASONS)
def test_only_a_decision_of_the_kind_a_call_waits_for_proceeds(
    drive: Drive, reason: str, servers: Servers
) -> None:
    waits = WAITS_FOR[reason]
    with setting(servers, reason) as it:
        paused, pending = it.pause(drive)
        for kind, (answers, _) in KINDS.items():
            if answers == waits:
                continue
            decisions = _decisions(kind, pending)
            if isinstance(decisions, str):  # the pending call's own method refused at once
                assert (
                    decisions == f"call {it.call_id!r} ({TOOL[reason]}) waits for {WANTED[waits]}"
                )
                continue
            both = f"waits for {WANTED[waits]}, not {GIVEN[answers]}"
            it.refused(drive, paused.messages, both, **decisions)
        # A question no server asked is not an answer to the one the call waits on: a made-up
        # form, or the page the server sent the user to with another URL.
        if waits == "elicitation":
            made_up = {"approvals": {it.call_id: MADE_UP.answer({"name": "Eve"})}}
            it.refused(drive, paused.messages, "answers another question", **made_up)
            forged = {"approvals": {it.call_id: FORGED.answer()}}
            it.refused(drive, paused.messages, "answers another question", **forged)
        # Each kind that answers what the call waits for proceeds (each on a pause of its own:
        # an answer closes its question).
        matching = [kind for kind, (answers, _) in KINDS.items() if answers == waits]
        for number, kind in enumerate(matching):
            if number:
                paused, pending = it.pause(drive)
            stored = HISTORY.validate_json(HISTORY.dump_json(list(paused.messages)))
            done = drive(it.service, it.model(), stored, **_given(kind, pending))
            assert done.pending == ()
            assert done.text == f"the tool said: {OUTCOMES[reason, kind]}", kind


@BY_DRIVER
@pytest.mark.parametrize("reason", REASONS)
def test_a_call_changed_since_it_was_shown_is_refused(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason) as it:
        paused, pending = it.pause(drive)
        bare = _given(MATCHING[reason], pending)
        changed = "changed since it was shown"
        # Other arguments (bob, 250 approved; mallory, 99999 sent): refused even for a bare
        # `True`, as the record's digest is of the call that paused.
        edited = _edited(paused.messages, arguments=CHANGED[reason])
        it.refused(drive, edited, changed, **bare)
        # The call moved to another conversation (its idempotency keys, its questions).
        attributes = {**_paused_on(paused.messages).attributes, "conversation_id": "mallory-9"}
        it.refused(drive, _edited(paused.messages, attributes=attributes), changed, **bare)
        # A decision made for the call as shown, given for a changed one.
        if reason in SHOWN:
            own = _given(SHOWN[reason], pending)
            it.refused(drive, edited, changed, **own)
        # The history as it paused still resumes.
        done = drive(it.service, it.model(), paused.messages, **bare)
        assert done.pending == () and it.executed[-1].call.arguments == ARGUMENTS[reason]


@BY_DRIVER
@pytest.mark.parametrize("reason", list(SHOWN))
def test_a_decision_carrying_another_calls_digest_is_refused(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason) as it:
        # Two conversations whose models make the same call, of one id.
        first, shown = it.pause(drive)
        own = _given(SHOWN[reason], shown)
        if reason in ("mid-call", "url"):  # one question at a time waits open on a session
            drive(it.service, it.model(), first.messages, **own)
        second, pending = it.pause(drive)
        assert pending.call == shown.call and pending.digest != shown.digest
        it.refused(drive, second.messages, "not the call the decision was made for", **own)
        done = drive(it.service, it.model(), second.messages, **_given(SHOWN[reason], pending))
        assert done.pending == ()


SECRET, OTHER_SECRET = b"s" * 32, "another secret of 32 characters!"


@BY_DRIVER
@pytest.mark.parametrize("reason", REASONS)
def test_a_keyed_digest_takes_only_its_own_secret(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason, digest_secret=SECRET) as it:
        paused, pending = it.pause(drive)
        assert pending.digest is not None and pending.digest.startswith("hmac-sha256:")
        bare = _given(MATCHING[reason], pending)
        tools = it.service.tools
        for other in (ToolService(tools, digest_secret=OTHER_SECRET), ToolService(tools)):
            with pytest.raises(ValueError, match="changed since it was shown"):
                drive(other, it.model(), paused.messages, **bare)
        assert [e for e in it.executed if e.pending is None] == [] and len(it.asked) == 1
        # Whoever keeps the history cannot make a record this service takes: not by digesting
        # the edited call without the secret, nor by removing the record.
        edited = _edited(paused.messages, arguments=CHANGED[reason])
        forged = CallDigests().of(
            WAITS_FOR[reason],
            str(paused.conversation_id),
            _paused_on(edited).tool_calls[0],
            pending.elicitation,
        )
        record = {
            it.call_id: {
                **_paused_on(paused.messages).attributes["paused_calls"][it.call_id],
                "digest": forged,
            }
        }
        attributes = {**_paused_on(paused.messages).attributes, "paused_calls": record}
        it.refused(
            drive, _edited(edited, attributes=attributes), "changed since it was shown", **bare
        )
        stripped = {"conversation_id": paused.conversation_id}
        it.refused(drive, _edited(edited, attributes=stripped), "no recorded pause", **bare)
        done = drive(it.service, it.model(), paused.messages, **bare)
        assert done.pending == ()


@BY_DRIVER
@pytest.mark.parametrize("reason", ["approval", "mid-call"])
def test_a_history_from_before_the_record_keeps_the_inferred_reasons(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason) as it:
        paused, pending = it.pause(drive)
        attributes = {"conversation_id": paused.conversation_id}  # as histories were
        legacy = _edited(paused.messages, attributes=attributes)
        # The reason is inferred from the tool and the decision, as before the record; a decision
        # that carries a digest has nothing to be checked against, and is refused.
        if reason in SHOWN:
            own = _given(SHOWN[reason], pending)
            it.refused(drive, legacy, "no recorded pause", **own)
        bare = _given(MATCHING[reason], pending)
        done = drive(it.service, it.model(), legacy, **bare)
        assert done.text == f"the tool said: {OUTCOMES[reason, MATCHING[reason]]}"


@BY_DRIVER
@pytest.mark.parametrize("reason", ["mid-call", "keyed"])
def test_an_approvers_arguments_stay_the_calls_through_its_question(
    drive: Drive, reason: str, servers: Servers
) -> None:
    # `ask` held for approval (its id says so), approved with other arguments, then it asks its
    # question: the record keeps the arguments the call runs with, so the answer reaches it.
    with setting(servers, reason) as it:
        held = f"held-{it.call_id}"

        def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
            results = [m for m in messages if isinstance(m, ToolResultMessage)]
            if results:
                return AiMessage(text=f"the tool said: {results[-1].text}")
            return AiMessage(tool_calls=[ToolCall(id=held, name="ask", arguments="{}")])

        model = FunctionModel(reply)
        paused = drive(it.service, model, "go")
        (approval,) = paused.pending
        assert approval.reason == "approval"
        approved = approval.approve({"twice": True})
        asked = drive(it.service, model, paused.messages, approvals={held: approved})
        (question,) = asked.pending
        assert (question.reason, question.call.arguments) == ("elicitation", '{"twice":true}')
        recorded = _paused_on(asked.messages).attributes["paused_calls"][held]
        assert recorded["arguments"] == '{"twice":true}'
        stored = HISTORY.validate_json(HISTORY.dump_json(list(asked.messages)))
        first = {held: question.answer({"name": "Ada"})}
        again = drive(it.service, model, stored, approvals=first)
        (second,) = again.pending  # `twice`: the approver's arguments reached the server
        done = drive(
            it.service, model, again.messages, approvals={held: second.answer(action="decline")}
        )
    assert done.text == "the tool said: answer: accept Ada, decline"


# -- run-once ------------------------------------------------------------------------------------


class Bank:
    """What the tools below did, with the idempotency key of each effect."""

    def __init__(self) -> None:
        self.charged: list[tuple[str, int]] = []


bank = Bank()


@pytest.fixture(autouse=True)
def fresh_bank() -> None:
    bank.charged.clear()


@tool(requires_approval=True, sequential=True)
def charge(amount: int, ctx: ToolContext[None]) -> str:
    """Charge the customer."""
    bank.charged.append((ctx.idempotency_key, amount))
    return f"charged {amount}"


@tool(requires_approval=True, sequential=True, max_retries=0)
def refund(amount: int) -> str:
    """Refund the customer (it always fails)."""
    raise ModelRetry("the refund service is down")


@tool
def lookup(ctx: ToolContext[None]) -> str:
    """Look the customer up."""
    bank.charged.append((ctx.idempotency_key, 0))
    return "found"


def scripted(*rounds: Sequence[ToolCall]) -> FunctionModel:
    """A model making each round of calls in turn once it has results, then saying so."""

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        made = sum(1 for m in messages if isinstance(m, AiMessage) and m.tool_calls)
        if made < len(rounds):
            return AiMessage(tool_calls=list(rounds[made]))
        return AiMessage(text="done")

    return FunctionModel(reply)


def calling(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments))


@BY_DRIVER
def test_a_decision_given_again_runs_nothing_again(drive: Drive) -> None:
    service, model = ToolService([charge]), scripted([calling("c1", "charge", amount=5)])
    paused = drive(service, model, "charge 5")
    stored = HISTORY.dump_json(list(paused.messages))
    done = drive(service, model, HISTORY.validate_json(stored), approvals={"c1": True})
    assert done.text == "done" and len(bank.charged) == 1
    # The same decision on the history that now has the call's result: refused.
    with pytest.raises(ValueError, match=r"no pending call has the id\(s\) 'c1'"):
        drive(service, model, done.messages, approvals={"c1": True})
    assert len(bank.charged) == 1
    # The same paused history resumed a second time (by a second caller, with no store between
    # them): the loop cannot tell, and the call runs again, with the same idempotency key.
    again = drive(service, model, HISTORY.validate_json(stored), approvals={"c1": True})
    assert again.conversation_id == done.conversation_id == paused.conversation_id
    assert bank.charged[1] == bank.charged[0]


@BY_DRIVER
def test_a_resume_retried_after_a_failure_mid_round_runs_nothing_again(drive: Drive) -> None:
    service = ToolService([charge, refund])
    model = scripted([calling("c1", "charge", amount=5), calling("c2", "refund", amount=5)])
    paused = drive(service, model, "charge, then refund")
    assert [p.call.id for p in paused.pending] == ["c1", "c2"]
    approvals = {"c1": True, "c2": True}
    with pytest.raises(ToolExecutionError) as failed:
        drive(service, model, paused.messages, approvals=approvals)
    assert len(bank.charged) == 1
    # The failed run's history answers every call of its round: the same decisions again are
    # refused, and resuming it goes on from the model without running either call again.
    with pytest.raises(ValueError, match="no pending call"):
        drive(service, model, failed.value.messages, approvals=approvals)
    done = drive(service, model, failed.value.messages)
    assert done.text == "done" and len(bank.charged) == 1


def _answered(messages: Sequence[ChatMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolResultMessage)]


@BY_DRIVER
@pytest.mark.parametrize("reason", ["mid-call", "keyed"])
def test_a_question_answered_twice_reaches_its_request_once(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason) as it:
        paused, _ = it.pause(drive)
        answer = {"approvals": {it.call_id: ElicitationAnswer({"name": "Ada"})}}
        done = drive(it.service, it.model(), paused.messages, **answer)
        assert _answered(done.messages) == ["answer: accept Ada"]
        again = drive(it.service, it.model(), paused.messages, **answer)
    # The question was answered: the second answer finds it closed and sends nothing.
    assert _answered(again.messages) == [
        "Tool `ask` failed: the server's question is no longer open (its session ended, or the "
        "program restarted); call the tool again"
    ]
    assert again.conversation_id == done.conversation_id


@BY_DRIVER
def test_a_keyed_answer_that_carries_its_question_given_twice_keeps_its_key(
    drive: Drive, servers: Servers
) -> None:
    # An answer that carries its keyed question can be sent from any process: the loop cannot
    # tell a second one from the first (no store between them), and sends it. The call keeps its
    # conversation, so an `idempotency_key_meta` server sees one key for both.
    with setting(servers, "keyed") as it:
        paused, pending = it.pause(drive)
        answer = {"approvals": {it.call_id: pending.answer({"name": "Ada"})}}
        done = drive(it.service, it.model(), paused.messages, **answer)
        again = drive(it.service, it.model(), paused.messages, **answer)
    assert _answered(done.messages) == _answered(again.messages) == ["answer: accept Ada"]
    assert again.conversation_id == done.conversation_id == paused.conversation_id


@BY_DRIVER
@pytest.mark.parametrize("reason", ["mid-call", "keyed"])
def test_an_undecided_question_is_held_again_never_sent_again(
    drive: Drive, reason: str, servers: Servers
) -> None:
    with setting(servers, reason) as it:
        q, a = it.call_id, f"{it.call_id}a"

        def both(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
            results = [m for m in messages if isinstance(m, ToolResultMessage)]
            if len(results) == 2:
                return AiMessage(text="; ".join(sorted(r.text for r in results)))
            ask = ToolCall(id=q, name="ask", arguments="{}")
            return AiMessage(tool_calls=[ask, calling(a, "add", a=1, b=2)])

        model = FunctionModel(both)
        paused = drive(it.service, model, "go")
        waiting = {p.call.id: p for p in paused.pending}
        assert [waiting[q].reason, waiting[a].reason] == ["elicitation", "approval"]
        # Only the approval is given: the question stays the one the call paused on, with its
        # first request still open (a second one would have its question declined).
        later = drive(it.service, model, paused.messages, approvals={a: True})
        assert later.pending == (waiting[q],)
        assert [e.call.id for e in it.executed if e.pending is None] == [a]
        answer = waiting[q].answer({"name": "Ada"})
        done = drive(it.service, model, later.messages, approvals={q: answer})
    assert done.text == "3; answer: accept Ada"


class BrokenOff:
    """A model whose stream fails as an overloaded provider's does (503), after its first event:
    a tool call begun."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("streamed only")

    async def achat(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("streamed only")

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield ToolCallDelta(index=0, id="c9", name="charge", arguments_delta='{"amount": 9')
        raise ModelError("overloaded", 503)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self.stream(request):
            yield event


@BY_DRIVER
def test_a_fallback_that_switches_models_after_a_tool_ran_runs_it_once(drive: Drive) -> None:
    answers: list[str] = []

    def primary(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if any(isinstance(m, ToolResultMessage) for m in messages):
            raise ModelError("overloaded", 503)  # the second request: the fallback answers
        return AiMessage(tool_calls=[calling("c1", "lookup")])

    def fallback(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        answers.append("fallback")
        return AiMessage(text="the customer was found")

    model = FallbackModel(FunctionModel(primary), FunctionModel(fallback))
    done = drive(ToolService([lookup]), model, "find them")
    assert done.text == "the customer was found" and answers == ["fallback"]
    assert len(bank.charged) == 1  # the tool ran once, before the switch


@pytest.mark.parametrize("drive", [_stream, _astream], ids=["stream", "astream"])
def test_a_stream_that_fails_after_a_call_began_runs_nothing(drive: Drive) -> None:
    model = FallbackModel(BrokenOff(), FunctionModel(lambda m, p: AiMessage(text="no")))
    with pytest.raises(ModelError) as failed:
        drive(ToolService([charge]), model, "charge 9")
    # Past its first event a stream cannot fall back; the call it began never entered the run.
    assert bank.charged == [] and not any(
        isinstance(m, AiMessage) and m.tool_calls for m in failed.value.messages
    )


# -- coverage ------------------------------------------------------------------------------------


def test_covers_every_surface() -> None:
    durable = []
    for module, test in DURABLE.items():
        pytest.importorskip("temporalio")
        assert callable(getattr(importlib.import_module(module), test, None)), (module, test)
        durable.append("temporal")
    assert_covers("decision kind and digest", "driver", [*DRIVERS, *durable])
    # The durable driver's run-once checks are test_conformance_once.py's.
    assert_covers("run-once", "driver", [*DRIVERS, "temporal"])
