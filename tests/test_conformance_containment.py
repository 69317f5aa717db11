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
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from conformance import DRIVER, HOOK, PROVIDER, TOOL, Surface, assert_registered
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

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
from agentforge_typed import _instrument as instrument_module

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
    if hasattr(instrument_module, "_Failures"):
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
