"""A call inside a sub-run (`ToolService.as_tool`) that waits pauses the parent run: the parent's
`result.pending` names it with its path and key, the parent's history carries the sub-run's under
its digest, and resuming the parent with decisions keyed so resumes the sub-run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
import ui_support
from loop_drivers import DRIVERS, drive
from ui_support import agui_run, sse

from agentforge_typed import (
    AiMessage,
    Approved,
    CallRule,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    PendingCall,
    SubRunEvent,
    ToolArgumentsError,
    ToolCall,
    ToolFailed,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed._identity import CONVERSATION_ID, PAUSED_CALLS
from agentforge_typed.stores import MemoryStore
from agentforge_typed.ui import create_app


def paying_service(paid: list[int], **options: Any) -> ToolService[Any]:
    """A service whose one tool, `pay`, needs approval."""

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    return ToolService(tools=[pay], **options)


def payer(amount: int = 5) -> FunctionModel:
    """The sub-run's model: one call to `pay`, then what it read."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=f"done: {messages[-1].text}")
        call = ToolCall(id="p", name="pay", arguments=json.dumps({"amount": amount}))
        return AiMessage(tool_calls=[call])

    return FunctionModel(answer)


def delegating(*call_ids: str, tool_name: str = "helper") -> FunctionModel:
    """The parent's model: calls `tool_name` once per id (one round), then says what it read."""
    requests: list[int] = []

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        requests.append(1)
        if isinstance(messages[-1], ToolResultMessage):
            read = [m.text for m in messages if isinstance(m, ToolResultMessage)]
            return AiMessage(text="read: " + " | ".join(read))
        arguments = json.dumps({"task": "pay five"})
        return AiMessage(
            tool_calls=[ToolCall(id=i, name=tool_name, arguments=arguments) for i in call_ids]
        )

    model = FunctionModel(answer)
    model.requests = requests  # type: ignore[attr-defined]
    return model


def parent_of(paid: list[int], **child_options: Any) -> ToolService[Any]:
    helper = paying_service(paid, **child_options).as_tool(
        payer(), name="helper", description="Pays."
    )
    return ToolService(tools=[helper])


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_approval_inside_a_sub_run_pauses_the_parent_and_resuming_it_resumes_the_child(
    driver: str,
) -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = drive(driver, service, model, "pay five", conversation_id="c1")

    assert paid == [] and paused.text is None
    [pending] = paused.pending
    assert (pending.call.name, pending.call.id, pending.reason) == ("pay", "p", "approval")
    assert (pending.path, pending.call_ids, pending.key) == (("helper",), ("d0",), "d0/p")
    assert json.loads(pending.call.arguments) == {"amount": 5}

    resumed = drive(
        driver,
        service,
        model,
        paused.messages,
        conversation_id="c1",
        approvals={pending.key: pending.approve()},
    )
    assert paid == [5]
    assert resumed.pending == () and resumed.text == "read: done: paid 5"
    [execution] = resumed.tool_executions
    assert execution.call.id == "d0" and execution.result.text == "done: paid 5"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_denial_inside_a_sub_run_reaches_the_child_s_model(driver: str) -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = drive(driver, service, model, "pay five")
    assert [p.key for p in paused.pending] == ["d0/p"]
    resumed = drive(driver, service, model, paused.messages, approvals={"d0/p": "too much"})
    assert paid == []
    assert resumed.text == "read: done: The user denied the call to `pay`: too much"


def test_resuming_without_decisions_pauses_again_on_the_same_calls_without_a_model_call() -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    again = service.chat(model, paused.messages, conversation_id="c1")
    assert paid == [] and model.requests == [1]  # type: ignore[attr-defined]
    assert again.pending == paused.pending
    done = service.chat(model, again.messages, conversation_id="c1", approvals={"d0/p": True})
    assert paid == [5] and done.text == "read: done: paid 5"


def test_the_parent_s_history_carries_the_sub_run_s_under_a_digest_that_refuses_a_change() -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    messages = [m.model_copy(deep=True) for m in paused.messages]
    record = messages[-1].attributes[PAUSED_CALLS]["d0"]  # type: ignore[union-attr]
    assert record["reason"] == "sub_run" and record["digest"].startswith("sha256:")
    # The child's history as carried: its call to pay, for 5. Changed to 500 by whoever holds it.
    carried = record["messages"]
    assert json.loads(carried[-1]["tool_calls"][0]["arguments"]) == {"amount": 5}
    carried[-1]["tool_calls"][0]["arguments"] = '{"amount": 500}'
    with pytest.raises(ValueError, match="changed since it was shown"):
        service.chat(model, messages, conversation_id="c1", approvals={"d0/p": True})
    assert paid == []


def test_a_sub_run_s_pause_resumed_in_another_conversation_is_refused() -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="alice")
    with pytest.raises(ValueError, match="belong to conversation 'alice', not 'mallory'"):
        service.chat(model, paused.messages, conversation_id="mallory", approvals={"d0/p": True})
    # The history's owner rewritten as well: the digest covers the conversation.
    messages = list(paused.messages)
    last = messages[-1]
    assert isinstance(last, AiMessage)
    attributes = {**last.attributes, CONVERSATION_ID: "mallory"}
    messages[-1] = last.model_copy(update={"attributes": attributes})
    with pytest.raises(ValueError, match="changed since it was shown"):
        service.chat(model, messages, conversation_id="mallory", approvals={"d0/p": True})
    assert paid == []


def test_a_decision_on_no_call_of_the_sub_run_is_refused_before_anything_runs() -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    with pytest.raises(
        ValueError, match=r"no pending call has the id\(s\) 'd0/q'; pending: 'd0/p'"
    ):
        service.chat(model, paused.messages, conversation_id="c1", approvals={"d0/q": True})
    with pytest.raises(ValueError, match="waits on calls inside its sub-run"):
        service.chat(model, paused.messages, conversation_id="c1", approvals={"d0": True})
    assert paid == []


def test_a_key_two_sub_run_calls_could_take_is_refused() -> None:
    # Ids hold any character: "x/y/p" is the call p inside the sub-run of "x/y", or the call
    # "y/p" inside that of "x". Nothing is guessed.
    paid: list[int] = []
    service, model = parent_of(paid), delegating("x", "x/y")
    paused = service.chat(model, "pay five", conversation_id="c1")
    assert sorted(p.key for p in paused.pending) == ["x/p", "x/y/p"]
    with pytest.raises(ValueError, match="names a call in more than one place"):
        service.chat(model, paused.messages, conversation_id="c1", approvals={"x/y/p": True})
    resumed = service.chat(
        model,
        paused.messages,
        conversation_id="c1",
        approvals={"x/p": True},
    )
    assert paid == [5]
    assert [p.key for p in resumed.pending] == ["x/y/p"]


def test_calls_inside_nested_sub_runs_are_named_by_their_whole_path() -> None:
    paid: list[int] = []
    inner = paying_service(paid).as_tool(payer(7), name="inner", description="Pays.")

    def delegate(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=f"middle read {messages[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id="m", name="inner", arguments='{"task": "t"}')])

    middle = ToolService(tools=[inner]).as_tool(
        FunctionModel(delegate), name="middle", description="Delegates."
    )
    service, model = ToolService(tools=[middle]), delegating("d0", tool_name="middle")
    paused = service.chat(model, "go", conversation_id="c1")
    [pending] = paused.pending
    assert (pending.path, pending.call_ids, pending.key) == (
        ("middle", "inner"),
        ("d0", "m"),
        "d0/m/p",
    )
    resumed = service.chat(
        model, paused.messages, conversation_id="c1", approvals={pending.key: pending.approve()}
    )
    assert paid == [7]
    assert resumed.text == "read: middle read done: paid 7"


def test_a_resumed_sub_run_s_events_come_in_the_parent_s_stream() -> None:
    paid: list[int] = []
    service, model = parent_of(paid), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    events = list(
        service.stream(model, paused.messages, conversation_id="c1", approvals={"d0/p": True})
    )
    inner = [e for e in events if isinstance(e, SubRunEvent)]
    results = [e.event for e in inner if isinstance(e.event, ToolResultEvent)]
    assert [r.execution.result.text for r in results] == ["paid 5"]
    assert {e.call_ids for e in inner} == {("d0",)}


def test_a_sub_run_whose_service_has_a_store_resumes_from_it() -> None:
    paid: list[int] = []
    store = MemoryStore()
    service, model = parent_of(paid, store=store), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    record = paused.messages[-1].attributes[PAUSED_CALLS]["d0"]  # type: ignore[union-attr]
    assert "messages" not in record  # the store keeps the sub-run's history
    # What it waits on, recorded to check decisions against before anything runs.
    assert [(p["call"]["id"], p["reason"]) for p in record["pending"]] == [("p", "approval")]
    [pending] = paused.pending
    with pytest.raises(
        ValueError, match=r"no pending call has the id\(s\) 'd0/q'; pending: 'd0/p'"
    ):
        service.chat(model, paused.messages, conversation_id="c1", approvals={"d0/q": True})
    with pytest.raises(ValueError, match="waits for approval, not an external result"):
        service.chat(model, paused.messages, conversation_id="c1", external_results={"d0/p": 1})
    resumed = service.chat(
        model, paused.messages, conversation_id="c1", approvals={pending.key: pending.approve()}
    )
    assert paid == [5] and resumed.text == "read: done: paid 5"


def test_a_stored_parent_resumes_its_sub_run_from_the_store() -> None:
    paid: list[int] = []
    helper = paying_service(paid).as_tool(payer(), name="helper", description="Pays.")
    service, model = ToolService(tools=[helper], store=MemoryStore()), delegating("d0")
    paused = service.chat(model, "pay five", conversation_id="c1")
    assert [p.key for p in paused.pending] == ["d0/p"]
    # Nothing but the conversation id and the decision: the history is the store's.
    done = service.chat(model, [], conversation_id="c1", approvals={"d0/p": True})
    assert paid == [5] and done.text == "read: done: paid 5"


def test_a_sub_run_s_tool_run_outside_a_run_cannot_pause_and_says_so() -> None:
    paid: list[int] = []
    helper = paying_service(paid).as_tool(payer(), name="helper", description="Pays.")
    call = ToolCall(id="h", name="helper", arguments='{"task": "pay"}')
    result = asyncio.run(helper.aexecute(call))
    assert result.is_error and paid == []
    assert "paused on call 'p' (pay) for approval, and its caller cannot pause" in result.text
    assert helper.execute(call).text == result.text


def test_the_pending_call_s_key_is_its_id_outside_a_sub_run() -> None:
    call = ToolCall(id="a/b", name="t", arguments="{}")
    pending = PendingCall(call, "approval")
    assert pending.key == "a/b"
    assert pending.inside("h", "x").key == "x/a/b"


def test_a_decision_the_sub_run_would_refuse_is_refused_before_anything_of_the_run_runs() -> None:
    paid: list[int] = []
    ran: list[str] = []

    @tool(requires_approval=True)
    def own(x: int) -> str:
        """The run's own call, waiting beside the sub-run."""
        ran.append("own")
        return "own ran"

    helper = paying_service(paid).as_tool(payer(), name="helper", description="Pays.")
    service = ToolService(tools=[own, helper])

    def both(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(
            tool_calls=[
                ToolCall(id="o", name="own", arguments='{"x": 1}'),
                ToolCall(id="d0", name="helper", arguments='{"task": "pay"}'),
            ]
        )

    model = FunctionModel(both)
    paused = service.chat(model, "go", conversation_id="c1")
    assert sorted(p.key for p in paused.pending) == ["d0/p", "o"]
    other = next(p for p in paused.pending if p.key == "o")
    wrong: list[dict[str, Any]] = [
        {"external_results": {"d0/p": "paid"}},  # another kind than the call waits for
        {"approvals": {"d0/p": other.approve()}},  # the digest of another call
        {"approvals": {"d0/p": Approved(arguments={"amount": "lots"})}},  # arguments refused
    ]
    for decisions in wrong:
        approvals = {"o": True, **decisions.get("approvals", {})}
        with pytest.raises((ValueError, ToolArgumentsError)):
            service.chat(
                model,
                paused.messages,
                conversation_id="c1",
                approvals=approvals,
                external_results=decisions.get("external_results"),
            )
    assert ran == [] and paid == []


def test_a_sub_run_call_approved_with_other_arguments_resumes() -> None:
    paid: list[int] = []
    helper = paying_service(paid).as_tool(payer(), name="helper", description="Pays.")
    rules = [CallRule.ask(["helper"])]
    service, model = ToolService(tools=[helper], rules=rules), delegating("d0")
    held = service.chat(model, "pay five", conversation_id="c1")
    [asked] = held.pending
    assert asked.key == "d0"
    approved = {"d0": asked.approve({"task": "pay, but less"})}
    paused = service.chat(model, held.messages, conversation_id="c1", approvals=approved)
    assert [p.key for p in paused.pending] == ["d0/p"]
    done = service.chat(model, paused.messages, conversation_id="c1", approvals={"d0/p": True})
    assert paid == [5] and done.text == "read: done: paid 5"


def test_an_external_call_inside_a_sub_run_failing_reaches_its_model_as_a_failure() -> None:
    @tool(external=True)
    def look(what: str) -> str:
        """Looked up by the client."""
        raise NotImplementedError

    def looking(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            last = messages[-1]
            return AiMessage(text=f"error={last.is_error}: {last.text}")
        return AiMessage(tool_calls=[ToolCall(id="l", name="look", arguments='{"what": "x"}')])

    helper = ToolService(tools=[look]).as_tool(
        FunctionModel(looking), name="helper", description="Looks."
    )
    service, model = ToolService(tools=[helper]), delegating("d0")
    paused = service.chat(model, "look", conversation_id="c1")
    done = service.chat(
        model,
        paused.messages,
        conversation_id="c1",
        external_results={"d0/l": ToolFailed("the page did not load")},
    )
    assert done.text == "read: error=True: the page did not load"


def test_a_resume_travels_to_a_durable_activity_with_its_failures_intact() -> None:
    pytest.importorskip("temporalio")
    from agentforge_typed._records import SubRunResume
    from agentforge_typed.durable._payloads import ToolActivityInput

    resume = SubRunResume((), {"p": Approved(digest="sha256:ab")}, {"x": {"a": 1}}, {"l": "no"})
    sent = ToolActivityInput(call=ToolCall(id="d0", name="helper", arguments="{}"), answer=resume)
    received = ToolActivityInput.model_validate_json(sent.model_dump_json())
    assert received.answer == resume


def test_records_nested_past_the_bound_are_refused() -> None:
    from agentforge_typed.loop._approval import waiting_keys

    history: list[ChatMessage] = [UserMessage(text="go")]
    for depth in range(12):
        call = ToolCall(id=f"d{depth}", name="helper", arguments="{}")
        carried = [m.model_dump(mode="json") for m in history]
        record = {call.id: {"reason": "sub_run", "digest": "sha256:00", "messages": carried}}
        paused = AiMessage(tool_calls=[call], attributes={PAUSED_CALLS: record})
        history = [UserMessage(text="go"), paused]
    with pytest.raises(ValueError, match="nest paused sub-runs over 8 deep"):
        waiting_keys(history)


# -- through the UI ------------------------------------------------------------------------------


def _ui_parent() -> ToolService[Any]:
    def deleting(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=f"child: {messages[-1].text}")
        call = ToolCall(id="c", name="delete_file", arguments='{"path": "/tmp/x"}')
        return AiMessage(tool_calls=[call])

    child = ToolService(tools=[ui_support.delete_file])
    helper = child.as_tool(FunctionModel(deleting), name="helper", description="Deletes.")
    return ToolService(tools=[helper])


async def test_a_sub_run_s_approval_round_trip_over_ag_ui() -> None:
    ui_support.deleted.clear()
    app = create_app(_ui_parent(), delegating("d0"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        messages = [{"id": "u1", "role": "user", "content": "delete /tmp/x"}]
        events = await agui_run(http, "thread-sub-run-0001", messages)
        [interrupt] = events[-1]["outcome"]["interrupts"]
        assert interrupt["metadata"]["toolName"] == "delete_file"
        assert interrupt["metadata"]["arguments"] == {"path": "/tmp/x"}
        assert ui_support.deleted == []
        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        events = await agui_run(http, "thread-sub-run-0001", messages, resume)
        assert events[-1]["outcome"] == {"type": "success"}
        assert ui_support.deleted == ["/tmp/x"]
        assert messages[-1]["content"] == "read: child: deleted /tmp/x"
    ui_support.deleted.clear()


async def test_a_sub_run_s_approval_round_trip_over_the_ai_sdk_stream() -> None:
    from test_ui import chat_body, ui_message, ui_user

    ui_support.deleted.clear()
    app = create_app(_ui_parent(), delegating("d0"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        first = [ui_user("delete /tmp/x")]
        response = await http.post("/api/chat", json=chat_body(first, "chat-sub-run"))
        chunks = sse(response.text)
        # Asked on the call the client has: the sub-run's (`d0`), its approval the inner call's.
        [asked] = [c for c in chunks if c["type"] == "tool-approval-request"]
        assert asked["toolCallId"] == "d0" and ui_support.deleted == []
        assistant = ui_message(chunks)
        part = next(p for p in assistant["parts"] if p.get("state") == "approval-requested")
        part.update(state="approval-responded", approval={**part["approval"], "approved": True})
        body = chat_body([*first, assistant], "chat-sub-run", messageId=assistant["id"])
        chunks = sse((await http.post("/api/chat", json=body)).text)
        assert {
            "type": "tool-output-available",
            "toolCallId": "d0",
            "output": "child: deleted /tmp/x",
        } in chunks
        assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
        assert ui_support.deleted == ["/tmp/x"]
    ui_support.deleted.clear()


def test_a_key_inside_a_sub_run_s_carried_history_never_reaches_the_client() -> None:
    from agentforge_typed._transport._redaction import Redactor
    from agentforge_typed.ui._seal import Sealer

    key = "sk-live-0123456789abcdefghij"
    paid: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        paid.append(amount)
        return "paid"

    def leaky(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        call = ToolCall(id="p", name="pay", arguments='{"amount": 5}')
        return AiMessage(text=f"using {key}", tool_calls=[call])

    helper = ToolService(tools=[pay]).as_tool(FunctionModel(leaky), name="helper", description="d")
    paused = ToolService(tools=[helper]).chat(delegating("d0"), "go", conversation_id="c1")
    sealed = Sealer().seal("c1", paused.messages, Redactor([key]))
    assert key not in sealed and "using " in sealed


def test_the_ai_sdk_stream_takes_a_tool_output_only_for_the_run_s_own_call() -> None:
    # The run waits on its own external call `call_1` and, inside the sub-run of `d1`, on
    # another whose id is `call_1` too: the client's output for its tool part `call_1` answers
    # the run's own call, never the one inside the sub-run (which has no part on the client).
    from agentforge_typed.ui._conversation import Waiting
    from agentforge_typed.ui._vercel import UIMessage, _answers

    own = Waiting(ToolCall(id="call_1", name="open_page"), "external", "sha256:own")
    inner = Waiting(ToolCall(id="call_1", name="look"), "external", "sha256:inner", None, ("d1",))
    part = {
        "type": "tool-open_page",
        "toolCallId": "call_1",
        "state": "output-available",
        "output": "the page",
    }
    message = UIMessage(id="m", role="assistant", parts=[part])
    for waiting in ([own, inner], [inner, own]):
        [answer] = _answers(message, waiting)
        assert (answer.interrupt_id, answer.payload) == ("sha256:own", {"result": "the page"})
    assert _answers(message, [inner]) == []
