"""The loop's cheap path for plain runs never skips a check: every feature switched on after a
service has run plainly (a tool registered later, a policy or hook set later, a limit or selection
given per call, instrumentation switched on) applies to the very next run, under every driver."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    PrepareContext,
    TokenUsage,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolExecutionResult,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    UnknownToolError,
    UsageLimitExceededError,
    UsageLimits,
    UserMessage,
    tool,
)
from agentforge_typed.loop import FinishedChatResult

USAGE = TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)


class Script:
    """A model that calls `name` once with `arguments`, then answers "done"; it records the tools
    each request offered and reports `USAGE` per response."""

    def __init__(self, name: str = "charge", arguments: dict[str, Any] | None = None) -> None:
        self.call = ToolCall(id="c1", name=name, arguments=json.dumps(arguments or {"cents": 5}))
        self.offered: list[list[str]] = []
        self.model = FunctionModel(self._reply)

    def _reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> ChatResponse:
        self.offered.append([spec.name for spec in parameters.tools or ()])
        if isinstance(messages[-1], ToolResultMessage):
            return ChatResponse(ai_message=AiMessage(text="done"), token_usage=USAGE)
        return ChatResponse(ai_message=AiMessage(tool_calls=[self.call]), token_usage=USAGE)


def charging() -> tuple[Any, list[int]]:
    """A fresh `charge` tool (so a test may change its settings) and the charges it made."""
    charged: list[int] = []

    @tool
    def charge(cents: int) -> str:
        """Charge the card."""
        charged.append(cents)
        return "charged"

    return charge, charged


def plain_service() -> tuple[ToolService[Any], list[int]]:
    """A service with only plain settings, after one plain run of every driver."""
    charge, charged = charging()
    service: ToolService[Any] = ToolService([charge])
    for driver in DRIVERS:
        assert drive(driver, service, Script().model, "Charge it.").text == "done"
    charged.clear()
    return service, charged


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_tool_registered_with_approval_later_pauses_the_run(driver: str) -> None:
    service, _ = plain_service()
    refunded: list[int] = []

    @tool(requires_approval=True)
    def refund(cents: int) -> str:
        """Refund the card."""
        refunded.append(cents)
        return "refunded"

    service.register(refund)
    result = drive(driver, service, Script("refund").model, "Refund it.")
    assert [(p.call.id, p.reason) for p in result.pending] == [("c1", "approval")]
    assert refunded == []


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("setting", ["requires_approval", "external"])
def test_a_policy_set_on_a_registered_tool_later_pauses_the_run(driver: str, setting: str) -> None:
    service, charged = plain_service()
    setattr(service.tools[0], setting, True)  # read from the tool on every call, never cached
    result = drive(driver, service, Script().model, "Charge it.")
    expected = "approval" if setting == "requires_approval" else "external"
    assert [(p.call.id, p.reason) for p in result.pending] == [("c1", expected)]
    assert charged == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_history_that_ends_with_unanswered_calls_runs_them_first(driver: str) -> None:
    service, charged = plain_service()
    script = Script()
    history: list[ChatMessage] = [
        UserMessage(content="Charge it."),
        AiMessage(tool_calls=[script.call]),
    ]
    result = drive(driver, service, script.model, history)
    assert charged == [5]
    assert len(script.offered) == 1  # the resumed round needs no model call
    assert isinstance(result.messages[2], ToolResultMessage)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_limit_given_per_call_applies(driver: str) -> None:
    service, charged = plain_service()
    with pytest.raises(UsageLimitExceededError) as raised:
        drive(driver, service, Script().model, "Charge it.", usage_limits=UsageLimits(0, 0))
    assert raised.value.limit == "request_limit"
    with pytest.raises(UsageLimitExceededError) as raised:
        drive(driver, service, Script().model, "Charge it.", usage_limits=UsageLimits(None, 0))
    assert raised.value.limit == "tool_calls_limit"
    assert charged == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_limit_set_on_the_service_later_applies(driver: str) -> None:
    service, charged = plain_service()
    service.usage_limits = UsageLimits(total_tokens_limit=11)
    with pytest.raises(UsageLimitExceededError) as raised:
        drive(driver, service, Script().model, "Charge it.")
    assert (raised.value.limit, raised.value.value) == ("total_tokens_limit", 12)
    assert charged == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_hooks_set_on_the_service_later_run(driver: str) -> None:
    service, charged = plain_service()
    seen: list[str] = []

    def before(call: ToolCall, context: ToolContext[Any]) -> str:
        seen.append(f"before {call.id} attempt {context.attempt}")
        return "charged elsewhere"

    def after(execution: ToolExecution) -> None:
        seen.append(f"after {execution.result.text}")

    service.before_tool_call, service.after_tool_call = before, after
    result = drive(driver, service, Script().model, "Charge it.")
    assert seen == ["before c1 attempt 1", "after charged elsewhere"]
    assert [e.result.text for e in result.tool_executions] == ["charged elsewhere"]
    assert charged == []


@pytest.mark.parametrize("driver", ["chat", "stream"])
def test_an_async_hook_set_later_is_refused_by_a_blocking_run(driver: str) -> None:
    service, charged = plain_service()

    async def after(execution: ToolExecution) -> None:
        await asyncio.sleep(0)

    service.after_tool_call = after
    script = Script()
    with pytest.raises(TypeError, match="after_tool_call is an async function"):
        drive(driver, service, script.model, "Charge it.")
    assert script.offered == [] and charged == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_deps_type_set_on_the_service_later_is_checked(driver: str) -> None:
    service, _ = plain_service()
    service.deps_type = int
    with pytest.raises(TypeError, match="deps must be an instance of int"):
        drive(driver, service, Script().model, "Charge it.", deps="not an int")
    assert drive(driver, service, Script().model, "Charge it.", deps=7).text == "done"


@pytest.mark.parametrize("driver", DRIVERS)
def test_tool_selection_set_later_or_given_per_call_applies(driver: str) -> None:
    service, charged = plain_service()

    @tool
    def refund(cents: int) -> str:
        """Refund the card."""
        return "refunded"

    service.register(refund)
    script = Script()
    with pytest.raises(UnknownToolError):  # not offered, so not callable
        drive(driver, service, script.model, "Charge it.", tools=["refund"])
    assert script.offered == [["refund"]]
    assert charged == []

    def only_charge(
        ctx: PrepareContext[Any], specifications: Sequence[ToolSpecification]
    ) -> Sequence[ToolSpecification]:
        return [s for s in specifications if s.name == "charge"]

    service.prepare_tools = only_charge
    script = Script()
    drive(driver, service, script.model, "Charge it.")
    assert script.offered == [["charge"], ["charge"]]
    assert charged == [5]


@pytest.mark.parametrize("driver", DRIVERS)
def test_instrumentation_switched_on_later_traces_the_run(driver: str) -> None:
    service, _ = plain_service()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with af.instrument(provider):
        drive(driver, service, Script().model, "Charge it.")
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat function", "chat function", "execute_tool charge", "invoke_agent"]
    drive(driver, service, Script().model, "Charge it.")  # switched off again: nothing recorded
    assert len(exporter.get_finished_spans()) == 4


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_runs_result_has_every_field_and_behaves_like_one_built_by_hand(driver: str) -> None:
    service, _ = plain_service()
    result = drive(driver, service, Script().model, "Charge it.")
    assert vars(result).keys() == {f.name for f in fields(ToolChatResult)}
    assert type(result) is FinishedChatResult and not result.paused
    assert result == FinishedChatResult(**vars(result))
    assert pickle.loads(pickle.dumps(result)) == result
    assert replace(result, output=1).output == 1
    with pytest.raises(AttributeError):
        result.output = 1  # type: ignore[misc]
    # Usage is summed as the responses arrive.
    assert result.usage == USAGE + USAGE
    assert result.tool_executions[0].result == ToolExecutionResult("charged", "charged")
