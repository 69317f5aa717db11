"""Scoped: what outlives a call belongs to its conversation. Two conversations interleaved on one
shared `ToolService` and one shared `MCPServer`, whose models make the very same call (id, tool,
arguments), under every driver and both kinds of MCP revision: questions, answers, the server's
state, open calls and idempotency keys never cross, and each conversation gets its own data back.

The server is tests/mcp_fixture_server.py over stdio; its `account` tool asks the user's name,
then again to confirm, and says both answers with the idempotency key the call carries (what it
would look the user's account up by). At the stateless revision (2026-07-28) the answers go back
with the server's state, so both conversations pause at once and answer in turns, bare or
carrying their question; under `achat`/`astream` each pair of steps runs concurrently. At a
handshake revision a question asked mid-call cannot be told apart from another call's: while one
conversation's request waits open, the other's question is declined (its result says so, with
its own key), and it asks again once nothing else is in flight. The durable driver runs the
same interleaving as two workflows on one worker (test_temporal_mcp.py). A URL-mode question
that fails the call (-32042, tests/mcp_raw_server.py) pauses each conversation on its own: one's
answer sends its call again, never the other's.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import postgres_server
import pytest

pytest.importorskip("mcp")

import store_support
from conformance import STORE, Surface, assert_covers
from loop_drivers import DRIVERS, drive
from store_support import Opener
from test_mcp import FIXTURE_SERVER
from test_mcp import errlog as errlog  # the fixture
from test_mcp_url_and_tasks import RAN, Raw

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ElicitationAnswer,
    FinalResultEvent,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UserMessage,
)
from agentforge_typed.tools._scope import _REGISTRY
from agentforge_typed.tools.mcp._session import Revision

# The fixtures these tests share (see `store_support`, `postgres_server`).
opener = store_support.opener
postgres = postgres_server.postgres

KEY_META = "example.com/idempotency-key"


def account(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Every conversation's model: on a user's message, the same call; then what it read."""
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=messages[-1].text)
    return AiMessage(tool_calls=[ToolCall(id="call_0", name="account", arguments="{}")])


MODEL = FunctionModel(account)


def kept(conversation_id: str | None) -> int:
    assert conversation_id is not None
    with _REGISTRY.lock:
        entries = _REGISTRY.conversations.get(conversation_id)
        return 0 if entries is None else len(entries)


class User:
    """One side: the user's name and their conversation's latest result."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.result: ToolChatResult[Any] | None = None
        self.seen: list[str] = []
        """Every question and result text this user was shown."""
        self.keys: set[str] = set()
        """The idempotency keys of their conversation's calls."""

    @property
    def last(self) -> ToolChatResult[Any]:
        assert self.result is not None
        return self.result

    def key(self, call_id: str = "call_0") -> str:
        """The idempotency key of this conversation's call `call_id`."""
        context = ToolContext(None, call_id, "account", conversation_id=self.last.conversation_id)
        return context.idempotency_key

    def step(self, carried: bool | None = None, answer: str = "") -> tuple[Any, dict[str, Any]]:
        """The next run's messages and options: the first message, or the answer to the
        question the last run paused on (`carried`: made with `.answer(...)`)."""
        if carried is None:
            history = [] if self.result is None else list(self.result.messages)
            return [*history, UserMessage(content=f"I am {self.name}")], {}
        (pending,) = self.last.pending
        question = pending.elicitation
        assert question is not None
        decision = (
            question.answer({"name": answer}) if carried else ElicitationAnswer({"name": answer})
        )
        return self.last.messages, {"approvals": {pending.call.id: decision}}

    def took(self, result: ToolChatResult[Any]) -> None:
        self.result = result
        for pending in result.pending:
            assert pending.elicitation is not None
            self.seen.append(pending.elicitation.message)
        self.seen += [e.result.text for e in result.tool_executions]
        self.keys |= {self.key(e.call.id) for e in result.tool_executions}
        self.keys |= {self.key(p.call.id) for p in result.pending}


async def _adrive(driver: str, service: ToolService[None], prompt: Any, **kw: Any) -> Any:
    if driver == "achat":
        return await service.achat(MODEL, prompt, **kw)
    last = [event async for event in service.astream(MODEL, prompt, **kw)][-1]
    assert isinstance(last, FinalResultEvent)
    return last.result


def both(driver: str, service: ToolService[None], *steps: tuple[User, tuple[Any, Any]]) -> None:
    """Run each user's step: under the async drivers concurrently, else in turns."""
    if driver in ("achat", "astream"):

        async def together() -> list[Any]:
            runs = [_adrive(driver, service, prompt, **kw) for _, (prompt, kw) in steps]
            return await asyncio.gather(*runs)

        results = asyncio.run(together())
    else:
        results = [drive(driver, service, MODEL, prompt, **kw) for _, (prompt, kw) in steps]
    for (user, _), result in zip(steps, results, strict=True):
        user.took(result)


def one(driver: str, service: ToolService[None], user: User, step: tuple[Any, Any]) -> None:
    prompt, kw = step
    user.took(drive(driver, service, MODEL, prompt, **kw))


def server(errlog: TextIO, revision: Revision) -> MCPServer:
    return MCPServer.stdio(
        sys.executable,
        [FIXTURE_SERVER],
        errlog=errlog,
        revision=revision,
        idempotency_key_meta=KEY_META,
    )


def answered(driver: str, service: ToolService[None], user: User) -> None:
    """Answer each question `user`'s run pauses on with their own name (confirmed the second
    time), carrying the question and bare in turns, until it ends."""
    carried = False
    while user.last.pending:
        (pending,) = user.last.pending
        assert pending.elicitation is not None
        again = ", again" if pending.elicitation.message.startswith("Your name again") else ""
        carried = not carried
        one(driver, service, user, user.step(carried=carried, answer=user.name + again))


def said(user: User, again: str = ", again") -> str:
    """What `account` says to `user` for their conversation's last call."""
    call_id = user.last.tool_executions[-1].call.id
    name = user.name
    return f"account: accept {name}, accept {name}{again}; key {user.key(call_id)}"


def never_crossed(ada: User, bob: User) -> None:
    assert ada.last.conversation_id != bob.last.conversation_id
    assert not ada.keys & bob.keys
    for user, other in ((ada, bob), (bob, ada)):
        for text in user.seen:
            crossed = other.name in text or any(key in text for key in other.keys)
            assert not crossed, (user.name, text)
        assert kept(user.last.conversation_id) == 0  # nothing left open


@pytest.mark.parametrize("driver", DRIVERS)
def test_two_conversations_at_the_stateless_revision_never_cross(
    errlog: TextIO, driver: str
) -> None:
    ada, bob = User("Ada"), User("Bob")
    with server(errlog, "newest") as mcp:
        service = ToolService([mcp])
        both(driver, service, (ada, ada.step()), (bob, bob.step()))
        for user in (ada, bob):  # the same call, paused on the same question, in each
            (pending,) = user.last.pending
            assert (pending.call.id, pending.call.name) == ("call_0", "account")
            assert pending.elicitation is not None and pending.elicitation.key is not None
        # Ada's second question is asked, then Bob answers his first: neither answer may go out
        # with the other's server state (which holds the other's first answer).
        one(driver, service, ada, ada.step(carried=False, answer="Ada"))
        one(driver, service, bob, bob.step(carried=True, answer="Bob"))
        both(
            driver,
            service,
            (bob, bob.step(carried=False, answer="Bob, again")),
            (ada, ada.step(carried=True, answer="Ada, again")),
        )
    assert (ada.last.text, bob.last.text) == (said(ada), said(bob))
    never_crossed(ada, bob)


@pytest.mark.parametrize("driver", DRIVERS)
def test_two_conversations_at_a_handshake_revision_never_cross(errlog: TextIO, driver: str) -> None:
    ada, bob = User("Ada"), User("Bob")
    with server(errlog, "handshake") as mcp:
        service = ToolService([mcp])
        # In turns, Ada's request waits open for her answer when Bob's server asks; at once
        # (`achat`, `astream`), both calls may be in flight when either is asked. Which call a
        # question belongs to, the protocol does not say: such a question is declined, and its
        # call ends with that conversation's own key.
        both(driver, service, (ada, ada.step()), (bob, bob.step()))
        if driver in ("chat", "stream"):
            assert len(ada.last.pending) == 1 and bob.last.pending == ()
        for user in (ada, bob):
            answered(driver, service, user)
            if user.last.text == f"account: decline, decline; key {user.key()}":
                # Asked again once nothing else is in flight: the same call, as the model sees it.
                one(driver, service, user, user.step())
                answered(driver, service, user)
    assert (ada.last.text, bob.last.text) == (said(ada), said(bob))
    never_crossed(ada, bob)


class StoredUser(User):
    """A user whose conversation lives in the service's store: each step sends only the new
    message, or only the decision, under the conversation's id."""

    def step(self, carried: bool | None = None, answer: str = "") -> tuple[Any, dict[str, Any]]:
        _, options = super().step(carried, answer)
        options["conversation_id"] = f"conversation of {self.name}"
        return (f"I am {self.name}" if carried is None else None), options


def restarted() -> None:
    """Forget what this process keeps between runs, as a restart would: only the store knows."""
    for drop in _REGISTRY.clear():
        drop()


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("surface", STORE.each("scoped"))
def test_two_stored_conversations_on_one_store_never_cross(
    errlog: TextIO, driver: str, opener: Opener, surface: Surface[Any]
) -> None:
    """The stateless interleaving with one store behind the shared service, and a restart
    before each step: the questions, answers (bare ones too: the stored pause records the
    question) and keys of each conversation stay its own, in its own record."""
    ada, bob = StoredUser("Ada"), StoredUser("Bob")
    store = opener()
    with server(errlog, "newest") as mcp:
        service = ToolService([mcp], store=store)
        both(driver, service, (ada, ada.step()), (bob, bob.step()))
        restarted()
        one(driver, service, ada, ada.step(carried=False, answer="Ada"))
        restarted()
        one(driver, service, bob, bob.step(carried=False, answer="Bob"))
        restarted()
        both(
            driver,
            service,
            (bob, bob.step(carried=False, answer="Bob, again")),
            (ada, ada.step(carried=True, answer="Ada, again")),
        )
    assert (ada.last.text, bob.last.text) == (said(ada), said(bob))
    never_crossed(ada, bob)
    for user, other in ((ada, bob), (bob, ada)):
        stored = store.load(f"conversation of {user.name}")
        assert stored is not None and stored.messages == tuple(user.last.messages)
        record = repr(stored)
        assert other.name not in record
        assert not any(key in record for key in other.keys)


@pytest.mark.parametrize("driver", DRIVERS)
def test_two_conversations_failed_for_the_same_url_question_keep_their_own(
    tmp_path: Path, driver: str
) -> None:
    """The same call in two conversations, each failed by the server with a URL-mode question
    (-32042): each pauses on its own; one accepts (its call is sent again), the other declines
    (its call is not), and nothing is left kept."""
    question = {
        "mode": "url",
        "message": "Connect first",
        "url": "https://auth.example.com/connect",
        "elicitationId": "e-1",
    }
    failed = {"code": -32042, "message": "URL elicitation required"}
    required = {"error": {**failed, "data": {"elicitations": [question]}}}
    listed = {"name": "account", "inputSchema": {"type": "object"}}
    raw = Raw(tmp_path, {"account": [required, required, {"result": RAN}]}, tools=[listed])
    with raw.server() as mcp:
        service: ToolService[None] = ToolService([mcp])
        ada = drive(driver, service, MODEL, "I am Ada", conversation_id="conversation-ada")
        bob = drive(driver, service, MODEL, "I am Bob", conversation_id="conversation-bob")
        for paused in (ada, bob):
            (pending,) = paused.pending
            assert pending.elicitation is not None and pending.elicitation.url is not None
        # Bob's decline is his own: Ada's pause stays, and her acceptance sends her call alone.
        declined = ElicitationAnswer(action="decline")
        bob_done = drive(driver, service, MODEL, bob.messages, approvals={"call_0": declined})
        accepted = {"call_0": ada.pending[0].answer()}
        ada_done = drive(driver, service, MODEL, ada.messages, approvals=accepted)
    assert ada_done.text == "ran"
    assert bob_done.text is not None and "the user declined it" in bob_done.text
    assert len(raw.requests("tools/call")) == 3  # the two first tries and Ada's again
    assert kept(ada.conversation_id) == kept(bob.conversation_id) == 0


COVERED = {*DRIVERS, "temporal"}
"""The durable driver's: `test_two_durable_conversations_never_cross` in test_temporal_mcp.py
(two workflows on one worker, at the stateless revision, as a durable answer always carries its
question)."""


def test_covers_every_surface() -> None:
    assert_covers("scoping", "driver", COVERED)


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    for drop in _REGISTRY.clear():
        drop()
