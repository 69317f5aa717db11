"""Static-typing contract of guardrails and the decision on each call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from typing_extensions import assert_type

from agentforge_typed import ChatMessage, ToolExecution, ToolService
from agentforge_typed.loop import (
    Block,
    CallCheck,
    CallDecision,
    CallRule,
    Guardrail,
    GuardrailError,
    GuardrailOutcome,
    Redact,
    RunOutput,
    call_guardrail,
    input_guardrail,
    max_cost_per_call,
    output_guardrail,
    redact_secrets,
    result_guardrail,
)


@input_guardrail
def on_topic(messages: Sequence[ChatMessage]) -> Block | None:
    return None


@input_guardrail(name="async_on_topic", concurrent=True)
async def async_on_topic(messages: Sequence[ChatMessage]) -> Block | None:
    return None


@call_guardrail
async def small(check: CallCheck) -> Block | None:
    return Block("too big") if check.arguments.cents > 100 else None


@result_guardrail
def scrub(execution: ToolExecution) -> Redact | None:
    return Redact(execution.result.text.replace("x", "*"), "scrubbed")


@output_guardrail(name="polite")
def polite(output: RunOutput) -> Block | None:
    return None


assert_type(on_topic, Guardrail[Sequence[ChatMessage]])
assert_type(async_on_topic, Guardrail[Sequence[ChatMessage]])
assert_type(small, Guardrail[CallCheck])
assert_type(scrub, Guardrail[ToolExecution])
assert_type(polite, Guardrail[RunOutput])
assert_type(redact_secrets(), Guardrail[ToolExecution])
assert_type(redact_secrets(cards=False, patterns=[r"E-\d+"]), Guardrail[ToolExecution])
assert_type(max_cost_per_call(100, "cents"), Guardrail[CallCheck])
assert_type(max_cost_per_call(1.5, lambda check: 2.0, tools=["pay"]), Guardrail[CallCheck])
assert_type(on_topic.name, str)

service = ToolService(
    guardrails=[on_topic, small, scrub, polite, redact_secrets()],
    rules=[
        CallRule.allow(["refund"], when=lambda arguments: arguments.cents < 10),
        CallRule.ask(["group:money"], annotation="destructive", reason="a person decides"),
        CallRule.refuse(name="lockdown", reason="closed"),
    ],
)

decision = CallDecision("refused", "rule:lockdown", "closed")
assert_type(decision.outcome, Literal["allowed", "asked", "refused"])
assert_type(decision.rule, str)
assert_type(decision.reason, str | None)


def record(execution: ToolExecution) -> None:
    assert_type(execution.decision, CallDecision)
    assert_type(execution.guardrails, tuple[GuardrailOutcome, ...])


def caught(error: GuardrailError) -> None:
    assert_type(error.guardrail, str)
    assert_type(error.reason, str)
    assert_type(error.point, str)


def misuse(messages: Sequence[ChatMessage]) -> Any:
    ToolService(guardrails=[on_topic.check])  # type: ignore[list-item]
    ToolService(rules=[lambda call: True])  # type: ignore[list-item]
    CallRule.ask(annotation="scary")  # type: ignore[arg-type]
    Redact(42)  # type: ignore[arg-type]
    return result_guardrail(lambda messages, extra: None)  # type: ignore[arg-type,misc]
