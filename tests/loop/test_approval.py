"""Human approval and external tools: a run pauses on calls that wait, and resumes from its
history with `approvals=` / `external_results=`, under every driver."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pydantic_core
import pytest
from pydantic import TypeAdapter

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FinalResultEvent,
    FinishReason,
    FunctionModel,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.loop import FinishedChatResult, PausedChatResult

Turn = AiMessage | Callable[[Sequence[ChatMessage]], AiMessage]
History = TypeAdapter(list[ChatMessage])


class Script:
    """A FunctionModel playing fixed turns and recording the messages of every request."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen: list[list[ChatMessage]] = []
        self.model = FunctionModel(self._reply)

    def _reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> ChatResponse:
        self.seen.append(list(messages))
        turn = self.turns.pop(0)
        message = turn if isinstance(turn, AiMessage) else turn(messages)
        reason = FinishReason.TOOL_EXECUTION if message.has_tool_calls else FinishReason.STOP
        return ChatResponse(ai_message=message, finish_reason=reason)


def call(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments))


def calls(*tool_calls: ToolCall) -> AiMessage:
    return AiMessage(tool_calls=tool_calls)


Runner = Callable[..., ToolChatResult[None]]


@pytest.fixture(params=["chat", "achat", "stream", "astream"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Every driver, returning the run's result."""

    def run_with(
        service: ToolService, model: FunctionModel, messages: Any, **kw: Any
    ) -> ToolChatResult[None]:
        if request.param == "chat":
            return service.chat(model, messages, **kw)
        if request.param == "achat":
            return asyncio.run(service.achat(model, messages, **kw))
        if request.param == "stream":
            events = list(service.stream(model, messages, **kw))
        else:

            async def collect() -> list[Any]:
                return [event async for event in service.astream(model, messages, **kw)]

            events = asyncio.run(collect())
        final = events[-1]
        assert isinstance(final, FinalResultEvent)
        return final.result

    return run_with


class Bank:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []


bank = Bank()


@tool(requires_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    bank.sent.append((to, amount))
    return f"sent {amount} to {to}"


@tool
def balance() -> int:
    """The account balance."""
    return 500


@tool(external=True)
def ask_browser(url: str) -> str:
    """Open a page in the user's browser (done by the front end)."""
    raise AssertionError("an external tool never runs in the loop")


@pytest.fixture(autouse=True)
def fresh_bank() -> None:
    bank.sent.clear()


def results(messages: Sequence[ChatMessage]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def pause(run: Runner, service: ToolService, *first: AiMessage) -> ToolChatResult[None]:
    script = Script(*first)
    return run(service, script.model, "pay bob")


def test_a_round_with_a_call_needing_approval_pauses_after_the_other_calls(run: Runner) -> None:
    service = ToolService([transfer, balance])
    round_ = calls(call("b1", "balance"), call("t1", "transfer", to="bob", amount=50))

    result = pause(run, service, round_)

    assert [p.call.id for p in result.pending] == ["t1"]
    assert result.pending[0].reason == "approval"
    assert bank.sent == []
    # The message records the run's conversation and what its waiting call waits for.
    paused_calls = {"t1": {"reason": "approval", "digest": result.pending[0].digest}}
    assert result.messages[-2] == round_.model_copy(
        update={
            "attributes": {
                "conversation_id": result.conversation_id,
                "paused_calls": paused_calls,
            }
        }
    )
    assert result.messages[-1] == ToolResultMessage(
        tool_call_id="b1", tool_name="balance", text="500"
    )
    assert [e.call.id for e in result.tool_executions] == ["b1"]
    assert result.final_response.ai_message == round_


def test_approve_runs_the_call_and_continues(run: Runner) -> None:
    service = ToolService([transfer])
    paused = pause(run, service, calls(call("t1", "transfer", to="bob", amount=50)))
    script = Script(AiMessage(text="Done."))

    result = run(service, script.model, paused.messages, approvals={"t1": True})

    assert bank.sent == [("bob", 50)]
    assert result.text == "Done."
    assert result.pending == ()
    assert results(script.seen[0])["t1"].text == "sent 50 to bob"
    assert [e.call.id for e in result.tool_executions] == ["t1"]


def test_deny_and_deny_with_reason_answer_the_model_with_errors(run: Runner) -> None:
    service = ToolService([transfer])
    round_ = calls(
        call("t1", "transfer", to="bob", amount=50), call("t2", "transfer", to="eve", amount=9)
    )
    paused = pause(run, service, round_)
    assert [p.call.id for p in paused.pending] == ["t1", "t2"]
    script = Script(AiMessage(text="Understood."))

    run(service, script.model, paused.messages, approvals={"t1": False, "t2": "eve is a fraud"})

    assert bank.sent == []
    answers = results(script.seen[0])
    assert answers["t1"].is_error and "denied" in answers["t1"].text
    assert answers["t2"].is_error and answers["t2"].text.endswith(": eve is a fraud")


def test_approved_with_other_arguments_runs_them(run: Runner) -> None:
    service = ToolService([transfer])
    paused = pause(run, service, calls(call("t1", "transfer", to="bob", amount=5000)))
    script = Script(AiMessage(text="Sent less."))

    result = run(
        service,
        script.model,
        paused.messages,
        approvals={"t1": af.Approved(arguments={"to": "bob", "amount": 100})},
    )

    assert bank.sent == [("bob", 100)]
    assert json.loads(result.tool_executions[0].call.arguments) == {"to": "bob", "amount": 100}


def test_approved_arguments_are_sent_as_json_whatever_their_python_type(run: Runner) -> None:
    from datetime import date

    @tool(requires_approval=True)
    def schedule(day: date) -> str:
        return f"scheduled {day.isoformat()}"

    service = ToolService([schedule])
    paused = pause(run, service, calls(call("s1", "schedule", day="2030-01-01")))
    script = Script(AiMessage(text="ok"))

    run(
        service,
        script.model,
        paused.messages,
        approvals={"s1": af.Approved(arguments={"day": date(2031, 2, 3)})},
    )

    assert results(script.seen[0])["s1"].text == "scheduled 2031-02-03"


def test_approved_with_invalid_arguments_is_refused_before_anything_runs(run: Runner) -> None:
    service = ToolService([transfer])
    paused = pause(run, service, calls(call("t1", "transfer", to="bob", amount=50)))
    script = Script()

    with pytest.raises(af.ToolArgumentsError) as caught:
        run(
            service,
            script.model,
            paused.messages,
            approvals={"t1": af.Approved(arguments={"to": "bob", "amount": "all"})},
        )

    assert caught.value.errors[0].path == "$.amount"
    assert bank.sent == [] and script.seen == []


def test_invalid_arguments_go_back_to_the_model_never_to_a_person(run: Runner) -> None:
    service = ToolService([transfer])
    script = Script(
        calls(call("t1", "transfer", to="bob", amount="fifty")),
        calls(call("t2", "transfer", to="bob", amount=50)),
    )

    result = run(service, script.model, "pay bob")

    assert [p.call.id for p in result.pending] == ["t2"]
    assert results(result.messages)["t1"].is_error
    assert bank.sent == []


def test_undecided_calls_stay_pending_without_a_model_call(run: Runner) -> None:
    service = ToolService([transfer])
    round_ = calls(
        call("t1", "transfer", to="bob", amount=1), call("t2", "transfer", to="amy", amount=2)
    )
    paused = pause(run, service, round_)
    script = Script()

    again = run(service, script.model, paused.messages, approvals={"t2": True})

    assert script.seen == []
    assert bank.sent == [("amy", 2)]
    assert [p.call.id for p in again.pending] == ["t1"]
    assert again.final_response.ai_message.tool_calls == round_.tool_calls
    assert list(results(again.messages)) == ["t2"]

    last = Script(AiMessage(text="Both done."))
    final = run(service, last.model, again.messages, approvals={"t1": True})
    assert final.text == "Both done."
    assert set(results(last.seen[0])) == {"t1", "t2"}


def test_a_decision_for_a_call_that_is_not_pending_is_a_value_error(run: Runner) -> None:
    service = ToolService([transfer, balance])
    paused = pause(
        run, service, calls(call("b1", "balance"), call("t1", "transfer", to="bob", amount=1))
    )
    script = Script()
    for decisions in ({"approvals": {"nope": True}}, {"approvals": {"b1": True}}):
        with pytest.raises(ValueError, match="no pending call"):
            run(service, script.model, paused.messages, **decisions)
    with pytest.raises(ValueError, match="no pending call"):
        run(service, script.model, "hello", external_results={"x": 1})
    with pytest.raises(ValueError, match="no pending call has the id\\(s\\) 'b1', 7"):
        run(service, script.model, paused.messages, approvals={7: True, "b1": False})
    assert script.seen == [] and bank.sent == []


def test_external_results_fill_the_calls_and_the_loop_continues(run: Runner) -> None:
    service = ToolService([ask_browser, balance])
    round_ = calls(call("a1", "ask_browser", url="https://a.example"), call("b1", "balance"))
    paused = pause(run, service, round_)
    assert [(p.call.id, p.reason) for p in paused.pending] == [("a1", "external")]
    script = Script(AiMessage(text="Read it."))

    result = run(service, script.model, paused.messages, external_results={"a1": {"title": "A"}})

    assert result.text == "Read it."
    answer = results(script.seen[0])["a1"]
    assert json.loads(answer.text) == {"title": "A"} and not answer.is_error


def test_an_external_result_may_carry_an_image(run: Runner) -> None:
    service = ToolService([ask_browser])
    paused = pause(run, service, calls(call("a1", "ask_browser", url="https://a.example")))
    script = Script(AiMessage(text="A page."))
    shot = af.ImageContent(data=b"\x89PNG", media_type="image/png")

    run(service, script.model, paused.messages, external_results={"a1": ["The page:", shot]})

    answer = results(script.seen[0])["a1"]
    assert answer.content == (af.TextContent(text="The page:"), shot)
    assert answer.text == "The page:\n[image: image/png, 4 bytes]"


def test_an_external_failure_reaches_the_model_as_an_error(run: Runner) -> None:
    service = ToolService([ask_browser])
    paused = pause(run, service, calls(call("a1", "ask_browser", url="https://a.example")))
    script = Script(AiMessage(text="Sorry."))

    run(service, script.model, paused.messages, external_results={"a1": af.ToolFailed("404")})

    answer = results(script.seen[0])["a1"]
    assert answer.is_error and answer.text == "404"


def test_a_decision_of_the_wrong_kind_is_refused(run: Runner) -> None:
    service = ToolService([ask_browser, transfer])
    round_ = calls(
        call("a1", "ask_browser", url="https://a.example"), call("t1", "transfer", to="b", amount=1)
    )
    paused = pause(run, service, round_)
    script = Script()
    with pytest.raises(ValueError, match="external"):
        run(service, script.model, paused.messages, approvals={"a1": True})
    with pytest.raises(ValueError, match="not an external"):
        run(service, script.model, paused.messages, external_results={"t1": "ok"})
    with pytest.raises(ValueError, match="both"):
        run(
            service,
            script.model,
            paused.messages,
            approvals={"t1": True},
            external_results={"t1": "ok"},
        )
    with pytest.raises(TypeError, match="approval for 't1'"):
        run(service, script.model, paused.messages, approvals={"t1": 1})
    assert script.seen == [] and bank.sent == []


def test_resume_after_a_json_round_trip(run: Runner) -> None:
    service = ToolService([transfer, balance])
    paused = pause(
        run, service, calls(call("b1", "balance"), call("t1", "transfer", to="bob", amount=7))
    )
    stored = History.dump_json(list(paused.messages))
    pending_ids = json.dumps([p.call.id for p in paused.pending])

    script = Script(AiMessage(text="Done."))
    loaded = History.validate_json(stored)
    approvals = {call_id: True for call_id in json.loads(pending_ids)}
    result = run(service, script.model, loaded, approvals=approvals)

    assert result.text == "Done."
    assert bank.sent == [("bob", 7)]
    assert set(results(script.seen[0])) == {"b1", "t1"}


def big(call: ToolCall, context: ToolContext[Any]) -> bool:
    return bool(json.loads(call.arguments)["amount"] > 100)


async def abig(call: ToolCall, context: ToolContext[Any]) -> bool:
    await asyncio.sleep(0)
    return bool(json.loads(call.arguments)["amount"] > 100)


@pytest.mark.parametrize("policy", [big, abig], ids=["sync", "async"])
def test_a_policy_decides_per_call(run: Runner, policy: af.ApprovalPolicy) -> None:
    @tool(requires_approval=policy)
    def pay(to: str, amount: int) -> str:
        bank.sent.append((to, amount))
        return "ok"

    service = ToolService([pay])
    round_ = calls(call("s", "pay", to="amy", amount=20), call("l", "pay", to="bob", amount=900))

    paused = pause(run, service, round_)

    assert bank.sent == [("amy", 20)]
    assert [p.call.id for p in paused.pending] == ["l"]

    done = run(service, Script(AiMessage(text="ok")).model, paused.messages, approvals={"l": True})
    assert done.text == "ok" and bank.sent == [("amy", 20), ("bob", 900)]


def test_a_policy_that_returns_no_bool_is_a_type_error(run: Runner) -> None:
    @tool(requires_approval=lambda call, context: "yes")  # type: ignore[arg-type,return-value]
    def pay(amount: int) -> str:
        return "ok"

    with pytest.raises(TypeError, match="not bool"):
        pause(run, ToolService([pay]), calls(call("p", "pay", amount=1)))


def test_before_tool_call_runs_before_an_approved_call_not_at_the_pause(run: Runner) -> None:
    seen: list[str] = []

    def before(call: ToolCall, context: ToolContext[Any]) -> str | None:
        seen.append(call.id)
        return "blocked by policy" if call.id == "t2" else None

    service = ToolService([transfer], before_tool_call=before)
    round_ = calls(
        call("t1", "transfer", to="bob", amount=1), call("t2", "transfer", to="eve", amount=1)
    )
    paused = pause(run, service, round_)
    assert seen == []

    run(
        service,
        Script(AiMessage(text="ok")).model,
        paused.messages,
        approvals={"t1": True, "t2": True},
    )

    assert seen == ["t1", "t2"]
    assert bank.sent == [("bob", 1)]


def test_hooks_and_stream_events_see_a_pending_call_as_such() -> None:
    audited: list[ToolExecution] = []
    service = ToolService([transfer, balance], after_tool_call=audited.append)
    script = Script(calls(call("b1", "balance"), call("t1", "transfer", to="bob", amount=5)))

    events = list(service.stream(script.model, "pay bob"))

    pending = [
        e.execution
        for e in events
        if isinstance(e, ToolResultEvent) and e.execution.call.id == "t1"
    ]
    assert len(pending) == 1
    assert pending[0].result.text == "Awaiting approval."
    shown = pending[0].pending
    assert shown is not None and shown.digest is not None and shown.digest.startswith("sha256:")
    assert shown == af.PendingCall(pending[0].call, "approval", digest=shown.digest)
    assert [e.call.id for e in audited] == ["b1", "t1"]
    assert [e.pending for e in audited] == [None, shown]
    final = events[-1]
    # The hooks, the events and the result show one digest: the one the history records.
    assert isinstance(final, FinalResultEvent) and final.result.pending == (shown,)


def test_a_history_ending_in_a_normal_call_is_completed_on_resume(run: Runner) -> None:
    history = [UserMessage(content="balance?"), calls(call("b1", "balance"))]
    script = Script(AiMessage(text="500."))

    result = run(ToolService([balance]), script.model, history)

    assert result.text == "500."
    assert results(script.seen[0])["b1"].text == "500"


def test_pending_calls_of_a_stored_history() -> None:
    history: list[ChatMessage] = [
        UserMessage(content="go"),
        calls(call("b1", "balance"), call("t1", "transfer", to="b", amount=1)),
        ToolResultMessage(tool_call_id="b1", tool_name="balance", text="500"),
    ]
    assert [c.id for c in af.pending_calls(history)] == ["t1"]
    assert af.pending_calls([*history, UserMessage(content="and?")]) == []
    assert af.pending_calls([UserMessage(content="hi")]) == []


def test_openai_wire_pause_json_round_trip_resume() -> None:
    """Against the Chat Completions wire format: the paused history is what the next request
    sends, with the denial as the tool message of the pending call."""
    from openai_support import Server

    def completion(message: dict[str, Any], finish: str) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
            },
        )

    tool_calls = [
        {"id": "call_b", "type": "function", "function": {"name": "balance", "arguments": "{}"}},
        {
            "id": "call_t",
            "type": "function",
            "function": {"name": "transfer", "arguments": '{"to":"eve","amount":900}'},
        },
    ]
    server = Server(
        completion({"role": "assistant", "content": None, "tool_calls": tool_calls}, "tool_calls"),
        completion({"role": "assistant", "content": "I will not pay eve."}, "stop"),
    )
    service = ToolService([transfer, balance])

    paused = service.chat(server.model(), "pay eve 900")
    stored = History.dump_json(list(paused.messages))
    resumed = service.chat(
        server.model(), History.validate_json(stored), approvals={"call_t": "eve is blocked"}
    )

    assert resumed.text == "I will not pay eve." and bank.sent == []
    assert len(server.requests) == 2
    sent = server.bodies[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_b", "content": "500"}
    assert sent[3]["tool_call_id"] == "call_t"
    assert sent[3]["content"].endswith(": eve is blocked")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "payments.py"


def test_the_example_pauses_in_one_process_and_resumes_in_another(tmp_path: Path) -> None:
    def example(*args: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parent.parent)}
        env.pop("AGENTFORGE_MODEL", None)
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        return done.stdout.strip()

    history = tmp_path / "history.json"
    assert example("pause", str(history), "Pay 250 to bob") == (
        'pending pay_bob pay {"to": "bob", "amount": 250}'
    )
    # Two callers resume the same stored history (a retried request, a double click), each in
    # its own process: the loop cannot tell, but the payment carries the same idempotency key.
    again = tmp_path / "again.json"
    again.write_bytes(history.read_bytes())
    paid = re.fullmatch(
        r"Paid 250 EUR to bob \(idempotency key ([0-9a-f]{32})\)\.",
        example("resume", str(history), "yes"),
    )
    assert paid is not None
    assert example("resume", str(again), "yes") == paid[0]
    assert example("pause", str(history), "Pay 250 to bob").startswith("pending")
    assert example("resume", str(history), "not this month").endswith(": not this month")
    small = example("pause", str(history), "Pay 20 to amy")
    assert small.startswith("Paid 20 EUR to amy (idempotency key ")
    assert paid[1] not in small  # another conversation, another key


def test_an_async_policy_decides_before_a_sync_before_tool_call_hook(run: Runner) -> None:
    seen: list[str] = []

    def before(call: ToolCall, context: ToolContext[Any]) -> None:
        seen.append(call.id)

    @tool(requires_approval=abig)
    def pay(to: str, amount: int) -> str:
        return "ok"

    service = ToolService([pay], before_tool_call=before)
    round_ = calls(call("s", "pay", to="amy", amount=20), call("l", "pay", to="bob", amount=900))

    paused = pause(run, service, round_)

    assert [p.call.id for p in paused.pending] == ["l"]
    assert seen == ["s"]  # the hook runs for calls that run, not for a call that pauses


@tool(requires_approval=True)
def charge(amount: int, ctx: ToolContext[None]) -> str:
    """Charge the customer."""
    bank.sent.append((ctx.idempotency_key, amount))
    return f"charged {amount}"


def test_a_resumed_run_keeps_the_conversation_it_paused_in(run: Runner) -> None:
    service = ToolService([charge])
    paused = pause(run, service, calls(call("c1", "charge", amount=5)))
    stored = History.validate_json(History.dump_json(list(paused.messages)))
    assert paused.conversation_id is not None
    assert stored[-1].attributes["conversation_id"] == paused.conversation_id  # type: ignore[union-attr]

    script = Script(AiMessage(text="Done."))
    resumed = run(service, script.model, stored, approvals={"c1": True})

    # Resumed without `conversation_id=`: the call keeps its owner, so its idempotency key is
    # the one a run given the paused run's id would use (a retried resume charges nothing twice).
    assert resumed.conversation_id == paused.conversation_id
    context = ToolContext(None, "c1", "charge", conversation_id=paused.conversation_id)
    assert bank.sent == [(context.idempotency_key, 5)]


def test_resuming_under_another_conversation_id_is_refused_before_anything_runs(
    run: Runner,
) -> None:
    service = ToolService([charge])
    script = Script(calls(call("c1", "charge", amount=5)))
    paused = run(service, script.model, "pay", conversation_id="alice-1")
    assert paused.conversation_id == "alice-1"
    later = Script(AiMessage(text="Done."))

    with pytest.raises(ValueError, match=r"belong to conversation 'alice-1', not 'mallory-9'"):
        run(
            service,
            later.model,
            paused.messages,
            approvals={"c1": True},
            conversation_id="mallory-9",
        )
    assert bank.sent == [] and later.seen == []

    resumed = run(
        service, later.model, paused.messages, approvals={"c1": True}, conversation_id="alice-1"
    )
    assert resumed.text == "Done." and len(bank.sent) == 1


def test_a_digest_secret_is_checked_and_kept_out_of_sight() -> None:
    with pytest.raises(ValueError, match="digest_secret must be at least 16 bytes"):
        ToolService(digest_secret="too short")
    with pytest.raises(TypeError, match="digest_secret must be str or bytes, not int"):
        ToolService(digest_secret=1234567890123456)  # type: ignore[arg-type]
    secret = "correct horse battery staple, 32"
    service = ToolService([charge], digest_secret=secret)
    paused = service.chat(Script(calls(call("c1", "charge", amount=5))).model, "pay")
    (pending,) = paused.pending
    assert pending.digest is not None and pending.digest.startswith("hmac-sha256:")
    shown = [
        repr(service),
        repr(vars(service)),
        repr(pending),
        History.dump_json(list(paused.messages)),
    ]
    assert not any(secret in str(text) for text in shown)


def test_each_way_a_record_fails_its_check_says_so() -> None:
    script = Script(calls(call("c1", "charge", amount=5)))
    plain, keyed = ToolService([charge]), ToolService([charge], digest_secret=b"k" * 16)
    by_plain = plain.chat(script.model, "pay").messages
    by_keyed = keyed.chat(Script(calls(call("c1", "charge", amount=5))).model, "pay").messages
    changed = "call 'c1' (charge) changed since it was shown: "
    with pytest.raises(ValueError) as refused:
        plain.chat(script.model, by_keyed, approvals={"c1": True})
    assert str(refused.value) == (
        changed + "its digest was made with a digest_secret, and this service has none; nothing ran"
    )
    with pytest.raises(ValueError) as refused:
        keyed.chat(script.model, by_plain, approvals={"c1": True})
    assert str(refused.value) == (
        changed + "its digest was made without a digest_secret, and this service has one (a "
        "history kept elsewhere could have been changed); nothing ran"
    )
    other = ToolService([charge], digest_secret=b"o" * 16)
    with pytest.raises(ValueError) as refused:
        other.chat(script.model, by_keyed, approvals={"c1": True})
    assert str(refused.value) == (
        changed + "its tool, arguments, question or conversation are not the ones it paused "
        "with (or the digest was made with another digest_secret); nothing ran"
    )
    message = by_plain[-1]
    assert isinstance(message, AiMessage)
    broken = message.model_copy(
        update={"attributes": {**message.attributes, "paused_calls": {"c1": {"reason": "maybe"}}}}
    )
    with pytest.raises(ValueError) as refused:
        plain.chat(script.model, [*by_plain[:-1], broken], approvals={"c1": True})
    assert str(refused.value).startswith(
        "the history's record of its paused calls (attributes['paused_calls']) is malformed: "
    )
    assert str(refused.value).endswith("; nothing ran")
    (pending,) = plain.chat(Script(calls(call("c1", "charge", amount=5))).model, "pay").pending
    with pytest.raises(ValueError, match=r"^call 'c1' \(charge\) waits for approval$"):
        pending.answer({"name": "Ada"})
    assert script.seen[1:] == [] and bank.sent == []


def test_a_paused_run_is_a_paused_result_with_no_output_and_a_resumed_one_is_finished(
    run: Runner,
) -> None:
    """The result's kind says whether there is an output: a paused run's is a
    `PausedChatResult` (its `output` is None whatever the output type), the resumed run's a
    `FinishedChatResult` with the validated output. Both are `ToolChatResult`s, and each kind
    copies, compares, pickles and serialises as its own."""

    def answer(messages: Sequence[ChatMessage]) -> AiMessage:
        return calls(call("o1", "final_result", result=len(messages)))

    service = ToolService(tools=[transfer])
    script = Script(calls(call("c1", "transfer", to="bob", amount=5)), answer)
    paused = run(service, script.model, "pay bob", output_type=int)
    assert type(paused) is PausedChatResult and isinstance(paused, ToolChatResult)
    assert paused.paused and paused.output is None and [p.call.id for p in paused.pending] == ["c1"]
    assert dataclasses.replace(paused) == paused == type(paused)(**vars(paused))
    assert pickle.loads(pickle.dumps(paused)) == paused
    assert pydantic_core.to_jsonable_python(paused)["output"] is None

    finished = run(service, script.model, paused.messages, output_type=int, approvals={"c1": True})
    assert type(finished) is FinishedChatResult and not finished.paused and not finished.pending
    assert finished.output == 3 and bank.sent == [("bob", 5)]
    # A kind never says other than its calls do, built by hand or copied.
    with pytest.raises(ValueError, match="a FinishedChatResult waits on no call"):
        dataclasses.replace(finished, pending=paused.pending)
    with pytest.raises(ValueError, match="a PausedChatResult waits on its pending calls"):
        dataclasses.replace(paused, pending=())
