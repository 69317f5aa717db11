"""Runs that keep their conversation in a store (`ToolService(store=...)`, `conversation_id=`),
under each driver, on real SQLite files (and `MemoryStore`): the stored history continued,
a paused run resumed without new input by another service on the same file, the saves at every
round boundary (seen from inside the tools), history processors and output types unchanged,
every refusal made before anything runs and with the claim given back, a failed run's history
saved, a lost claim ending the run, and calls interrupted in this process (a cancelled run, an
interrupt inside a tool) settled by the next run. Across processes, with `kill -9` and on
PostgreSQL too: tests/conformance/test_conformance_stores.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive
from pydantic import BaseModel
from store_support import raw

from agentforge_typed import (
    AiMessage,
    Approved,
    ChatMessage,
    ChatRequestParameters,
    FinalResultEvent,
    FunctionModel,
    ModelError,
    SystemMessage,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UserMessage,
    keep_last_rounds,
    tool,
)
from agentforge_typed.stores import (
    ConversationConflictError,
    ConversationStore,
    ConversationStoreError,
    MemoryStore,
    SQLiteStore,
    store_from_url,
)

RUNNING: list[dict[str, Any]] = []
"""What each tool call found stored while it ran."""
STORE: list[ConversationStore] = []
"""The store of the test's service, for the tools to read."""
RAN: list[str] = []
"""Every tool call that ran, as `name arguments key`."""


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    RUNNING.clear()
    RAN.clear()
    yield
    STORE.clear()


def _seen(context: ToolContext[None]) -> None:
    assert context.conversation_id is not None
    stored = STORE[0].load(context.conversation_id)
    assert stored is not None
    RUNNING.append({"state": dict(stored.state), "messages": stored.messages})


def _ran(context: ToolContext[None], order: int, result: str) -> str:
    _seen(context)
    RAN.append(f"{context.tool_name} {order} {context.idempotency_key}")
    return result


@tool(sequential=True)
def lookup(order: int, context: ToolContext[None]) -> str:
    """Look an order up.

    Args:
        order: The order number.
    """
    return _ran(context, order, f"order {order} shipped")


@tool(requires_approval=True, sequential=True)
def refund(order: int, context: ToolContext[None]) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return _ran(context, order, f"refunded {order}")


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Asked `tool order...`, it calls `tool` once per order; given results, it says them."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        texts: list[str] = []
        for message in reversed(messages):
            if not isinstance(message, ToolResultMessage):
                break
            texts.insert(0, message.text)
        return AiMessage(text="; ".join(texts))
    assert isinstance(last, UserMessage) and isinstance(last.content, str)
    name, *orders = last.content.split()
    if name == "hi":
        return AiMessage(text=f"hello ({len(messages)} messages)")
    calls = [
        ToolCall(id=f"call_{i}", name=name, arguments=json.dumps({"order": int(order)}))
        for i, order in enumerate(orders)
    ]
    return AiMessage(tool_calls=calls)


class Model(FunctionModel):
    """`script`, counting its calls and keeping what each was sent."""

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.sent: list[Sequence[ChatMessage]] = []

    def _answer(self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> Any:
        self.sent.append(messages)
        return script(messages, parameters)


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    made = (
        SQLiteStore(tmp_path / "conversations.db") if request.param == "sqlite" else MemoryStore()
    )
    STORE.append(made)
    yield made
    made.close()


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SQLiteStore]:
    made = SQLiteStore(tmp_path / "conversations.db")
    STORE.append(made)
    yield made
    made.close()


def service(store: ConversationStore | str, **options: Any) -> ToolService[None]:
    return ToolService([lookup, refund], store=store, **options)


def free(store: ConversationStore, conversation_id: str = "c") -> None:
    """The conversation is not claimed: a claim succeeds at once (and is given back)."""
    store.release(store.claim(conversation_id))


# -- continuing and resuming ---------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_conversation_continues_from_its_stored_history(
    store: ConversationStore, driver: str
) -> None:
    model, runs = Model(), service(store)
    first = drive(
        driver,
        runs,
        model,
        [SystemMessage(text="terse"), UserMessage(content="hi")],
        conversation_id="c",
    )
    assert first.text == "hello (2 messages)"
    second = drive(driver, runs, model, "hi", conversation_id="c")
    assert second.text == "hello (4 messages)"
    assert model.sent[-1] == (*first.messages, UserMessage(content="hi"))
    assert second.messages == (*first.messages, UserMessage(content="hi"), second.messages[-1])
    assert second.conversation_id == "c"
    stored = store.load("c")
    assert stored is not None and stored.messages == tuple(second.messages)
    assert stored.state == {"format": 1, "running": {}}
    free(store)


@pytest.mark.parametrize("nothing", [None, []], ids=["None", "empty"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_paused_run_resumes_without_new_input_in_another_service_on_the_same_file(
    tmp_path: Path, driver: str, nothing: list[ChatMessage] | None
) -> None:
    # No new input is `None`, or no messages at all (a UI sends the new messages it has: none).
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    first_store = store_from_url(url)
    STORE.append(first_store)
    first = drive(driver, service(first_store), Model(), "refund 42", conversation_id="c-17")
    (pending,) = first.pending
    first_store.close()
    # Later, elsewhere: a new store on the same file, a new service, and only the decision.
    later = store_from_url(url)
    STORE[:] = [later]
    model = Model()
    done = drive(
        driver,
        service(later),
        model,
        nothing,
        conversation_id="c-17",
        approvals={pending.call.id: True},
    )
    assert done.text == "refunded 42" and done.pending == ()
    assert RAN == [f"refund 42 {_key('c-17', pending.call.id)}"]
    assert done.messages[: len(first.messages)][:-1] == first.messages[:-1]
    stored = later.load("c-17")
    assert stored is not None and stored.messages == tuple(done.messages)
    later.close()


def test_a_run_without_a_store_loads_no_store_machinery() -> None:
    code = (
        "import sys\n"
        "from agentforge_typed import AiMessage, FunctionModel, ToolService\n"
        "ToolService().chat(FunctionModel(lambda m, p: AiMessage(text='hi')), 'hi')\n"
        "loaded = [m for m in ('agentforge_typed.stores', 'agentforge_typed.loop._persistence')\n"
        "          if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _key(conversation_id: str, call_id: str) -> str:
    return ToolContext(None, call_id, "refund", conversation_id=conversation_id).idempotency_key


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_round_boundary_is_saved_before_a_call_runs(sqlite: SQLiteStore, driver: str) -> None:
    """Each call finds the history saved with its model answer (and the results before it) and
    itself named as running; the run ends saved with nothing running."""
    result = drive(driver, service(sqlite), Model(), "lookup 1 2", conversation_id="c")
    assert result.text == "order 1 shipped; order 2 shipped"
    first, second = RUNNING
    answer = result.messages[1]
    assert isinstance(answer, AiMessage)
    one, two = (call.id for call in answer.tool_calls)
    assert first["state"] == {"format": 1, "running": {one: None}}
    assert first["messages"] == tuple(result.messages[:2])
    assert second["state"] == {"format": 1, "running": {two: None}}
    assert second["messages"] == tuple(result.messages[:3])  # the first result saved first
    stored = sqlite.load("c")
    assert stored is not None and stored.messages == tuple(result.messages)
    assert stored.state == {"format": 1, "running": {}}
    assert stored.version == 4  # two before the calls, one after the round, one at the end


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_approver_s_arguments_are_saved_with_the_running_call(
    sqlite: SQLiteStore, driver: str
) -> None:
    runs = service(sqlite)
    first = runs.chat(Model(), "refund 42", conversation_id="c")
    (pending,) = first.pending
    approvals = {pending.call.id: Approved({"order": 43})}
    done = drive(driver, runs, Model(), None, conversation_id="c", approvals=approvals)
    assert done.text == "refunded 43"
    (seen,) = RUNNING
    assert seen["state"]["running"] == {pending.call.id: '{"order":43}'}


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_whole_history_is_stored_and_what_is_sent_is_processed(
    sqlite: SQLiteStore, driver: str
) -> None:
    model = Model()
    runs = service(sqlite, history_processors=[keep_last_rounds(1)])
    for prompt in ("lookup 1", "lookup 2", "lookup 3"):
        result = drive(driver, runs, model, prompt, conversation_id="c")
    stored = sqlite.load("c")
    assert stored is not None and len(stored.messages) == 12 == len(result.messages)
    assert all(len(sent) < 12 for sent in model.sent)
    assert model.sent[-1][0] == UserMessage(content="lookup 1")  # the start, kept
    assert UserMessage(content="lookup 2") not in model.sent[-1]


class Order(BaseModel):
    order: int
    status: str


def _structured(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage) and messages[-1].tool_name == "lookup":
        arguments = json.dumps({"order": 7, "status": messages[-1].text})
        return AiMessage(tool_calls=[ToolCall(id="out", name="final_result", arguments=arguments)])
    return script(messages, parameters)


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_output_type_works_with_a_store(sqlite: SQLiteStore, driver: str) -> None:
    result = drive(
        driver,
        service(sqlite),
        FunctionModel(_structured),
        "lookup 7",
        conversation_id="c",
        output_type=Order,
    )
    assert result.output == Order(order=7, status="order 7 shipped")
    stored = sqlite.load("c")
    assert stored is not None and stored.messages == tuple(result.messages)
    assert stored.state == {"format": 1, "running": {}}  # the output tool ran nothing


def test_a_store_is_given_as_a_url_or_set_later(tmp_path: Path) -> None:
    runs = ToolService([lookup], store=f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(runs.store, SQLiteStore)
    runs.store.close()
    runs.store = "memory:"
    assert isinstance(runs.store, MemoryStore)
    runs.store = None
    assert runs.store is None
    with pytest.raises(TypeError, match="ConversationStore or a store URL, not int"):
        ToolService(store=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a store URL"):
        ToolService(store="redis://x")


# -- refused before anything runs ----------------------------------------------------------------


class Refusing(FunctionModel):
    """A model that must not be called."""

    def __init__(self) -> None:
        super().__init__(self._answer)

    def _answer(self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> Any:
        raise AssertionError("the model was called")


@pytest.mark.parametrize("driver", DRIVERS)
def test_messages_are_required_unless_a_stored_conversation_is_resumed(driver: str) -> None:
    with pytest.raises(TypeError, match="messages is required: a run resumes without new input"):
        drive(driver, ToolService([lookup]), Refusing(), None, conversation_id="c")
    with pytest.raises(TypeError, match="messages is required"):
        drive(driver, ToolService([lookup], store=MemoryStore()), Refusing(), None)


@pytest.mark.parametrize("driver", DRIVERS)
def test_resuming_a_conversation_with_no_history_is_refused(
    store: ConversationStore, driver: str
) -> None:
    nothings: list[list[ChatMessage] | None] = [None, []]
    for nothing in nothings:
        with pytest.raises(ValueError, match="conversation 'new' has no stored history to resume"):
            drive(driver, service(store), Refusing(), nothing, conversation_id="new")
    assert store.load("new") is None
    free(store, "new")


@pytest.mark.parametrize("driver", DRIVERS)
def test_new_input_while_calls_wait_is_refused_and_the_claim_given_back(
    store: ConversationStore, driver: str
) -> None:
    first = service(store).chat(Model(), "refund 42", conversation_id="c")
    (pending,) = first.pending
    before = store.load("c")
    with pytest.raises(ValueError, match=rf"waits on call '{pending.call.id}': resume it without"):
        drive(driver, service(store), Refusing(), "lookup 1", conversation_id="c")
    with pytest.raises(ValueError, match="no pending call has the id"):
        drive(driver, service(store), Refusing(), None, conversation_id="c", approvals={"x": True})
    after = store.load("c")
    assert before is not None and after is not None and after.version == before.version
    free(store)
    assert RAN == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_run_is_refused_at_once_while_another_holds_the_conversation(
    store: ConversationStore, driver: str
) -> None:
    held = store.claim("c")
    with pytest.raises(ConversationConflictError, match="held by another run") as refused:
        drive(driver, service(store), Refusing(), "hi", conversation_id="c")
    assert refused.value.messages == ()
    store.release(held)
    assert store.load("c") is None


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ({"format": 2, "running": {}}, "saved by a newer agentforge_typed .*format 2"),
        (
            {"format": 1, "running": ["call_1"]},
            "is corrupt: its loop state is not one a run writes",
        ),
        ({"format": 1, "running": {}, "more": 1}, "is corrupt"),
        ({"format": True, "running": {}}, "is corrupt"),
        ({"running": {}}, "is corrupt"),
        ({"format": 1, "running": {"call_1": 5}}, "is corrupt"),
    ],
)
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_state_this_version_did_not_write_is_refused_before_anything_runs(
    store: ConversationStore, driver: str, state: dict[str, Any], problem: str
) -> None:
    claim = store.claim("c")
    store.release(store.save(claim, [UserMessage(content="hi")], state))
    with pytest.raises(ConversationStoreError, match=problem):
        drive(driver, service(store), Refusing(), "hi", conversation_id="c")
    free(store)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_record_too_large_or_corrupt_is_refused_before_anything_runs(
    tmp_path: Path, driver: str
) -> None:
    path = tmp_path / "conversations.db"
    big = SQLiteStore(path)
    big.release(big.save(big.claim("big"), [UserMessage(content="x" * 5000)]))
    big.release(big.save(big.claim("bad"), [UserMessage(content="hi")]))
    big.close()
    with raw(f"sqlite:///{path}") as execute:
        execute("UPDATE agentforge_conversations SET messages = ? WHERE id = 'bad'", b"[{]")
    small = SQLiteStore(path, max_record_bytes=4096)
    try:
        with pytest.raises(ConversationStoreError, match="over max_record_bytes=4,096"):
            drive(driver, service(small), Refusing(), "hi", conversation_id="big")
        with pytest.raises(ConversationStoreError, match="is corrupt"):
            drive(driver, service(small), Refusing(), "hi", conversation_id="bad")
        for conversation_id in ("big", "bad"):  # nothing stays claimed
            listed = {info.id: info for info in small.list().conversations}
            assert listed[conversation_id].claimed_until is None
    finally:
        small.close()


# -- ends ----------------------------------------------------------------------------------------


def _failing_second(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters
) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        raise ModelError("the provider is down", status_code=503)
    return script(messages, parameters)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_failed_run_saves_the_history_its_error_carries(sqlite: SQLiteStore, driver: str) -> None:
    with pytest.raises(ModelError) as failed:
        drive(
            driver, service(sqlite), FunctionModel(_failing_second), "lookup 1", conversation_id="c"
        )
    assert len(failed.value.messages) == 3
    stored = sqlite.load("c")
    assert stored is not None and stored.messages == failed.value.messages
    assert stored.state == {"format": 1, "running": {}}
    free(sqlite)


@tool(sequential=True)
def forget(order: int, context: ToolContext[None]) -> str:
    """Delete this conversation from the store, behind the run's back.

    Args:
        order: The order number.
    """
    assert context.conversation_id is not None
    STORE[0].delete(context.conversation_id)
    return "forgotten"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_run_whose_claim_was_lost_ends_with_the_conflict_and_saves_nothing_more(
    store: ConversationStore, driver: str
) -> None:
    runs = ToolService([forget], store=store)
    with pytest.raises(ConversationConflictError) as lost:
        drive(driver, runs, Model(), "forget 1", conversation_id="c")
    assert [m.role for m in lost.value.messages] == ["user", "assistant", "tool"]
    assert store.load("c") is None  # nothing saved after the loss
    free(store)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_last_save_that_fails_ends_the_run_with_its_error_carrying_the_history(
    driver: str,
) -> None:
    # The answer outgrows the record's cap: the run had no error, so the save's is its error.
    store = MemoryStore(max_record_bytes=2_000)
    long_answer = FunctionModel(lambda messages, parameters: AiMessage(text="x" * 3_000))
    with pytest.raises(ConversationStoreError, match="over max_record_bytes") as refused:
        drive(driver, service(store), long_answer, "hi", conversation_id="c")
    assert [m.role for m in refused.value.messages] == ["user", "assistant"]
    loaded = store.load("c")
    assert loaded is None or loaded.messages == ()  # nothing of the refused save was written
    free(store)  # released all the same


def _audit_down(execution: Any) -> None:
    raise RuntimeError("audit down")


@tool(sequential=True)
def dump(order: int, context: ToolContext[None]) -> str:
    """Dump an order's log.

    Args:
        order: The order number.
    """
    return f"log of {order}: " + "y" * 3_000


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_failed_run_whose_last_save_fails_keeps_its_own_error(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The save naming the call fits; the history with its result, which the failed run's last
    # save holds, does not: the run's own error goes on (carrying that history), the save's is
    # logged, and the stored conversation still names the call as running (its result unsaved).
    store = MemoryStore(max_record_bytes=2_000)
    runs = ToolService([dump], store=store, after_tool_call=_audit_down)
    with pytest.raises(RuntimeError, match="audit down") as failed:
        drive(driver, runs, Model(), "dump 1", conversation_id="c")
    assert [m.role for m in failed.value.messages] == ["user", "assistant", "tool"]  # type: ignore[attr-defined]
    assert "could not save the history of the failed run on conversation 'c'" in caplog.text
    assert "over max_record_bytes=2,000" in caplog.text
    stored = store.load("c")
    assert stored is not None and stored.state == {"format": 1, "running": {"call_0": None}}
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    free(store)


class _Unreleasable(MemoryStore):
    """A memory store whose releases fail (an unreachable database, say)."""

    def release(self, claim: Any) -> None:
        raise ConversationStoreError("the store is unreachable", claim.conversation_id)

    async def arelease(self, claim: Any) -> None:
        self.release(claim)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_release_that_fails_is_logged_and_the_claim_lapses(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = _Unreleasable(claim_ttl=1.0)
    result = drive(driver, service(store), Model(), "hi", conversation_id="c")
    assert result.text == "hello (1 messages)"
    assert "could not release conversation 'c' (its claim lapses on its own)" in caplog.text
    with pytest.raises(ConversationConflictError):  # still held, until its ttl passes
        store.claim("c")
    # A run that cannot start gives its claim back the same way, and says so.
    caplog.clear()
    with pytest.raises(ValueError, match="no stored history"):
        drive(driver, service(store), Model(), None, conversation_id="empty")
    assert "could not release conversation 'empty'" in caplog.text


@pytest.mark.parametrize("closed_at", ["first event", "the final event"])
def test_a_stream_releases_its_conversation_when_it_ends_or_is_closed(
    store: ConversationStore, closed_at: str
) -> None:
    events = service(store).stream(Model(), "lookup 1", conversation_id="c")
    for event in events:
        if closed_at == "first event" or isinstance(event, FinalResultEvent):
            if isinstance(event, FinalResultEvent):
                # The final event comes after the last save and the release.
                stored = store.load("c")
                assert stored is not None and stored.messages == tuple(event.result.messages)
                free(store)
            break
    events.close()
    free(store)


# -- interrupted in this process -----------------------------------------------------------------

ENTERED = threading.Event()


@tool(sequential=True)
async def wire(order: int, context: ToolContext[None]) -> str:
    """Wire money, slowly.

    Args:
        order: The order number.
    """
    RAN.append(f"wire {order} {context.idempotency_key}")
    ENTERED.set()
    await asyncio.sleep(3600)
    return "wired"


@tool(sequential=True, requires_approval=True, retry_safe=True)
async def resend(order: int, context: ToolContext[None]) -> str:
    """Send a receipt again, slowly the first time.

    Args:
        order: The order number.
    """
    RAN.append(f"resend {order} {context.idempotency_key}")
    if not ENTERED.is_set():
        ENTERED.set()
        await asyncio.sleep(3600)
    return f"resent {order}"


async def _cancelled_inside(
    runs: ToolService[None], driver: str, prompt: Any, **options: Any
) -> None:
    """Run under `driver` (async), and cancel the run once a call is inside its tool."""

    async def run() -> None:
        if driver == "achat":
            await runs.achat(Model(), prompt, conversation_id="c", **options)
        else:
            async for _ in runs.astream(Model(), prompt, conversation_id="c", **options):
                pass

    task = asyncio.ensure_future(run())
    await asyncio.to_thread(ENTERED.wait, 30)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
def entered() -> Iterator[None]:
    ENTERED.clear()
    yield
    ENTERED.clear()


@pytest.mark.parametrize("then", DRIVERS)
@pytest.mark.parametrize("driver", ["achat", "astream"])
def test_a_call_interrupted_by_a_cancelled_run_is_never_run_again_unless_retry_safe(
    store: ConversationStore, driver: str, then: str, entered: None
) -> None:
    runs = ToolService([lookup, wire], store=store)
    asyncio.run(_cancelled_inside(runs, driver, "wire 5"))
    stored = store.load("c")
    assert stored is not None
    (call,) = stored.messages[-1].tool_calls  # type: ignore[union-attr]
    assert stored.state == {"format": 1, "running": {call.id: None}}
    free(store)  # released, though interrupted
    done = drive(then, runs, Model(), None, conversation_id="c")
    interrupted = done.messages[2]
    assert isinstance(interrupted, ToolResultMessage) and interrupted.is_error
    assert interrupted.text == (
        "Tool `wire` was interrupted: may or may not have taken effect (the run stopped while "
        "it ran); check before calling it again."
    )
    assert done.text == interrupted.text and done.tool_executions == ()
    assert RAN == [f"wire 5 {_key('c', call.id)}"]  # once
    again = drive(then, runs, Model(), "hi", conversation_id="c")  # the conversation goes on
    assert again.text == "hello (5 messages)"


@pytest.mark.parametrize("then", DRIVERS)
def test_an_approved_retry_safe_call_interrupted_runs_again_as_approved(
    store: ConversationStore, then: str, entered: None
) -> None:
    runs = ToolService([resend], store=store)
    first = runs.chat(Model(), "resend 8", conversation_id="c")
    (pending,) = first.pending
    approvals = {pending.call.id: Approved({"order": 9})}
    asyncio.run(_cancelled_inside(runs, "achat", None, approvals=approvals))
    # The retried request carries its decision again: it was taken already, and is dropped.
    done = drive(then, runs, Model(), None, conversation_id="c", approvals={pending.call.id: False})
    assert done.text == "resent 9" and done.pending == ()
    key = _key("c", pending.call.id)
    assert RAN == [f"resend 9 {key}", f"resend 9 {key}"]  # again, as approved, same key
    stored = store.load("c")
    assert stored is not None and stored.state == {"format": 1, "running": {}}
    paused = stored.messages[1]
    assert isinstance(paused, AiMessage) and "paused_calls" not in paused.attributes


@tool(sequential=True)
def interrupt(order: int) -> str:
    """Stop the program (Ctrl-C) inside the call.

    Args:
        order: The order number.
    """
    RAN.append(f"interrupt {order}")
    raise KeyboardInterrupt


@pytest.mark.parametrize("driver", ["chat", "stream"])
def test_a_call_interrupted_in_a_blocking_run_is_settled_by_the_next(
    store: ConversationStore, driver: str
) -> None:
    runs = ToolService([lookup, interrupt], store=store)
    with pytest.raises(KeyboardInterrupt):
        drive(driver, runs, Model(), "interrupt 3", conversation_id="c")
    stored = store.load("c")
    assert stored is not None and list(stored.state["running"]) == ["call_0"]
    done = drive(driver, runs, Model(), None, conversation_id="c")
    assert "interrupt" in (done.text or "") and "may or may not have taken effect" in (
        done.text or ""
    )
    assert RAN == ["interrupt 3"]


def test_running_arguments_that_are_not_an_object_are_refused(store: ConversationStore) -> None:
    runs = ToolService([resend], store=store)
    first = runs.chat(Model(), "resend 8", conversation_id="c")
    (pending,) = first.pending
    claim = store.claim("c")
    state = {"format": 1, "running": {pending.call.id: "[1]"}}
    store.release(store.save(claim, list(first.messages), state))
    with pytest.raises(ConversationStoreError, match="arguments that are not a JSON object"):
        runs.chat(Refusing(), None, conversation_id="c")
    free(store)
