"""`UsageLimits`: each cap is checked at its boundary under every driver, and a run that reaches
one raises `UsageLimitExceededError` carrying the run so far."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    OpenAIChatModel,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
    tool,
)

PROMPT = "Charge the card."
USAGE = TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)


class Counting:
    """A model that asks for `calls_per_round` calls of `charge` for `rounds` rounds, then answers;
    it counts the requests it receives."""

    def __init__(self, rounds: int = 10, calls_per_round: int = 1) -> None:
        self.requests = 0
        self.rounds = rounds
        self.calls_per_round = calls_per_round

    def reply(self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> Any:
        self.requests += 1
        if self.requests > self.rounds:
            return ChatResponse(ai_message=AiMessage(text="done"), token_usage=USAGE)
        calls = [
            ToolCall(id=f"c{self.requests}-{i}", name="charge", arguments='{"cents": 5}')
            for i in range(self.calls_per_round)
        ]
        return ChatResponse(ai_message=AiMessage(tool_calls=calls), token_usage=USAGE)

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self.reply)


charges: list[int] = []


@tool
def charge(cents: int) -> str:
    """Charge the card."""
    charges.append(cents)
    return "charged"


@pytest.fixture(autouse=True)
def _reset() -> None:
    charges.clear()


def assert_resumable(messages: Sequence[ChatMessage]) -> None:
    for position, message in enumerate(messages):
        if isinstance(message, AiMessage) and message.tool_calls:
            answers = messages[position + 1 : position + 1 + len(message.tool_calls)]
            assert [a.tool_call_id for a in answers if isinstance(a, ToolResultMessage)] == [
                c.id for c in message.tool_calls
            ]


@pytest.mark.parametrize("driver", DRIVERS)
def test_request_limit_never_sends_the_request_past_it(driver: str) -> None:
    script = Counting()
    service = ToolService([charge], usage_limits=UsageLimits(request_limit=2))
    with pytest.raises(UsageLimitExceededError) as caught:
        drive(driver, service, script.model, PROMPT)
    assert script.requests == 2
    error = caught.value
    assert isinstance(error, AgentForgeError)
    assert (error.limit, error.maximum, error.value) == ("request_limit", 2, 3)
    assert "request_limit=2" in str(error)
    assert len(error.tool_executions) == 2 and charges == [5, 5]
    assert error.usage == USAGE + USAGE
    assert_resumable(error.messages)


@pytest.mark.parametrize("driver", DRIVERS)
def test_request_limit_reached_exactly_is_allowed(driver: str) -> None:
    script = Counting(rounds=1)
    service = ToolService([charge], usage_limits=UsageLimits(request_limit=2))
    assert drive(driver, service, script.model, PROMPT).text == "done"
    assert script.requests == 2


@pytest.mark.parametrize("driver", DRIVERS)
def test_tool_calls_limit_runs_no_call_of_the_round_that_would_exceed_it(driver: str) -> None:
    script = Counting(rounds=2, calls_per_round=2)
    service = ToolService([charge], usage_limits=UsageLimits(tool_calls_limit=3))
    with pytest.raises(UsageLimitExceededError) as caught:
        drive(driver, service, script.model, PROMPT)
    # The first round's two calls ran; none of the second round's two did.
    assert charges == [5, 5]
    assert (caught.value.limit, caught.value.value) == ("tool_calls_limit", 4)
    assert len(caught.value.tool_executions) == 2
    last_two = caught.value.messages[-2:]
    assert all(isinstance(m, ToolResultMessage) and m.is_error for m in last_two)
    assert_resumable(caught.value.messages)


@pytest.mark.parametrize("driver", DRIVERS)
def test_tool_calls_limit_reached_exactly_is_allowed(driver: str) -> None:
    script = Counting(rounds=2, calls_per_round=2)
    service = ToolService([charge], usage_limits=UsageLimits(tool_calls_limit=4))
    assert drive(driver, service, script.model, PROMPT).text == "done"
    assert charges == [5, 5, 5, 5]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    ("limit", "maximum", "value"),
    [("input_tokens_limit", 25, 30), ("output_tokens_limit", 5, 6), ("total_tokens_limit", 30, 36)],
)
def test_token_limits_are_checked_after_each_response(
    driver: str, limit: str, maximum: int, value: int
) -> None:
    script = Counting()
    service = ToolService([charge])
    limits = UsageLimits(**{limit: maximum})
    with pytest.raises(UsageLimitExceededError) as caught:
        drive(driver, service, script.model, PROMPT, usage_limits=limits)
    # The third response crossed the limit: its calls did not run, and no fourth request went.
    assert script.requests == 3 and charges == [5, 5]
    assert (caught.value.limit, caught.value.maximum, caught.value.value) == (limit, maximum, value)
    assert caught.value.usage.total_tokens == 36
    assert_resumable(caught.value.messages)


@pytest.mark.parametrize("driver", DRIVERS)
def test_token_limit_reached_exactly_is_allowed(driver: str) -> None:
    script = Counting(rounds=1)
    limits = UsageLimits(input_tokens_limit=20, output_tokens_limit=4, total_tokens_limit=24)
    result = drive(driver, ToolService([charge]), script.model, PROMPT, usage_limits=limits)
    assert result.usage.total_tokens == 24


def test_a_final_answer_over_a_token_limit_still_raises() -> None:
    script = Counting(rounds=0)
    limits = UsageLimits(output_tokens_limit=1)
    with pytest.raises(UsageLimitExceededError) as caught:
        ToolService().chat(script.model, "hi", usage_limits=limits)
    assert caught.value.messages[-1] == AiMessage(text="done")


def test_a_runs_own_limits_replace_the_services() -> None:
    service = ToolService([charge], usage_limits=UsageLimits(request_limit=1))
    with pytest.raises(UsageLimitExceededError):
        service.chat(Counting(rounds=1).model, "hi")
    result = service.chat(Counting(rounds=1).model, "hi", usage_limits=UsageLimits())
    assert result.text == "done"


def test_request_limit_zero_sends_nothing() -> None:
    script = Counting()
    with pytest.raises(UsageLimitExceededError) as caught:
        ToolService().chat(script.model, "hi", usage_limits=UsageLimits(request_limit=0))
    assert script.requests == 0
    assert caught.value.usage == TokenUsage()


@pytest.mark.parametrize("value", [-1, True, 1.5, "3"])
def test_nonsense_limits_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="request_limit"):
        UsageLimits(request_limit=value)


def _completion(message: dict[str, Any], finish: str, prompt: int, completion: int) -> Any:
    return {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
        "system_fingerprint": "fp_0ba0d124f1",
    }


@pytest.mark.parametrize("asynchronous", [False, True])
def test_limits_against_an_openai_server(asynchronous: bool) -> None:
    tool_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_Xy12",
                "type": "function",
                "function": {"name": "charge", "arguments": json.dumps({"cents": 7})},
            }
        ],
    }
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=_completion(tool_call, "tool_calls", 1200, 40))

    transport = httpx.MockTransport(handler)
    model = OpenAIChatModel(
        "gpt-4o-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    service = ToolService([charge], usage_limits=UsageLimits(input_tokens_limit=2000))
    with pytest.raises(UsageLimitExceededError) as caught:
        if asynchronous:
            asyncio.run(service.achat(model, "Charge 7 cents."))
        else:
            service.chat(model, "Charge 7 cents.")
    assert len(sent) == 2 and charges == [7]
    assert caught.value.usage.input_tokens == 2400


paid: list[int] = []


@tool(requires_approval=True)
def pay(cents: int) -> str:
    """Pay, once a person approves."""
    paid.append(cents)
    return "paid"


@pytest.mark.parametrize("driver", DRIVERS)
def test_calls_resumed_from_the_history_are_not_counted_again(driver: str) -> None:
    paid.clear()

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(tool_calls=[ToolCall(id="p1", name="pay", arguments='{"cents": 9}')])

    service = ToolService([pay], usage_limits=UsageLimits(tool_calls_limit=1))
    paused = drive(driver, service, FunctionModel(reply), PROMPT)
    assert [p.call.id for p in paused.pending] == ["p1"] and paid == []
    # The resumed run may make no tool call of its own: the approved call is not one.
    limits = UsageLimits(tool_calls_limit=0)
    approvals = {"p1": True}
    model = FunctionModel(reply)
    resumed = drive(
        driver, service, model, paused.messages, approvals=approvals, usage_limits=limits
    )
    assert resumed.text == "done" and paid == [9]
