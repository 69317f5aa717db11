"""Contained: nothing a tool, a validator, a hook, a pricing table, a server or the telemetry does
escapes a run as a bare exception, and a failed run carries its history.

For every tool kind (a handler that raises, a value that cannot be serialised, a validator of the
program's own that raises something odd), every provider that reads a server (an answer that is
not even JSON), every hook of `ToolService` (each raising) and every driver, the run either
completes, the model reading an error result, or fails with an `AgentForgeError` that carries
`.messages` (its history, resumable as it is). Where the guide documents that the program's own
exception propagates (a hook or handler that raises ends the run with it), it propagates as it
is and carries the same history. Telemetry (a span processor, an exporter, a meter) and pricing
never fail a run at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from conformance import DRIVER, HOOK, PROVIDER, TEXT, TOOL, Parameters, Surface, assert_registered
from http_server import Reply, Request, ScriptedServer
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from pydantic import AfterValidator, BaseModel, field_serializer

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers import _tracing as instrument_module

# -- telemetry -----------------------------------------------------------------------------------


class TelemetryBrokeError(Exception):
    """What a broken telemetry pipeline raises."""


class RaisingProcessor(SpanProcessor):
    """A span processor of the program's own that raises in `on_start`, `on_end` or both."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if self.where in ("on_start", "both"):
            raise TelemetryBrokeError("on_start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where in ("on_end", "both"):
            raise TelemetryBrokeError("on_end")


class _RaisingEverywhere:
    """A span (or a histogram) whose every method raises."""

    def __getattr__(self, name: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> Any:
            raise TelemetryBrokeError(name)

        return method


class RaisingTracerProvider(NoOpTracerProvider):
    """A tracer provider whose tracers raise when a span starts (`"start"`) or return spans
    whose every method raises (`"span"`)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        where = self.where

        class Tracer:
            def start_span(self, *args: Any, **kwargs: Any) -> Any:
                if where == "start":
                    raise TelemetryBrokeError("start_span")
                return _RaisingEverywhere()

        return Tracer()


class RaisingMeterProvider(NoOpMeterProvider):
    """A meter provider whose histograms raise when they record."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        class Meter:
            def create_histogram(self, *args: Any, **kwargs: Any) -> Any:
                return _RaisingEverywhere()

        return Meter()


ran: list[str] = []


@tool
def pay(cents: int) -> str:
    """Pay `cents` (a side effect: it must run once, and its result must come back)."""
    ran.append(f"pay {cents}")
    return f"paid {cents}"


def _pays_then_answers(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters
) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=f"done: {messages[-1].text}")
    return AiMessage(tool_calls=[ToolCall(id="c1", name="pay", arguments='{"cents": 250}')])


@pytest.fixture(autouse=True)
def _fresh_log_interval(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the telemetry log's interval over."""
    monkeypatch.setattr(instrument_module, "_failures", instrument_module._Failures())
    ran.clear()
    yield


def _telemetry(kind: str) -> af.Instrumentation:
    if kind.startswith("processor"):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        provider.add_span_processor(RaisingProcessor(kind.partition(" ")[2]))
        return af.instrument(provider, include_content=True)
    if kind == "meter":
        provider = TracerProvider()
        return af.instrument(provider, meter_provider=RaisingMeterProvider())
    return af.instrument(RaisingTracerProvider(kind.partition(" ")[2]))


TELEMETRY = [
    "processor on_start",
    "processor on_end",
    "processor both",
    "tracer start",
    "tracer span",
    "meter",
]
"""Every way the telemetry can fail: a span processor's `on_start` (inside `start_span`) or
`on_end` (inside `end`, after the tool's side effect), a tracer that cannot start a span, a span
whose every method raises, a histogram that cannot record."""


@pytest.mark.parametrize("kind", TELEMETRY)
@pytest.mark.parametrize("driver", DRIVER.each("contained"))
def test_telemetry_never_breaks_a_run(
    driver: Surface[Any], kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentforge_typed"), _telemetry(kind):
        result = driver.build(ToolService([pay]), FunctionModel(_pays_then_answers), "pay 250")
        # A model called outside a run, too.
        alone = FunctionModel(_pays_then_answers).chat(
            af.ChatRequest(messages=[UserMessage(content="hi")])
        )
        assert alone.ai_message.tool_calls
    assert result.text == "done: paid 250"
    assert ran == ["pay 250"]
    said = [r for r in caplog.records if r.name == "agentforge_typed"]
    # Logged once (the failures after it within the interval are counted, not logged), with
    # what failed and its traceback.
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].getMessage().startswith("OpenTelemetry failed ")
    assert said[0].getMessage().endswith("; the run goes on without it")
    assert said[0].exc_info is not None and said[0].exc_info[0] is TelemetryBrokeError


def test_telemetry_failures_are_logged_again_after_the_interval(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(
        instrument_module, "_failures", instrument_module._Failures(lambda: clock[0])
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed"), _telemetry("meter"):
        for _ in range(3):
            ToolService([pay]).chat(FunctionModel(_pays_then_answers), "pay 250")
        clock[0] += instrument_module.TELEMETRY_LOG_INTERVAL
        ToolService([pay]).chat(FunctionModel(_pays_then_answers), "pay 250")
    said = [r.getMessage() for r in caplog.records if r.name == "agentforge_typed"]
    assert said == [
        "OpenTelemetry failed ending a model call's span; the run goes on without it",
        "OpenTelemetry failed ending a model call's span (5 more since the last report); the "
        "run goes on without it",
    ]


def test_covers_every_surface() -> None:
    assert_registered(PROVIDER, TOOL, DRIVER, HOOK)


# -- the loop: what the model reads, what a failed run carries -----------------------------------


class HookBrokeError(Exception):
    """What the program's own code raises (a hook, a handler, a model of its own)."""


def _calling(
    name: str, arguments: str = "{}", then: Callable[[], Any] | None = None
) -> Callable[[Sequence[ChatMessage], ChatRequestParameters], AiMessage]:
    """A model's function: call `name`, then (with `then`, run at the second turn) answer with
    the text of the call's result."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            if then is not None:
                then()
            return AiMessage(text=f"read: {last.text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=name, arguments=arguments)])

    return answer


def _resumable(messages: Sequence[ChatMessage]) -> None:
    """Every call of the history's last assistant message has its result message."""
    calls = [c.id for m in messages if isinstance(m, AiMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert sorted(calls) == sorted(answered), (calls, answered)


def _odd(value: str) -> str:
    raise KeyError("a validator of the program's own raised this")


class OddArguments(BaseModel):
    text: Annotated[str, AfterValidator(_odd)] = ""


def _odd_typed(handler: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    def t(text: Annotated[str, AfterValidator(_odd)] = "") -> Any:
        """Never reached: the validator raises."""
        return handler({"text": text})

    return t


ODD = Parameters(TEXT.schema, _odd_typed, args_model=OddArguments)


class Unserialisable(BaseModel):
    """A value whose serialisation raises."""

    x: int = 1

    @field_serializer("x")
    def _x(self, value: int) -> int:
        raise KeyError("its serializer raised this")


def _raises(arguments: dict[str, Any]) -> Any:
    raise KeyError("the tool's body raised this")


TOOL_FAILURES: list[tuple[str, str, Callable[[dict[str, Any]], Any], Parameters]] = [
    ("a body that raises", "contained", _raises, TEXT),
    ("a value that cannot be serialised", "contained", lambda a: Unserialisable(), TEXT),
    ("a validator that raises", "contained.validator", lambda a: "unreached", ODD),
]


TOOL_CASES = [
    pytest.param(kind.values[0], handler, parameters, id=f"{kind.id}-{failure}")
    for failure, guarantee, handler, parameters in TOOL_FAILURES
    for kind in TOOL.each(guarantee)
]
"""Every tool kind with every failure that applies to it."""


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
@pytest.mark.parametrize(("kind", "handler", "parameters"), TOOL_CASES)
def test_a_failing_tool_is_an_error_result_the_model_reads(
    kind: Surface[Any],
    handler: Callable[[dict[str, Any]], Any],
    parameters: Parameters,
    driver: Surface[Any],
) -> None:
    with kind.build(handler, parameters=parameters) as t:
        model = FunctionModel(_calling("t", '{"text": "x"}'))
        result = driver.build(ToolService([t]), model, "go")
    (execution,) = result.tool_executions
    assert execution.result.is_error, execution.result
    assert result.text == f"read: {execution.result.text}"


def _one_call_then(then: Callable[[], Any] | None = None) -> FunctionModel:
    return FunctionModel(_calling("pay", '{"cents": 250}', then))


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
@pytest.mark.parametrize("hook", HOOK.each("contained"))
def test_a_hook_that_raises_fails_the_run_with_its_history(
    hook: Surface[Any], driver: Surface[Any]
) -> None:
    """The program's own exception propagates as the guide documents (a hook or handler that
    raises ends the run), or as the `AgentForgeError` the hook's errors become; either way it
    carries the run so far, resumable."""

    def broken() -> Any:
        raise HookBrokeError("the program's own code raised this")

    @tool
    def ok() -> str:
        """Answer ok."""
        return "ok"

    @tool
    def boom() -> str:
        """Raise."""
        raise RuntimeError("boom")

    hooked = hook.build(broken)
    service = ToolService([ok, boom, pay], **hooked.options)
    model = FunctionModel(_calling(*hooked.call))
    with pytest.raises(Exception) as raised:
        driver.build(service, model, "go")
    error: Any = raised.value
    if hook["raises"] == "propagates":
        assert type(error) is HookBrokeError
    else:
        assert type(error).__name__ == hook["raises"]
        assert isinstance(error, af.AgentForgeError)
        assert isinstance(error.__cause__, HookBrokeError)
    messages = error.messages
    assert messages[0] == UserMessage(content="go")
    _resumable(messages)
    assert isinstance(error.tool_executions, tuple)
    assert error.usage == af.TokenUsage()


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
@pytest.mark.parametrize("point", ["input", "call", "result", "output", "rule"])
def test_a_guardrail_or_rule_that_raises_refuses(point: str, driver: Surface[Any]) -> None:
    """Fail closed: a guardrail or rule of the program's own that raises blocks what it checks.
    At the input or output the run ends with `GuardrailError` (its cause the program's
    exception, its history resumable, nothing sent after it); at a call (a guardrail or a
    `CallRule`) the body never runs; at a result the model never reads it. Either way the
    exception's text reaches neither the model nor the error's message."""

    def broken(subject: object) -> Any:
        raise HookBrokeError("the program's own code raised this: s3cr3t")

    ran.clear()
    options: dict[str, Any]
    if point == "rule":
        options = {"rules": [af.CallRule.allow(["pay"], when=broken, name="broken")]}
    else:
        options = {"guardrails": [af.Guardrail("broken", point, broken)]}  # type: ignore[arg-type]
    sent: list[int] = []

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        sent.append(len(messages))
        return _calling("pay", '{"cents": 250}')(messages, parameters)

    service = ToolService([pay], **options)
    if point in ("input", "output"):
        with pytest.raises(af.GuardrailError) as raised:
            driver.build(service, FunctionModel(model), "go")
        error: Any = raised.value
        assert isinstance(error.__cause__, HookBrokeError)
        assert (error.guardrail, error.point) == ("broken", point)
        assert "s3cr3t" not in str(error)
        _resumable(error.messages)
        assert sent == ([] if point == "input" else [1, 3])
        return
    result = driver.build(service, FunctionModel(model), "go")
    (execution,) = result.tool_executions
    assert execution.result.is_error and "s3cr3t" not in str(result.messages)
    assert ran == ([] if point != "result" else ["pay 250"])
    assert isinstance(execution.result.exception, HookBrokeError) == (point != "rule")


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
def test_a_model_of_the_programs_own_that_fails_after_a_call_ran_carries_the_call(
    driver: Surface[Any],
) -> None:
    """`FunctionModel` (its function is the program's): what it raises propagates as it is,
    with the payment made before it in the history."""

    def broken() -> Any:
        raise HookBrokeError("the model's function raised this")

    scripted = PROVIDER["FunctionModel"]["scripted"]
    with pytest.raises(HookBrokeError) as raised:
        driver.build(ToolService([pay]), scripted(_calling("pay", '{"cents": 250}', broken)), "go")
    assert ran == ["pay 250"]
    error: Any = raised.value
    assert [e.result.text for e in error.tool_executions] == ["paid 250"]
    assert isinstance(error.messages[-1], ToolResultMessage)
    assert error.messages[-1].text == "paid 250"


def test_an_exception_keeps_attributes_of_its_own_and_gets_a_fresh_history_each_run() -> None:
    @dataclass(frozen=True)
    class FrozenError(Exception):
        messages: tuple[str, ...] = ("its own",)

    shared = FrozenError()

    def broken() -> Any:
        raise shared

    for prompt in ("first", "second"):
        with pytest.raises(FrozenError) as raised:
            ToolService([pay]).chat(_one_call_then(broken), prompt)
        assert raised.value.messages == ("its own",)
        history: Any = raised.value
        assert history.tool_executions[0].call.id == "c1"
        assert history.usage == af.TokenUsage()
    reused = HookBrokeError("raised by two runs")

    def raise_reused() -> Any:
        raise reused

    for prompt in ("first", "second"):
        with pytest.raises(HookBrokeError) as caught:
            ToolService([pay]).chat(_one_call_then(raise_reused), prompt)
        assert caught.value.messages[0] == UserMessage(content=prompt)  # type: ignore[attr-defined]


# -- providers: a server that sends garbage ------------------------------------------------------


def _garbage(request: Request) -> Reply:
    """200 with a body no provider can read (as a stream too)."""
    if "text/event-stream" in request.headers.get("accept", ""):
        return Reply(200, b"data: <html>not json\n\n", {"content-type": "text/event-stream"})
    return Reply(200, b"<html>not json</html>", {"content-type": "application/json"})


@pytest.fixture(scope="module")
def garbage() -> Iterator[str]:
    """A server answering every request as `_garbage` does."""
    with ScriptedServer() as served:
        served.route("*", _garbage)
        yield served.url


SERVED = [p for p in PROVIDER.each("contained") if p.values[0].build is not None]


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
@pytest.mark.parametrize("provider", SERVED)
def test_a_server_sending_garbage_fails_the_run_with_a_model_error_and_its_history(
    provider: Surface[Any], driver: Surface[Any], garbage: str
) -> None:
    model = provider.build(garbage, "sk-test", max_retries=0)
    with pytest.raises(af.ModelError) as raised:
        driver.build(ToolService([pay]), model, "go")
    assert raised.value.messages == (UserMessage(content="go"),)


# -- pricing ---------------------------------------------------------------------------------------


class _PricedBadly(FunctionModel):
    """A model whose endpoint cannot even be read: pricing asks for it."""

    @property
    def base_url(self) -> str:
        raise HookBrokeError("base_url raised this")

    def answering(self, response: af.ChatResponse) -> object:
        raise HookBrokeError("answering raised this")


def _with_usage(
    answer: Callable[[Sequence[ChatMessage], ChatRequestParameters], AiMessage],
) -> Callable[[Sequence[ChatMessage], ChatRequestParameters], af.ChatResponse]:
    def respond(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> Any:
        usage = af.TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return af.ChatResponse(ai_message=answer(messages, parameters), token_usage=usage)

    return respond


@pytest.mark.parametrize("driver", DRIVER.each("contained"))
def test_pricing_never_breaks_a_run(driver: Surface[Any]) -> None:
    model = _PricedBadly(_with_usage(_calling("pay", '{"cents": 250}')))
    result = driver.build(ToolService([pay]), model, "go")
    assert result.text == "read: paid 250"
    assert (result.usage.total_tokens, result.usage.cost) == (24, None)
    # A failed run's usage is priced too: the error that ended it is the one that comes back.
    failing = _PricedBadly(_with_usage(_calling("nowhere")))
    with pytest.raises(af.UnknownToolError) as raised:
        driver.build(ToolService([pay]), failing, "go")
    assert raised.value.usage.total_tokens == 12 and raised.value.messages
