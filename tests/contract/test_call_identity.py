"""One identity per call: ids a server repeats or leaves out are made unique where answers enter
the loop, and approvals, pending lists and idempotency keys are keyed on that identity, under
every driver; the server still gets back the ids it sent."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from conformance import assert_linear
from loop_drivers import DRIVERS, drive
from test_approval import Script, call, calls

from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    ModelError,
    OpenAIChatModel,
    TokenUsage,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UsageLimits,
    UserMessage,
    pending_calls,
    tool,
)
from agentforge_typed._identity import SERVER_CALL_IDS, CallIds, random_id, with_server_ids
from agentforge_typed.loop._cost import priced

sent: list[tuple[str, int]] = []
keys: list[str] = []


@tool(requires_approval=True)
def transfer(ctx: ToolContext[None], to: str, amount: int) -> str:
    """Move money."""
    sent.append((to, amount))
    keys.append(ctx.idempotency_key)
    return f"sent {amount} to {to}"


@pytest.fixture(autouse=True)
def fresh() -> None:
    sent.clear()
    keys.clear()


# -- admission ----------------------------------------------------------------------------------


def test_admission_keeps_unique_ids_and_renames_repeated_and_missing_ones() -> None:
    history: list[ChatMessage] = [
        UserMessage(content="hi"),
        calls(call("call_0", "f")),
        ToolResultMessage(tool_call_id="call_0", tool_name="f", text="ok"),
    ]
    ids = CallIds(history)
    message = calls(call("call_0", "f"), call("call_0", "f"), call("", "f"), call("call_9", "f"))
    admitted = ids.admit(message)
    assert [c.id for c in admitted.tool_calls] == ["call_0~1", "call_0~2", "call~1", "call_9"]
    assert admitted.attributes[SERVER_CALL_IDS] == {
        "call_0~1": "call_0",
        "call_0~2": "call_0",
        "call~1": "",
    }
    # Ids already unique: the message itself, untouched.
    fresh_message = calls(call("a", "f"))
    assert ids.admit(fresh_message) is fresh_message
    # A server id that looks like one the loop made is renamed too.
    assert [c.id for c in ids.admit(calls(call("call_0~1", "f"))).tool_calls] == ["call_0~1~1"]


@pytest.mark.parametrize("repeated", [True, False], ids=["one id repeated", "distinct ids"])
def test_admitting_calls_is_linear(repeated: bool) -> None:
    messages = {
        n: calls(*[call("call_0" if repeated else f"c{i}", "f") for i in range(n)])
        for n in (1000, 8000)
    }

    def admit(n: int) -> None:
        admitted = CallIds([]).admit(messages[n])
        assert len({c.id for c in admitted.tool_calls}) == n

    assert_linear(admit, 1000, what="admitting an answer's call ids", clock=time.process_time)


def test_with_server_ids_restores_the_ids_the_server_sent() -> None:
    admitted = CallIds([]).admit(calls(call("x", "f"), call("x", "f")))
    history: list[ChatMessage] = [
        UserMessage(content="hi"),
        admitted,
        ToolResultMessage(tool_call_id="x", tool_name="f", text="1"),
        ToolResultMessage(tool_call_id="x~1", tool_name="f", text="2"),
    ]
    restored = with_server_ids(history)
    assert [c.id for c in restored[1].tool_calls] == ["x", "x"]  # type: ignore[union-attr]
    assert SERVER_CALL_IDS not in restored[1].attributes  # type: ignore[union-attr]
    assert [m.tool_call_id for m in restored[2:]] == ["x", "x"]  # type: ignore[union-attr]
    plain: list[ChatMessage] = [UserMessage(content="hi")]
    assert with_server_ids(plain) is plain


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_driver_admits_repeated_ids_and_records_what_the_server_sent(driver: str) -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    script = Script(
        calls(call("call_0", "echo", text="one"), call("call_0", "echo", text="two")),
        calls(call("call_0", "echo", text="three")),
        AiMessage(text="done"),
    )
    result = drive(driver, ToolService([echo]), script.model, "go")
    answered = [(m.tool_call_id, m.text) for m in result.messages if m.role == "tool"]
    assert answered == [("call_0", "one"), ("call_0~1", "two"), ("call_0~2", "three")]
    assert [e.call.id for e in result.tool_executions] == ["call_0", "call_0~1", "call_0~2"]
    first, second = result.messages[1], result.messages[4]
    assert isinstance(first, AiMessage) and isinstance(second, AiMessage)
    assert first.attributes == {SERVER_CALL_IDS: {"call_0~1": "call_0"}}
    assert second.attributes == {SERVER_CALL_IDS: {"call_0~2": "call_0"}}
    # The responses the run reports carry the ids the loop used.
    assert result.intermediate_responses[0].ai_message == result.messages[1]
    # A model of the program's own sees the loop's ids, paired with their results.
    assert [c.id for c in script.seen[2][1].tool_calls] == ["call_0", "call_0~1"]  # type: ignore[union-attr]


# -- approvals cover one call in one round ---------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_approval_does_not_cover_a_later_call_reusing_its_id(driver: str) -> None:
    service = ToolService([transfer])
    paused = drive(
        driver, service, Script(calls(call("c1", "transfer", to="bob", amount=5))).model, "pay"
    )
    assert [p.call.id for p in paused.pending] == ["c1"]
    # Approved, the call runs; the model's next round reuses "c1" for another transfer.
    script = Script(
        calls(call("c1", "transfer", to="mallory", amount=999_999)), AiMessage(text="x")
    )
    result = drive(driver, service, script.model, paused.messages, approvals={"c1": True})
    assert sent == [("bob", 5)]
    assert [(p.call.id, p.reason) for p in result.pending] == [("c1~1", "approval")]
    assert json.loads(result.pending[0].call.arguments) == {"to": "mallory", "amount": 999_999}


@pytest.mark.parametrize("driver", DRIVERS)
def test_two_calls_with_one_id_are_two_pending_calls_decided_apart(driver: str) -> None:
    service = ToolService([transfer])
    round_ = calls(
        call("c1", "transfer", to="bob", amount=5),
        call("c1", "transfer", to="mallory", amount=999_999),
    )
    paused = drive(driver, service, Script(round_).model, "pay")
    assert [p.call.id for p in paused.pending] == ["c1", "c1~1"]
    assert pending_calls(paused.messages) == [p.call for p in paused.pending]
    # Approving "c1" runs that call alone; the other still waits.
    again = drive(driver, service, Script().model, paused.messages, approvals={"c1": True})
    assert sent == [("bob", 5)]
    assert [p.call.id for p in again.pending] == ["c1~1"]
    done = drive(
        driver,
        service,
        Script(AiMessage(text="ok")).model,
        again.messages,
        approvals={"c1~1": False},
    )
    assert sent == [("bob", 5)] and done.text == "ok"


async def small_only(call: ToolCall, context: ToolContext[Any]) -> bool:
    return bool(json.loads(call.arguments)["amount"] > 100)


def sync_small_only(call: ToolCall, context: ToolContext[Any]) -> bool:
    return bool(json.loads(call.arguments)["amount"] > 100)


@pytest.mark.parametrize("policy", [small_only, sync_small_only], ids=["async", "sync"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_call_a_policy_let_run_lends_nothing_to_a_later_call(driver: str, policy: Any) -> None:
    @tool(requires_approval=policy)
    def pay(to: str, amount: int) -> str:
        """Pay."""
        sent.append((to, amount))
        return "ok"

    script = Script(
        calls(call("c1", "pay", to="amy", amount=20)),
        calls(call("c1", "pay", to="mallory", amount=999_999)),
        AiMessage(text="x"),
    )
    result = drive(driver, ToolService([pay]), script.model, "pay")
    assert sent == [("amy", 20)]
    assert [p.call.id for p in result.pending] == ["c1~1"]


def test_a_decision_on_an_id_two_pending_calls_share_is_refused() -> None:
    # A history written elsewhere (not admitted by the loop) may end with two calls of one id.
    history: list[ChatMessage] = [
        UserMessage(content="pay"),
        calls(
            call("c1", "transfer", to="bob", amount=5),
            call("c1", "transfer", to="mallory", amount=999_999),
        ),
    ]
    with pytest.raises(ValueError, match="several pending calls have the id"):
        ToolService([transfer]).chat(Script().model, history, approvals={"c1": True})
    assert sent == []


# -- idempotency keys -------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_distinct_calls_with_a_repeated_id_get_distinct_idempotency_keys(driver: str) -> None:
    @tool
    def pay(ctx: ToolContext[None], to: str, amount: int) -> str:
        """Pay (the payment API deduplicates by idempotency key)."""
        keys.append(ctx.idempotency_key)
        return "ok"

    script = Script(
        calls(call("c1", "pay", to="amy", amount=5), call("c1", "pay", to="bob", amount=7)),
        calls(call("c1", "pay", to="amy", amount=5)),
        AiMessage(text="x"),
    )
    drive(driver, ToolService([pay]), script.model, "pay", conversation_id="conv")
    assert len(set(keys)) == 3


# -- the wire gets the ids the server sent ---------------------------------------------------


def _openai_chunk(**fields: Any) -> bytes:
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return b"data: " + json.dumps({**body, **fields}).encode() + b"\n\n"


class RepeatingServer:
    """An OpenAI-compatible server that numbers every answer's calls from `call_0`, as some
    local servers do: two calls with one id, then the same id again in the next round."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        rounds = [
            [("call_0", '{"text": "one"}'), ("call_0", '{"text": "two"}')],
            [("call_0", '{"text": "three"}')],
            [],
        ]
        made = rounds[len(self.bodies) - 1]
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": "echo", "arguments": a}}
            for i, a in made
        ]
        message: dict[str, Any] = {"role": "assistant", "content": None if made else "done"}
        if made:
            message["tool_calls"] = tool_calls
        finish = "tool_calls" if made else "stop"
        if not body.get("stream"):
            return httpx.Response(
                200,
                json={
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                },
            )
        delta = dict(message)
        if made:
            delta["tool_calls"] = [{"index": n, **c} for n, c in enumerate(tool_calls)]
        stream = (
            _openai_chunk(choices=[{"index": 0, "delta": delta, "finish_reason": None}])
            + _openai_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": finish}])
            + b"data: [DONE]\n\n"
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream)


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_server_gets_back_the_ids_it_sent(driver: str) -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    server = RepeatingServer()
    transport = httpx.MockTransport(server)
    model = OpenAIChatModel(
        "m",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    result = drive(driver, ToolService([echo]), model, "go")
    assert result.text == "done"
    answered = [(m.tool_call_id, m.text) for m in result.messages if m.role == "tool"]
    assert answered == [("call_0", "one"), ("call_0~1", "two"), ("call_0~2", "three")]
    last = server.bodies[-1]["messages"]
    assert [c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]] == [
        "call_0",
        "call_0",
        "call_0",
    ]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ["call_0"] * 3
    assert [m["content"] for m in last if m["role"] == "tool"] == ["one", "two", "three"]


def test_anthropic_gets_its_signed_blocks_back_verbatim_after_a_rename() -> None:
    blocks = [
        {"type": "thinking", "thinking": "Two lookups.", "signature": "sig-abc"},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "one"}},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "two"}},
    ]
    answers: list[dict[str, Any]] = [
        {"content": blocks, "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"},
    ]
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        answer = answers[len(bodies) - 1]
        return httpx.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
                **answer,
            },
        )

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    model = AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    result = ToolService([echo]).chat(model, "go")
    assert [e.call.id for e in result.tool_executions] == ["toolu_1", "toolu_1~1"]
    replayed = bodies[1]["messages"]
    assert replayed[1] == {"role": "assistant", "content": blocks}
    assert [b["tool_use_id"] for b in replayed[2]["content"]] == ["toolu_1", "toolu_1"]


# -- containment and budgets ---------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_validator_raising_under_an_approval_policy_is_the_same_error_result(
    driver: str,
) -> None:
    from pydantic import BaseModel, field_validator

    class Order(BaseModel):
        sku: str

        @field_validator("sku")
        @classmethod
        def known(cls, value: str) -> str:
            return {"a": "A"}[value]  # a KeyError for any other sku

    @tool(requires_approval=True)
    def order(item: Order) -> str:
        """Order."""
        return "ordered"

    @tool
    def plain_order(item: Order) -> str:
        """Order."""
        return "ordered"

    texts = []
    for target in (order, plain_order):
        script = Script(calls(call("c1", target.name, item={"sku": "zzz"})), AiMessage(text="x"))
        result = drive(driver, ToolService([target]), script.model, "order")
        assert result.text == "x" and not result.pending
        [execution] = result.tool_executions
        assert execution.result.error_kind == "execution"
        texts.append(execution.result.text.replace(target.name, "TOOL"))
    assert texts[0] == texts[1] and "KeyError" in texts[0]


@pytest.mark.parametrize("count", [-51_000, 12.5, "7"])
def test_a_token_count_that_is_negative_or_not_whole_is_a_model_error(count: Any) -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": count, "completion_tokens": 1, "total_tokens": 1},
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    model = OpenAIChatModel("m", api_key="sk-test", http_client=httpx.Client(transport=transport))
    limits = UsageLimits(total_tokens_limit=100_000)
    with pytest.raises(ModelError, match="malformed"):
        ToolService().chat(model, "hi", usage_limits=limits)
    with pytest.raises(ValueError):
        TokenUsage(input_tokens=-1)


def test_pricing_that_raises_leaves_the_cost_unknown_and_the_run_intact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    genai_prices = pytest.importorskip("genai_prices")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the pricing table is broken")

    monkeypatch.setattr(genai_prices, "calc_price", broken)

    class Hosted:
        base_url = "https://api.openai.com/v1"
        model = "gpt-4o-mini"

    usage = TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    response = ChatResponse(ai_message=AiMessage(text="hi"), token_usage=usage)
    assert priced(Hosted(), [response], usage) == usage
    assert priced(Hosted(), [response], usage).cost is None

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        if len(messages) == 1:
            return ChatResponse(ai_message=calls(call("c", "echo", text="a")), token_usage=usage)
        return ChatResponse(ai_message=AiMessage(text="done"), token_usage=usage)

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    class PricedModel(FunctionModel):
        base_url = "https://api.openai.com/v1"
        model = "gpt-4o-mini"

    result = ToolService([echo]).chat(PricedModel(reply), "go")
    assert result.text == "done" and len(result.tool_executions) == 1
    assert result.usage.total_tokens == 30 and result.usage.cost is None


@pytest.mark.parametrize("driver", DRIVERS)
def test_default_conversation_ids_are_random_and_never_repeat_under_every_driver(
    driver: str,
) -> None:
    """Idempotency keys derive from the conversation id: two runs must never share one, across
    the batches `random_id` reads its bits in (64 ids each)."""
    seen: list[str] = []

    @tool
    def note(ctx: ToolContext[None]) -> str:
        """Note the conversation."""
        assert ctx.conversation_id is not None
        seen.append(ctx.conversation_id)
        return "noted"

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if len(messages) == 1:
            return calls(call("c1", "note"))
        return AiMessage(text="done")

    service, model = ToolService([note]), FunctionModel(reply)
    for _ in range(150):
        drive(driver, service, model, "go")
    assert len(seen) == len(set(seen)) == 150
    assert all(re.fullmatch("[0-9a-f]{32}", found) for found in seen)


def test_random_ids_are_handed_out_once_across_threads() -> None:
    found: list[list[str]] = [[] for _ in range(8)]

    def take(into: list[str]) -> None:
        into.extend(random_id() for _ in range(500))

    threads = [threading.Thread(target=take, args=(into,)) for into in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [found_id for into in found for found_id in into]
    assert len(every) == len(set(every)) == 4000
    assert all(re.fullmatch("[0-9a-f]{32}", found_id) for found_id in every)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_never_repeats_its_parents_ids() -> None:
    random_id()  # the batch just read is now inherited by the child
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.write(write, " ".join(random_id() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split())
    os.waitpid(child, 0)
    parents = {random_id() for _ in range(10)}
    assert len(childs) == 10 and not childs & parents
