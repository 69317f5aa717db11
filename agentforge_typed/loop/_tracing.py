"""OpenTelemetry instrumentation, after the GenAI semantic conventions.

`instrument()` switches it on for the whole process: every `ToolService` run becomes an
`invoke_agent` span, every model call made through this package's models a `chat {model}` span
(a child of the run's span inside a run), and every tool call an `execute_tool {tool}` span. Off,
it costs one global lookup per run and per model call; `opentelemetry-api` is imported only when
it is switched on.

Tool spans are recorded when the call has settled, with the call's own start and end times: the
loop stays free of I/O and nothing is opened around code that may never return.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import TypeAdapter

from .._exceptions import ModelError
from .._messages import ChatMessage, shown_name
from .._model import ResponseComplete, StreamEvent
from .._records import PendingResult
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse, TokenUsage
from ..tools._arguments import repair_kind

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from .._records import ToolExecution
    from ._events import ToolProgressEvent

__all__ = [
    "Instrumentation",
    "RunTrace",
    "instrument",
    "note_admission_wait",
    "run_trace",
    "traced",
]

ModelT = TypeVar("ModelT", bound=type)

_SCOPE = "agentforge_typed"

logger = logging.getLogger("agentforge_typed")

TELEMETRY_LOG_INTERVAL = 60.0
"""Seconds between two log records of telemetry failures: the first is logged with its
traceback, the ones after it within the interval are counted in the next record."""

_active: _Telemetry | None = None
"""The instrumentation switched on, or `None`."""

_loop_request: ContextVar[tuple[ChatRequest, RunTrace] | None] = ContextVar(
    "agentforge_typed_loop_request", default=None
)
"""The request a run is about to send, with its span's context: the model call that sends this
very request (compared by identity, so a stale value is never used) is a child of the run."""

_inside: ContextVar[object | None] = ContextVar("agentforge_typed_inside_model", default=None)
"""The model whose traced call is running: its own calls to itself (a test model's `stream`
replaying its `chat`) are part of that call, not calls of their own."""

_current_call: ContextVar[_ModelCall | None] = ContextVar(
    "agentforge_typed_model_call", default=None
)
"""The traced model call running, for what the layers under it record on its span."""


class Instrumentation:
    """The handle `instrument()` returns: `uninstrument()` (or leaving a `with` block) switches
    the instrumentation off again."""

    def __init__(self, telemetry: _Telemetry | None) -> None:
        self._telemetry = telemetry

    @property
    def active(self) -> bool:
        """Whether this instrumentation is the one switched on."""
        return self._telemetry is not None and _active is self._telemetry

    def uninstrument(self) -> None:
        """Switch this instrumentation off (nothing happens if another one replaced it)."""
        global _active
        if self.active:
            _active = None

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
    global _active
    if tracer_provider is False:
        _active = None
        return Instrumentation(None)
    try:
        from opentelemetry import metrics, trace
    except ImportError as error:
        raise ImportError(
            "af.instrument() needs the OpenTelemetry API: pip install 'agentforge-typed[otel]'"
        ) from error
    from .. import __version__

    provider = None if tracer_provider is True else tracer_provider
    tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=provider)
    meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
    _active = _Telemetry(
        tracer,
        meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per model call"
        ),
        meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration"
        ),
        include_content,
    )
    return Instrumentation(_active)


MAX_RESPONSE_VALUE_CHARS = 256
"""The longest id or name a span or metric takes from what a model or a server wrote: an answer's
id and model name, a tool call's id, a name no tool has (they may send anything)."""
MAX_RESPONSE_MODELS = 100
"""The most distinct `gen_ai.response.model` values the metrics record; past them an answer's is
recorded as `_OTHER`, so a server naming a new model in every answer cannot grow the metric
series without end."""


class _Telemetry:
    __slots__ = ("durations", "include_content", "response_models", "tokens", "tracer")

    def __init__(
        self, tracer: Tracer, tokens: Histogram, durations: Histogram, include_content: bool
    ) -> None:
        self.tracer = tracer
        self.tokens = tokens
        self.durations = durations
        self.include_content = include_content
        self.response_models: set[str] = set()

    def metric_model(self, model: str) -> str:
        """`model` as the metrics record it: a value seen before, or a new one while there are
        fewer than `MAX_RESPONSE_MODELS`, else `_OTHER`."""
        if model in self.response_models or len(self.response_models) < MAX_RESPONSE_MODELS:
            self.response_models.add(model)
            return model
        return "_OTHER"


def run_trace(conversation_id: str) -> RunTrace | None:
    """The tracing of a run starting now, or `None` when instrumentation is off or the run is
    a Temporal workflow's: workflow code is replayed, so its spans would repeat (and the
    workflow sandbox refuses the clock reads they need); its model calls run in activities,
    where they are traced."""
    if _active is None or _in_workflow():
        return None
    try:
        return RunTrace(_active, conversation_id)
    except Exception:
        _contained("starting a run's span")
        return None


def _in_workflow() -> bool:
    workflow = sys.modules.get("temporalio.workflow")
    return workflow is not None and bool(workflow.in_workflow())


class RunTrace:
    """The `invoke_agent` span of one run, and the tool spans under it."""

    def __init__(self, telemetry: _Telemetry, conversation_id: str) -> None:
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
        self.model_call: _ModelCall | None = None
        """The model call in flight, ended with the run if the run ends first (a stream closed
        early leaves the model's stream to the garbage collector)."""

    def request(self, request: ChatRequest) -> None:
        """Make the model call that sends `request` a child of this run."""
        _loop_request.set((request, self))

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
        try:
            self._tool(execution, attempt, known, progress)
        except Exception:
            # After the call's side effect: a failing span processor must not lose its result.
            _contained("recording a tool span")

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
            start_time=_nanoseconds(execution.started_at.timestamp()),
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
                span.add_event("agentforge.tool.progress", values, timestamp=_nanoseconds(at))
            if result.is_error:
                kind = result.error_kind or "error"
                span.set_attribute("error.type", kind)
                # The kind, not the text: an error text may quote the arguments.
                span.set_status(Status(StatusCode.ERROR, kind))
        finally:
            span.end(end_time=_nanoseconds(execution.finished_at.timestamp()))

    def end(self, error: BaseException | None, usage: TokenUsage) -> None:
        """End the run's span; an error other than the consumer closing a stream marks it failed."""
        _loop_request.set(None)
        if self.model_call is not None:
            self.model_call.end(None, error)
        try:
            try:
                self.span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                self.span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
                if error is not None and not isinstance(error, GeneratorExit):
                    _failed(self.span, error)
            finally:
                self.span.end()
        except Exception:
            _contained("ending a run's span")


def traced(cls: ModelT) -> ModelT:
    """Class decorator: the model's `chat`, `achat`, `stream` and `astream` record a `chat`
    span (and the metrics) while instrumentation is on; otherwise they are called as they are."""
    chat, achat, stream, astream = (cls.__dict__[n] for n in ("chat", "achat", "stream", "astream"))

    @functools.wraps(chat)
    def traced_chat(self: Any, request: ChatRequest) -> ChatResponse:
        if _active is None or _inside.get() is self:
            return chat(self, request)  # type: ignore[no-any-return]
        call = _start_call(_active, self, request)
        if call is None:
            return chat(self, request)  # type: ignore[no-any-return]
        with _Watch(call) as watch, _calling(self, call):
            return watch.answer(chat(self, request))

    @functools.wraps(achat)
    async def traced_achat(self: Any, request: ChatRequest) -> ChatResponse:
        if _active is None or _inside.get() is self:
            return await achat(self, request)  # type: ignore[no-any-return]
        call = _start_call(_active, self, request)
        if call is None:
            return await achat(self, request)  # type: ignore[no-any-return]
        with _Watch(call) as watch, _calling(self, call):
            return watch.answer(await achat(self, request))

    @functools.wraps(stream)
    def traced_stream(self: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        if _active is None or _inside.get() is self:
            return stream(self, request)  # type: ignore[no-any-return]
        call = _start_call(_active, self, request)
        if call is None:
            return stream(self, request)  # type: ignore[no-any-return]
        return _stream(self, call, stream(self, request))

    @functools.wraps(astream)
    def traced_astream(self: Any, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        if _active is None or _inside.get() is self:
            return astream(self, request)  # type: ignore[no-any-return]
        call = _start_call(_active, self, request)
        if call is None:
            return astream(self, request)  # type: ignore[no-any-return]
        return _astream(self, call, astream(self, request))

    for name, method in (
        ("chat", traced_chat),
        ("achat", traced_achat),
        ("stream", traced_stream),
        ("astream", traced_astream),
    ):
        setattr(cls, name, method)
    return cls


def _stream(
    model: object, call: _ModelCall, events: Iterator[StreamEvent]
) -> Iterator[StreamEvent]:
    try:
        with _Watch(call) as watch:
            while True:
                with _calling(model, call):
                    event = next(events, None)
                if event is None:
                    return
                yield watch.see(event)
    finally:
        getattr(events, "close", _nothing)()


async def _astream(
    model: object, call: _ModelCall, events: AsyncIterator[StreamEvent]
) -> AsyncIterator[StreamEvent]:
    try:
        with _Watch(call) as watch:
            while True:
                with _calling(model, call):
                    event = await anext(events, None)
                if event is None:
                    return
                yield watch.see(event)
    finally:
        # An async generator is not closed by the garbage collector's next pass: close it now.
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


class _Watch:
    """A traced model call in flight: ends its span when the call returns, fails, or (a stream)
    is closed early by its consumer, with the response when one arrived."""

    def __init__(self, call: _ModelCall) -> None:
        self.call = call
        self.response: ChatResponse | None = None

    def answer(self, response: ChatResponse) -> ChatResponse:
        self.response = response
        return response

    def see(self, event: StreamEvent) -> StreamEvent:
        if isinstance(event, ResponseComplete):
            self.response = event.response
        return event

    def __enter__(self) -> _Watch:
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self.call.end(self.response, error)


@contextlib.contextmanager
def _calling(model: object, call: _ModelCall) -> Iterator[None]:
    token, current = _inside.set(model), _current_call.set(call)
    try:
        yield
    finally:
        _current_call.reset(current)
        _inside.reset(token)


def note_admission_wait(seconds: float) -> None:
    """Record on the traced model call running (if any) how long its request waited for a slot
    (`agentforge.admission.wait_seconds`): time counted in none of the request's timeouts."""
    call = _current_call.get()
    if call is not None:
        try:
            call.span.set_attribute("agentforge.admission.wait_seconds", seconds)
        except Exception:
            _contained("recording an admission wait")


def _nothing() -> None:
    pass


def _start_call(telemetry: _Telemetry, model: Any, request: ChatRequest) -> _ModelCall | None:
    """The traced model call starting now, or `None` (the call goes on untraced) when the
    tracer fails to start its span."""
    try:
        return _ModelCall(telemetry, model, request)
    except Exception:
        _contained("starting a model call's span")
        return None


class _ModelCall:
    """The `chat` span of one model call, started when the call is made."""

    def __init__(self, telemetry: _Telemetry, model: Any, request: ChatRequest) -> None:
        self.telemetry = telemetry
        parameters = request.parameters
        defaults = getattr(model, "defaults", None)
        if isinstance(defaults, ChatRequestParameters):
            # What is sent: the model's default parameters under the request's own.
            parameters = defaults.merge(parameters)
        model_name = (parameters.model if parameters else None) or _model_name(model)
        self.base: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider_name(model),
        }
        if model_name:
            self.base["gen_ai.request.model"] = model_name
        attributes = dict(self.base)
        if parameters is not None:
            for field in ("temperature", "max_tokens", "top_p"):
                value = getattr(parameters, field)
                if value is not None:
                    attributes[f"gen_ai.request.{field}"] = value
            if parameters.stop:
                attributes["gen_ai.request.stop_sequences"] = list(parameters.stop)
        if telemetry.include_content:
            attributes["gen_ai.input.messages"] = _messages_json(request.messages)
        loop = _loop_request.get()
        run = loop[1] if loop is not None and loop[0] is request else None
        self.started = time.perf_counter()
        self.ended = False
        self.span: Span = telemetry.tracer.start_span(
            f"chat {model_name}" if model_name else "chat",
            context=None if run is None else run.context,
            attributes=attributes,
        )
        if run is not None:
            run.model_call = self

    def end(self, response: ChatResponse | None, error: BaseException | None) -> None:
        if self.ended:
            return
        self.ended = True
        try:
            try:
                self._record(response, error)
            finally:
                self.span.end()
        except Exception:
            _contained("ending a model call's span")

    def _record(self, response: ChatResponse | None, error: BaseException | None) -> None:
        span, metric = self.span, dict(self.base)
        if response is not None:
            metadata = response.metadata
            model, answer_id = metadata.get("model"), metadata.get("id")
            if isinstance(model, str):
                model = model[:MAX_RESPONSE_VALUE_CHARS]
                span.set_attribute("gen_ai.response.model", model)
                metric["gen_ai.response.model"] = self.telemetry.metric_model(model)
            if isinstance(answer_id, str):
                span.set_attribute("gen_ai.response.id", answer_id[:MAX_RESPONSE_VALUE_CHARS])
            if response.finish_reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [str(response.finish_reason)])
            if response.token_usage is not None:
                usage = response.token_usage
                span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
                for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                    self.telemetry.tokens.record(count, {**metric, "gen_ai.token.type": kind})
            if self.telemetry.include_content:
                span.set_attribute("gen_ai.output.messages", _messages_json([response.ai_message]))
        if error is not None and not isinstance(error, GeneratorExit):
            metric["error.type"] = _failed(span, error)
        self.telemetry.durations.record(time.perf_counter() - self.started, metric)


class _Failures:
    """Telemetry failures, logged at most once per `TELEMETRY_LOG_INTERVAL` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.logged_at: float | None = None
        self.unlogged = 0


_failures = _Failures()


def _contained(doing: str) -> None:
    """Log the exception being handled, which the tracer or the meter raised while `doing` (a
    span processor, an exporter, a provider of the user's): telemetry never breaks a run, as
    pricing never does. One record per interval; the failures in between are counted in it."""
    now = _failures.clock()
    with _failures.lock:
        last = _failures.logged_at
        if last is not None and now - last < TELEMETRY_LOG_INTERVAL:
            _failures.unlogged += 1
            return
        _failures.logged_at, unlogged, _failures.unlogged = now, _failures.unlogged, 0
    since = f" ({unlogged} more since the last report)" if unlogged else ""
    logger.warning(
        "OpenTelemetry failed %s%s; the run goes on without it", doing, since, exc_info=True
    )


def _failed(span: Span, error: BaseException) -> str:
    """Mark `span` failed by `error`; return its `error.type`."""
    from opentelemetry.trace import Status, StatusCode

    kind = type(error).__qualname__
    if isinstance(error, ModelError) and error.status_code is not None:
        kind = str(error.status_code)
    span.set_attribute("error.type", kind)
    # The type only: a provider's message may quote the request.
    span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
    return kind


@functools.cache
def _messages_adapter() -> TypeAdapter[list[ChatMessage]]:
    # Built on first use (with `include_content`), not when the package is imported.
    return TypeAdapter(list[ChatMessage])


def _messages_json(messages: Sequence[ChatMessage]) -> str:
    return _messages_adapter().dump_json(list(messages)).decode()


def _model_name(model: Any) -> str | None:
    name = getattr(model, "model", None) or getattr(model, "name", None)
    return name if isinstance(name, str) else None


_PROVIDER_NAMES = {"gemini": "gcp.gemini"}
"""A wire's provider, lower-cased, as the GenAI conventions name it where that differs."""


def _provider_name(model: Any) -> str:
    wire = getattr(model, "_wire", None)
    provider = getattr(wire, "provider", None)
    if isinstance(provider, str):
        return _PROVIDER_NAMES.get(provider.lower(), provider.lower())
    return type(model).__name__


def _nanoseconds(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
