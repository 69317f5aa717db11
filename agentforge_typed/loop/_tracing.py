"""OpenTelemetry instrumentation, after the GenAI semantic conventions: the switch
(`instrument()`) and the tracing of runs.

`instrument()` switches it on for the whole process: every `ToolService` run becomes an
`invoke_agent` span, every model call made through this package's models a `chat {model}` span
(a child of the run's span inside a run: `agentforge_typed.providers._tracing`), and every tool
call an `execute_tool {tool}` span. Off, it costs one global lookup per run and per model call;
this module and `opentelemetry-api` are imported only when it is switched on.

Tool spans are recorded when the call has settled, with the call's own start and end times: the
loop stays free of I/O and nothing is opened around code that may never return.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._messages import shown_name
from .._records import PendingResult
from .._request import ChatRequest
from .._response import TokenUsage
from ..providers import _tracing as model_tracing
from ..providers._tracing import (
    MAX_RESPONSE_VALUE_CHARS,
    ModelCall,
    Telemetry,
    contained,
    failed,
    loop_request,
    nanoseconds,
    switch,
)
from ..tools._arguments import repair_kind

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from .._records import ToolExecution
    from ._events import ToolProgressEvent

__all__ = ["Instrumentation", "RunTrace", "instrument", "run_trace"]

_SCOPE = "agentforge_typed"


class Instrumentation:
    """The handle `instrument()` returns: `uninstrument()` (or leaving a `with` block) switches
    the instrumentation off again."""

    def __init__(self, telemetry: Telemetry | None) -> None:
        self._telemetry = telemetry

    @property
    def active(self) -> bool:
        """Whether this instrumentation is the one switched on."""
        return self._telemetry is not None and model_tracing.active is self._telemetry

    def uninstrument(self) -> None:
        """Switch this instrumentation off (nothing happens if another one replaced it)."""
        if self.active:
            switch(None)

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstrument()


def instrument(
    tracer_provider: TracerProvider | bool | None = None,
    *,
    meter_provider: MeterProvider | None = None,
    include_content: bool = False,
) -> Instrumentation:
    """Switch OpenTelemetry instrumentation on for every run and model call of this process.

    Args:
        tracer_provider: Where spans go; `None` uses the global tracer provider. `False`
            switches instrumentation off.
        meter_provider: Where the `gen_ai.client.token.usage` and
            `gen_ai.client.operation.duration` histograms go; `None` uses the global one.
        include_content: Also record the messages, tool arguments and tool results. Off by
            default: they may hold personal data.

    Returns:
        A handle whose `uninstrument()` switches this instrumentation off; it is also a context
        manager.

    Raises:
        ImportError: `opentelemetry-api` is not installed (`pip install 'agentforge-typed[otel]'`).
    """
    if tracer_provider is False:
        switch(None)
        return Instrumentation(None)
    try:
        from opentelemetry import metrics, trace
    except ImportError as error:
        raise ImportError(
            "af.instrument() needs the OpenTelemetry API: pip install 'agentforge-typed[otel]'"
        ) from error
    # The package's version, from the package itself, loaded before any of its modules (the loop
    # may not import it: it imports every layer).
    version: str = sys.modules[_SCOPE].__version__
    provider = None if tracer_provider is True else tracer_provider
    tracer = trace.get_tracer(_SCOPE, version, tracer_provider=provider)
    meter = metrics.get_meter(_SCOPE, version, meter_provider=meter_provider)
    telemetry = Telemetry(
        tracer,
        meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per model call"
        ),
        meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration"
        ),
        include_content,
    )
    switch(telemetry)
    return Instrumentation(telemetry)


def run_trace(conversation_id: str) -> RunTrace | None:
    """The tracing of a run starting now, or `None` when instrumentation is off or the run is
    a Temporal workflow's: workflow code is replayed, so its spans would repeat (and the
    workflow sandbox refuses the clock reads they need); its model calls run in activities,
    where they are traced."""
    telemetry = model_tracing.active
    if telemetry is None or _in_workflow():
        return None
    try:
        return RunTrace(telemetry, conversation_id)
    except Exception:
        contained("starting a run's span")
        return None


def _in_workflow() -> bool:
    workflow = sys.modules.get("temporalio.workflow")
    return workflow is not None and bool(workflow.in_workflow())


class RunTrace:
    """The `invoke_agent` span of one run, and the tool spans under it."""

    def __init__(self, telemetry: Telemetry, conversation_id: str) -> None:
        from opentelemetry import trace

        self.telemetry = telemetry
        self.span = telemetry.tracer.start_span(
            "invoke_agent",
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": conversation_id,
            },
        )
        self.context = trace.set_span_in_context(self.span)
        self.noop = not self.span.get_span_context().is_valid
        """Whether the tracer is a no-op one (no SDK configured): then no tool span is started,
        and a model call of the run records its metrics but builds no span of its own."""
        self.model_call: ModelCall | None = None
        """The model call in flight, ended with the run if the run ends first (a stream closed
        early leaves the model's stream to the garbage collector)."""

    def request(self, request: ChatRequest) -> None:
        """Make the model call that sends `request` a child of this run."""
        loop_request.set((request, self))

    def tool(
        self,
        execution: ToolExecution,
        attempt: int,
        *,
        known: bool = True,
        progress: Sequence[tuple[float, ToolProgressEvent]] = (),
    ) -> None:
        """Record a settled tool call as an `execute_tool` span with the call's own times, and
        the progress it reported as `agentforge.tool.progress` events at their times.

        A call of a name no tool has (`known=False`) is named only with `include_content`: the
        name is whatever the model wrote (its first and last characters, `shown_name`); so is a
        progress message (the tool's words).
        """
        if self.noop:
            return
        try:
            self._tool(execution, attempt, known, progress)
        except Exception:
            # After the call's side effect: a failing span processor must not lose its result.
            contained("recording a tool span")

    def _tool(
        self,
        execution: ToolExecution,
        attempt: int,
        known: bool,
        progress: Sequence[tuple[float, ToolProgressEvent]],
    ) -> None:
        from opentelemetry.trace import Status, StatusCode

        call, result = execution.call, execution.result
        if isinstance(result, PendingResult):
            # Nothing ran: the run pauses on the call (an event on the run, not a tool span).
            reason = result.pending.reason if result.pending is not None else "approval"
            self.span.add_event(
                "agentforge.tool.pending",
                {
                    "gen_ai.tool.name": call.name[:MAX_RESPONSE_VALUE_CHARS],
                    "gen_ai.tool.call.id": call.id[:MAX_RESPONSE_VALUE_CHARS],
                    "agentforge.tool.pending.reason": reason,
                },
            )
            return
        name = shown_name(call.name) if known or self.telemetry.include_content else None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": call.id[:MAX_RESPONSE_VALUE_CHARS],
            "gen_ai.tool.type": "function",
            "agentforge.tool.attempt": attempt,
        }
        if name is not None:
            attributes["gen_ai.tool.name"] = name
        if result.cached:  # answered from its tool's result cache: no body ran
            attributes["agentforge.tool.cached"] = True
        decision = execution.decision
        if decision.rule != "default":
            attributes["agentforge.tool.decision"] = decision.outcome
            attributes["agentforge.tool.decision.rule"] = decision.rule[:MAX_RESPONSE_VALUE_CHARS]
        if execution.guardrails:
            attributes["agentforge.tool.guardrails"] = [
                f"{g.guardrail[:MAX_RESPONSE_VALUE_CHARS]}:{g.point}:{g.action}"
                for g in execution.guardrails
            ]
        if result.repairs:
            # The texts quote argument names the model wrote: content, recorded on opt-in only.
            attributes["agentforge.tool.repair_kinds"] = [repair_kind(r) for r in result.repairs]
        if self.telemetry.include_content:
            if result.repairs:
                attributes["agentforge.tool.repairs"] = list(result.repairs)
            attributes["gen_ai.tool.call.arguments"] = call.arguments
            attributes["gen_ai.tool.call.result"] = result.text
        span = self.telemetry.tracer.start_span(
            "execute_tool" if name is None else f"execute_tool {name}",
            context=self.context,
            attributes=attributes,
            start_time=nanoseconds(execution.started_at.timestamp()),
        )
        try:
            if attempt > 1:
                span.add_event("retry", {"agentforge.tool.attempt": attempt})
            for at, event in progress:
                values: dict[str, Any] = {"agentforge.tool.progress": event.progress}
                if event.total is not None:
                    values["agentforge.tool.progress.total"] = event.total
                if event.message is not None and self.telemetry.include_content:
                    values["agentforge.tool.progress.message"] = event.message
                span.add_event("agentforge.tool.progress", values, timestamp=nanoseconds(at))
            if result.is_error:
                kind = result.error_kind or "error"
                span.set_attribute("error.type", kind)
                # The kind, not the text: an error text may quote the arguments.
                span.set_status(Status(StatusCode.ERROR, kind))
        finally:
            span.end(end_time=nanoseconds(execution.finished_at.timestamp()))

    def guardrail(self, name: str, point: str, action: str) -> None:
        """Record a guardrail that blocked or redacted as an `agentforge.guardrail` event on the
        run's span (its name, point and action; never the reason, which may quote content)."""
        try:
            self.span.add_event(
                "agentforge.guardrail",
                {
                    "agentforge.guardrail.name": name[:MAX_RESPONSE_VALUE_CHARS],
                    "agentforge.guardrail.point": point,
                    "agentforge.guardrail.action": action,
                },
            )
        except Exception:
            contained("recording a guardrail")

    def end(self, error: BaseException | None, usage: TokenUsage) -> None:
        """End the run's span; an error other than the consumer closing a stream marks it failed."""
        loop_request.set(None)
        if self.model_call is not None:
            self.model_call.end(None, error)
        try:
            try:
                self.span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                self.span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
                if error is not None and not isinstance(error, GeneratorExit):
                    failed(self.span, error)
            finally:
                self.span.end()
        except Exception:
            contained("ending a run's span")
