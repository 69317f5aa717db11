"""Guardrails: typed checks at the run's input, each call's validated arguments, each result and
the final output, sync or async, under every driver; a check that raises blocks (fails closed);
the two ready ones (`redact_secrets`, `max_cost_per_call`)."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from agentforge_typed import (
    AiMessage,
    Block,
    CallCheck,
    CallDecision,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    Guardrail,
    GuardrailError,
    GuardrailOutcome,
    Redact,
    RunOutput,
    ToolCall,
    ToolChatResult,
    ToolExecution,
    ToolResultMessage,
    ToolService,
    UserMessage,
    call_guardrail,
    input_guardrail,
    instrument,
    max_cost_per_call,
    output_guardrail,
    redact_secrets,
    result_guardrail,
    tool,
)
from agentforge_typed.loop._guardrails import luhn_valid

ran: list[str] = []


@tool
def pay(cents: int) -> str:
    """Pay an amount."""
    ran.append(f"pay {cents}")
    return f"paid {cents}"


@tool
def leak() -> dict[str, str]:
    """Return something with a secret in it."""
    ran.append("leak")
    return {"key": "AKIAABCDEFGHIJKLMNOP", "card": "4111 1111 1111 1111"}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


class Scripted:
    """A model that calls `name` once, then answers with the text of the result it read; it
    counts its calls."""

    def __init__(self, name: str = "pay", arguments: str = '{"cents": 250}') -> None:
        self.name, self.arguments, self.calls = name, arguments, 0

    def __call__(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.calls += 1
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return AiMessage(text=f"read: {last.text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=self.name, arguments=self.arguments)])


def _service(*guardrails: Guardrail[Any], tools: Sequence[Any] = (pay, leak)) -> ToolService[None]:
    return ToolService(list(tools), guardrails=list(guardrails))


# -- input ---------------------------------------------------------------------------------------


@input_guardrail
def no_passwords(messages: Sequence[ChatMessage]) -> Block | None:
    for message in messages:
        if isinstance(message, UserMessage) and "password" in str(message.content):
            return Block("the input asks about passwords")
    return None


@input_guardrail(name="no_passwords_async")
async def no_passwords_async(messages: Sequence[ChatMessage]) -> Block | None:
    await asyncio.sleep(0)
    return no_passwords.check(messages)  # type: ignore[return-value]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("guardrail", [no_passwords, no_passwords_async], ids=["sync", "async"])
def test_a_blocked_input_ends_the_run_before_any_model_call(
    driver: str, guardrail: Guardrail[Any]
) -> None:
    script = Scripted()
    with pytest.raises(GuardrailError) as raised:
        drive(driver, _service(guardrail), FunctionModel(script), "what is the admin password?")
    error = raised.value
    assert script.calls == 0 and ran == []
    assert (error.guardrail, error.point, error.reason) == (
        guardrail.name,
        "input",
        "the input asks about passwords",
    )
    assert str(error) == (
        f"guardrail {guardrail.name!r} blocked the input: the input asks about passwords"
    )
    assert error.messages == (UserMessage(content="what is the admin password?"),)
    assert error.tool_executions == ()


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_allowed_input_runs_as_without_guardrails(driver: str) -> None:
    result = drive(driver, _service(no_passwords_async), FunctionModel(Scripted()), "pay 250")
    assert result.text == "read: paid 250" and ran == ["pay 250"]


def test_the_input_is_checked_once_per_run_not_per_round() -> None:
    seen: list[int] = []

    @input_guardrail
    def count(messages: Sequence[ChatMessage]) -> None:
        seen.append(len(messages))

    ToolService([pay], guardrails=[count]).chat(FunctionModel(Scripted()), "pay")
    assert seen == [1]


# -- what a check answers ------------------------------------------------------------------------


class CheckBrokeError(Exception):
    pass


def _raises(subject: object) -> Any:
    raise CheckBrokeError("the check raised this: sk-live-secret-in-the-message")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("point", ["input", "output"])
def test_an_input_or_output_guardrail_that_raises_blocks_with_its_cause(
    driver: str, point: str
) -> None:
    guardrail = Guardrail("broken", point, _raises)  # type: ignore[arg-type]
    with pytest.raises(GuardrailError) as raised:
        drive(driver, _service(guardrail), FunctionModel(Scripted()), "pay")
    error = raised.value
    assert error.reason == "the guardrail raised CheckBrokeError"
    assert isinstance(error.__cause__, CheckBrokeError)
    assert "sk-live" not in str(error)
    assert error.messages[0] == UserMessage(content="pay")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (True, "answered bool, not None, Block or Redact"),
        ("no", "answered str, not None, Block or Redact"),
        (Redact("x"), "answered Redact at the input, not at a result"),
    ],
)
def test_an_input_check_that_answers_anything_but_a_verdict_blocks(answer: Any, why: str) -> None:
    guardrail = input_guardrail(lambda messages: answer, name="odd")
    with pytest.raises(GuardrailError, match=re.escape(why)):
        _service(guardrail).chat(FunctionModel(Scripted()), "pay")


def test_a_sync_check_that_returns_a_coroutine_blocks_and_the_coroutine_is_closed() -> None:
    async def verdict() -> None:
        return None

    guardrail = input_guardrail(lambda messages: verdict(), name="sloppy")
    with pytest.raises(GuardrailError, match="an awaitable from a sync function"):
        _service(guardrail).chat(FunctionModel(Scripted()), "pay")


def test_guardrails_are_refused_when_they_are_not_guardrails() -> None:
    with pytest.raises(TypeError, match="guardrails take Guardrail objects"):
        ToolService([pay], guardrails=[no_passwords.check])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="check must be callable"):
        call_guardrail(42)  # type: ignore[call-overload]


# -- calls ---------------------------------------------------------------------------------------


@call_guardrail
def at_most_100(check: CallCheck) -> Block | None:
    if check.call.name == "pay" and check.arguments.cents > 100:
        return Block(f"{check.arguments.cents} cents is over 100")
    return None


@call_guardrail(name="at_most_100_async")
async def at_most_100_async(check: CallCheck) -> Block | None:
    await asyncio.sleep(0)
    return at_most_100.check(check)  # type: ignore[return-value]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("guardrail", [at_most_100, at_most_100_async], ids=["sync", "async"])
def test_a_blocked_call_is_an_error_the_model_reads_and_its_body_never_runs(
    driver: str, guardrail: Guardrail[Any]
) -> None:
    result = drive(driver, _service(guardrail), FunctionModel(Scripted()), "pay")
    assert ran == []
    (execution,) = result.tool_executions
    text = f"The call to `pay` was blocked by guardrail {guardrail.name!r}: 250 cents is over 100"
    assert execution.result.text == text and execution.result.error_kind == "denied"
    assert result.text == f"read: {text}"
    assert execution.decision == CallDecision(
        "refused", f"guardrail:{guardrail.name}", "250 cents is over 100"
    )
    assert execution.guardrails == (
        GuardrailOutcome(guardrail.name, "call", "blocked", "250 cents is over 100"),
    )


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_allowed_call_runs_and_its_check_saw_the_validated_arguments(driver: str) -> None:
    seen: list[Any] = []

    @call_guardrail
    async def look(check: CallCheck) -> None:
        seen.append((check.arguments, check.context.tool_call_id, check.tool))

    model = FunctionModel(Scripted(arguments='{"cents": 7}'))
    result = drive(driver, _service(look), model, "p")
    ((arguments, call_id, checked_tool),) = seen
    assert isinstance(arguments, BaseModel) and arguments.cents == 7  # type: ignore[attr-defined]
    assert (call_id, checked_tool, ran) == ("c1", pay, ["pay 7"])
    assert result.tool_executions[0].decision == CallDecision("allowed", "default")


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_call_guardrail_that_raises_refuses_the_call(driver: str) -> None:
    guardrail = call_guardrail(_raises, name="broken")
    result = drive(driver, _service(guardrail), FunctionModel(Scripted()), "pay")
    assert ran == []
    (execution,) = result.tool_executions
    assert execution.result.text == (
        "The call to `pay` was blocked by guardrail 'broken': the guardrail raised CheckBrokeError"
    )
    assert isinstance(execution.result.exception, CheckBrokeError)
    assert "sk-live" not in str(result.messages)


def test_a_call_with_invalid_arguments_is_not_checked_and_does_not_run() -> None:
    checked: list[str] = []

    @call_guardrail
    def note(check: CallCheck) -> None:
        checked.append(check.call.name)

    result = _service(note).chat(FunctionModel(Scripted(arguments='{"cents": "x"}')), "pay")
    assert checked == [] and ran == []
    assert result.tool_executions[0].result.error_kind == "arguments"


def test_a_schema_tools_arguments_reach_the_check_as_a_dict() -> None:
    from agentforge_typed import ToolSpecification

    seen: list[Any] = []
    service = ToolService(guardrails=[call_guardrail(lambda c: seen.append(c.arguments), name="n")])
    spec = ToolSpecification(
        name="pay",
        description="Pay.",
        parameters={"type": "object", "properties": {"cents": {"type": "integer"}}},
    )
    service.register_spec(spec, lambda arguments: "ok")
    service.chat(FunctionModel(Scripted()), "pay")
    assert seen == [{"cents": 250}]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_guardrail_blocks_an_approved_call_too(driver: str) -> None:
    @tool(requires_approval=True)
    def wire(cents: int) -> str:
        """Wire money."""
        ran.append("wire")
        return "wired"

    checked: list[str] = []

    @call_guardrail
    def never(check: CallCheck) -> Block:
        checked.append(check.call.name)
        return Block("no wires today")

    service = _service(never, tools=[wire])
    model = FunctionModel(Scripted("wire"))
    paused = drive(driver, service, model, "wire")
    (pending,) = paused.pending
    assert paused.tool_executions == () and checked == []  # asked first: nothing runs yet
    result = drive(driver, service, model, paused.messages, approvals={pending.call.id: True})
    assert ran == [] and checked == ["wire"]
    (execution,) = result.tool_executions
    assert execution.decision == CallDecision("refused", "guardrail:never", "no wires today")


# -- results -------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_secrets_are_redacted_before_the_model_reads_them(driver: str) -> None:
    result = drive(driver, _service(redact_secrets()), FunctionModel(Scripted("leak", "{}")), "x")
    (execution,) = result.tool_executions
    assert "AKIA" not in execution.result.text and "4111" not in execution.result.text
    assert "[REDACTED AWS access key]" in execution.result.text
    assert "[REDACTED card number]" in execution.result.text
    assert "AKIA" not in str(result.messages) and "AKIA" not in (result.text or "")
    # The program keeps what the tool returned.
    assert execution.result.value == {"key": "AKIAABCDEFGHIJKLMNOP", "card": "4111 1111 1111 1111"}
    assert execution.guardrails == (
        GuardrailOutcome(
            "redact_secrets",
            "result",
            "redacted",
            "redacted 2 secret(s): AWS access key, card number",
        ),
    )


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_blocked_result_is_withheld_from_the_model(driver: str) -> None:
    @result_guardrail
    async def withhold(execution: ToolExecution) -> Block | None:
        return Block("it mentions a key") if "key" in execution.result.text else None

    result = drive(driver, _service(withhold), FunctionModel(Scripted("leak", "{}")), "x")
    (execution,) = result.tool_executions
    assert ran == ["leak"]  # the body ran: its result is what was withheld
    text = "The result of `leak` was withheld by guardrail 'withhold': it mentions a key"
    assert execution.result.text == text and execution.result.is_error
    assert "AKIA" not in str(result.messages)
    assert execution.guardrails[0].action == "blocked"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_result_guardrail_that_raises_withholds_the_result(driver: str) -> None:
    guardrail = result_guardrail(_raises, name="broken")
    result = drive(driver, _service(guardrail), FunctionModel(Scripted("leak", "{}")), "x")
    (execution,) = result.tool_executions
    assert execution.result.text == (
        "The result of `leak` was withheld by guardrail 'broken': the guardrail raised "
        "CheckBrokeError"
    )
    assert "AKIA" not in str(result.messages)


def test_result_guardrails_run_in_order_each_on_what_the_one_before_left() -> None:
    seen: list[str] = []

    @result_guardrail
    def after(execution: ToolExecution) -> None:
        seen.append(execution.result.text)

    result = _service(redact_secrets(), after).chat(FunctionModel(Scripted("leak", "{}")), "x")
    assert seen == [result.tool_executions[0].result.text]
    assert "AKIA" not in seen[0]


def test_a_redaction_comes_before_the_result_budget() -> None:
    @tool(max_result_chars=100)
    def long() -> str:
        """A long result."""
        return "password=hunter2hunter2 " + "x" * 500

    result = _service(redact_secrets(), tools=[long]).chat(
        FunctionModel(Scripted("long", "{}")), "x"
    )
    execution = result.tool_executions[0]
    assert "hunter2" not in execution.result.text
    assert execution.result.full_text is not None and "hunter2" not in execution.result.full_text


def test_a_call_that_waits_is_not_a_result_to_check() -> None:
    checked: list[str] = []

    @tool(requires_approval=True)
    def wire() -> str:
        """Wire."""
        return "wired"

    guardrail = result_guardrail(lambda e: checked.append(e.call.name), name="note")
    result = _service(guardrail, tools=[wire]).chat(FunctionModel(Scripted("wire", "{}")), "x")
    assert result.pending and checked == []


# -- output --------------------------------------------------------------------------------------


@output_guardrail
def no_numbers(output: RunOutput) -> Block | None:
    return Block("the answer quotes a number") if re.search(r"\d", output.text or "") else None


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_blocked_output_ends_the_run_with_its_history(driver: str) -> None:
    script = Scripted()
    with pytest.raises(GuardrailError) as raised:
        drive(driver, _service(no_numbers), FunctionModel(script), "pay")
    error = raised.value
    assert (error.guardrail, error.point) == ("no_numbers", "output")
    assert script.calls == 2 and ran == ["pay 250"]
    assert [e.result.text for e in error.tool_executions] == ["paid 250"]
    assert error.messages[-1] == AiMessage(text="read: paid 250")


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_output_guardrail_sees_the_typed_output(driver: str) -> None:
    class Answer(BaseModel):
        cents: int

    seen: list[Any] = []

    @output_guardrail
    async def look(output: RunOutput) -> None:
        seen.append(output.output)

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(
            tool_calls=[ToolCall(id="o", name="final_result", arguments='{"cents": 3}')]
        )

    result = drive(driver, _service(look), FunctionModel(answer), "x", output_type=Answer)
    assert result.output == Answer(cents=3) and seen == [Answer(cents=3)]


def test_a_paused_run_has_no_output_to_check() -> None:
    @tool(requires_approval=True)
    def wire() -> str:
        """Wire."""
        return "wired"

    checked: list[object] = []
    guardrail = output_guardrail(lambda output: checked.append(output), name="note")
    result = _service(guardrail, tools=[wire]).chat(FunctionModel(Scripted("wire", "{}")), "x")
    assert result.pending and checked == []


# -- tracing -------------------------------------------------------------------------------------


def test_guardrails_and_decisions_are_recorded_on_the_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(
            tool_calls=[
                ToolCall(id="c1", name="pay", arguments='{"cents": 250}'),
                ToolCall(id="c2", name="leak", arguments="{}"),
            ]
        )

    service = _service(at_most_100, redact_secrets())
    with instrument(tracer_provider=provider):
        service.chat(FunctionModel(model), "go")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    paid = spans["execute_tool pay"].attributes or {}
    assert paid["agentforge.tool.decision"] == "refused"
    assert paid["agentforge.tool.decision.rule"] == "guardrail:at_most_100"
    assert list(paid["agentforge.tool.guardrails"]) == ["at_most_100:call:blocked"]  # type: ignore[arg-type]
    leaked = spans["execute_tool leak"].attributes or {}
    assert "agentforge.tool.decision" not in leaked
    assert list(leaked["agentforge.tool.guardrails"]) == ["redact_secrets:result:redacted"]  # type: ignore[arg-type]
    run = spans["invoke_agent"]
    events = [dict(e.attributes or {}) for e in run.events if e.name == "agentforge.guardrail"]
    assert events == [
        {
            "agentforge.guardrail.name": "at_most_100",
            "agentforge.guardrail.point": "call",
            "agentforge.guardrail.action": "blocked",
        },
        {
            "agentforge.guardrail.name": "redact_secrets",
            "agentforge.guardrail.point": "result",
            "agentforge.guardrail.action": "redacted",
        },
    ]


def test_a_blocked_input_is_an_event_on_the_failed_runs_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrument(tracer_provider=provider), pytest.raises(GuardrailError):
        _service(no_passwords).chat(FunctionModel(Scripted()), "the password?")
    (run,) = exporter.get_finished_spans()
    (event,) = run.events
    assert event.name == "agentforge.guardrail"
    assert (event.attributes or {})["agentforge.guardrail.point"] == "input"
    assert (run.attributes or {})["error.type"] == "GuardrailError"


# -- the ready ones ------------------------------------------------------------------------------

SECRETS = {
    "AWS access key": "AKIAIOSFODNN7EXAMPLE",
    "GitHub token": "ghp_" + "a1B2" * 9,
    "Slack token": "xoxb-1234567890-abcdefghij",
    "Google API key": "AIza" + "B" * 35,
    "Stripe key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "API key": "sk-proj-" + "x" * 40,
    "JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "bearer token": "Bearer abcdefghijklmnopqrstuvwxyz0123",
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
}


def _redact(text: str, **options: Any) -> tuple[str, str | None]:
    check: Callable[[ToolExecution], Any] = redact_secrets(**options).check
    from datetime import datetime, timezone

    from agentforge_typed import ToolExecutionResult

    now = datetime.now(timezone.utc)
    verdict = check(ToolExecution(ToolCall(id="c", name="t"), ToolExecutionResult(text), now, now))
    if verdict is None:
        return text, None
    assert isinstance(verdict, Redact)
    return verdict.text, verdict.reason


@pytest.mark.parametrize("kind", SECRETS)
def test_each_kind_of_secret_is_redacted(kind: str) -> None:
    text, reason = _redact(f"before {SECRETS[kind]} after")
    assert SECRETS[kind] not in text and text.startswith("before ") and text.endswith(" after")
    assert reason is not None and kind in reason


def test_an_assignment_keeps_its_name_and_loses_its_value() -> None:
    text, _ = _redact('{"password": "correct horse battery", "api_key": "abcd1234efgh"}')
    assert "abcd1234efgh" not in text and '"api_key": "[REDACTED secret]' in text
    assert "correct" not in text


def test_card_numbers_are_redacted_only_when_they_pass_luhn() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    text, reason = _redact("card 4111-1111-1111-1111, order 4111111111111112, id 12345")
    assert text == "card [REDACTED card number], order 4111111111111112, id 12345"
    assert reason == "redacted 1 secret(s): card number"
    assert _redact("4111 1111 1111 1111", cards=False)[1] is None


def test_a_text_without_secrets_is_left_alone_and_custom_patterns_count() -> None:
    assert _redact("nothing to see: 42 apples") == ("nothing to see: 42 apples", None)
    text, reason = _redact("employee E-12345 called", patterns=[r"E-\d{5}"], replacement="<{kind}>")
    assert text == "employee <custom> called" and reason == "redacted 1 secret(s): custom"


def test_the_redactor_is_linear_on_hostile_text() -> None:
    import time

    def timed(n: int) -> float:
        text = ("4" * 18 + " ") * n + "sk-" * n + "password=" * n + "eyJ" * n
        start = time.process_time()
        _redact(text)
        return time.process_time() - start

    small, large = timed(2_000), timed(16_000)
    assert large < small * 8 * 4 + 0.05


class Payment(BaseModel):
    cents: int


@pytest.mark.parametrize(
    ("arguments", "blocked"),
    [
        ('{"cents": 100}', None),
        ('{"cents": 101}', "it costs 101, over the 100 allowed per call"),
    ],
)
def test_max_cost_per_call_reads_an_argument(arguments: str, blocked: str | None) -> None:
    guardrail = max_cost_per_call(100, "cents")
    result = _service(guardrail).chat(FunctionModel(Scripted(arguments=arguments)), "pay")
    execution = result.tool_executions[0]
    if blocked is None:
        assert ran == [f"pay {arguments[10:13]}"]
    else:
        assert ran == [] and execution.decision.reason == blocked


def test_max_cost_per_call_takes_a_function_and_a_scope() -> None:
    guardrail = max_cost_per_call(1.5, lambda check: check.arguments.cents / 100, tools=["pay"])
    result = _service(guardrail).chat(FunctionModel(Scripted()), "pay")
    assert (
        result.tool_executions[0].decision.reason == "it costs 2.5, over the 1.5 allowed per call"
    )
    # `leak` is out of scope; in scope, a tool without the argument is blocked.
    assert _service(guardrail).chat(FunctionModel(Scripted("leak", "{}")), "x").tool_executions[
        0
    ].decision == CallDecision("allowed", "default")
    scoped = max_cost_per_call(10, "cents", tools=["leak"])
    blocked = _service(scoped).chat(FunctionModel(Scripted("leak", "{}")), "x")
    assert blocked.tool_executions[0].decision.reason == "its cost could not be read (NoneType)"
    unscoped = _service(max_cost_per_call(10, "cents")).chat(
        FunctionModel(Scripted("leak", "{}")), "x"
    )
    assert unscoped.tool_executions[0].decision == CallDecision("allowed", "default")


@pytest.mark.parametrize("cost", [math.nan, math.inf, -1, True, "3"])
def test_a_cost_that_is_not_a_finite_number_blocks(cost: Any) -> None:
    guardrail = max_cost_per_call(10, lambda check: cost)
    result = _service(guardrail).chat(FunctionModel(Scripted()), "pay")
    assert ran == []
    assert (result.tool_executions[0].decision.reason or "").startswith(
        "its cost could not be read"
    )


@pytest.mark.parametrize("limit", [math.nan, -1, math.inf])
def test_max_cost_per_call_needs_a_finite_limit(limit: float) -> None:
    with pytest.raises(ValueError, match="finite limit of at least 0"):
        max_cost_per_call(limit, "cents")
    with pytest.raises(TypeError, match="collection of tool names"):
        max_cost_per_call(1, "cents", tools="pay")


def test_a_value_an_earlier_pattern_redacted_is_counted_once() -> None:
    token = SECRETS["GitHub token"]
    text, reason = _redact(f'{{"token": "{token}"}}')
    assert text == '{"token": "[REDACTED GitHub token]"}'
    assert reason == "redacted 1 secret(s): GitHub token"


def test_a_guardrail_built_directly_knows_its_check_is_async_and_its_point() -> None:
    async def check(messages: Sequence[ChatMessage]) -> Block:
        return Block("async, built by hand")

    built = Guardrail("by_hand", "input", check)
    assert built.is_async
    with pytest.raises(GuardrailError, match="async, built by hand"):
        _service(built).chat(FunctionModel(Scripted()), "pay")
    with pytest.raises(ValueError, match="point is 'input', 'call', 'result' or 'output', not 'x'"):
        Guardrail("bad", "x", check)  # type: ignore[arg-type]


def test_a_decimal_cost_is_read() -> None:
    from decimal import Decimal

    guardrail = max_cost_per_call(2, lambda check: Decimal("2.50"))
    result = _service(guardrail).chat(FunctionModel(Scripted()), "pay")
    assert result.tool_executions[0].decision.reason == "it costs 2.5, over the 2 allowed per call"


# -- concurrent input guardrails -----------------------------------------------------------------


class Gate:
    """A model whose answer waits for the input check to start (which proves they overlap),
    and a check that waits for the model call to start."""

    def __init__(self, verdict: Block | None) -> None:
        self.verdict = verdict
        self.model_started = asyncio.Event()
        self.check_started = asyncio.Event()
        self.answered = 0

    async def model(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.model_started.set()
        await asyncio.wait_for(self.check_started.wait(), 5)
        self.answered += 1
        return Scripted()(messages, parameters)

    def guardrail(self) -> Guardrail[Sequence[ChatMessage]]:
        @input_guardrail(concurrent=True)
        async def moderated(messages: Sequence[ChatMessage]) -> Block | None:
            self.check_started.set()
            await asyncio.wait_for(self.model_started.wait(), 5)
            return self.verdict

        return moderated


@pytest.mark.parametrize("driver", ["achat", "astream"])
def test_a_concurrent_input_guardrail_runs_alongside_the_first_model_call(driver: str) -> None:
    gate = Gate(None)
    result = drive(driver, _service(gate.guardrail()), FunctionModel(gate.model), "pay")
    assert result.text == "read: paid 250" and ran == ["pay 250"]


def test_a_concurrent_block_cancels_the_model_call_under_achat() -> None:
    gate = Gate(Block("moderated"))
    with pytest.raises(GuardrailError, match="blocked the input: moderated") as raised:
        drive("achat", _service(gate.guardrail()), FunctionModel(gate.model), "pay")
    assert ran == [] and gate.answered in (0, 1)
    assert raised.value.messages == (UserMessage(content="pay"),)  # no answer was read


def test_a_concurrent_block_streams_nothing_of_the_answer() -> None:
    gate = Gate(Block("moderated"))
    events: list[object] = []

    async def consume() -> None:
        service = _service(gate.guardrail())
        async for event in service.astream(FunctionModel(gate.model), "pay"):
            events.append(event)

    with pytest.raises(GuardrailError, match="moderated"):
        asyncio.run(consume())
    assert events == [] and ran == []


@pytest.mark.parametrize("driver", ["chat", "stream"])
def test_a_concurrent_input_guardrail_runs_first_under_a_blocking_driver(driver: str) -> None:
    script = Scripted()
    guardrail = input_guardrail(lambda messages: Block("no"), name="first", concurrent=True)
    with pytest.raises(GuardrailError):
        drive(driver, _service(guardrail), FunctionModel(script), "pay")
    assert script.calls == 0


def test_only_an_input_guardrail_may_be_concurrent() -> None:
    with pytest.raises(ValueError, match="only an input guardrail may be concurrent"):
        Guardrail("late", "output", lambda output: None, concurrent=True)


def test_two_conversations_on_one_guarded_service_never_cross() -> None:
    """Scoped: what a guardrail decided for one run (a block, a redaction, a concurrent check
    in flight) is that run's alone, with both runs interleaved on one service."""

    @output_guardrail
    async def no_secrets(output: RunOutput) -> Block | None:
        await asyncio.sleep(0)
        return Block("it quotes a key") if "REDACTED" in (output.text or "") else None

    @input_guardrail(concurrent=True)
    async def slow(messages: Sequence[ChatMessage]) -> None:
        await asyncio.sleep(0.01)

    service = _service(slow, redact_secrets(), no_secrets)

    async def both() -> Sequence[Any]:
        return await asyncio.gather(
            service.achat(FunctionModel(Scripted("leak", "{}")), "leak"),
            service.achat(FunctionModel(Scripted()), "pay"),
            return_exceptions=True,
        )

    leaked, paid = asyncio.run(both())
    assert isinstance(leaked, GuardrailError) and leaked.point == "output"
    assert isinstance(paid, ToolChatResult) and paid.text == "read: paid 250"
    assert paid.tool_executions[0].guardrails == ()
    assert sorted(ran) == ["leak", "pay 250"]
