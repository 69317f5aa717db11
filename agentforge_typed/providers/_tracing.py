"""Model tracing: the `chat {model}` span and the metrics of every model call made through this
package's models (`@traced`), and the telemetry switch `instrument()` sets.

Off, a traced call costs one global lookup; `opentelemetry-api` is imported only when
instrumentation is switched on (`agentforge_typed.loop._tracing.instrument`). A model call made
inside a run is a child of the run's span: the run's trace hands over the request it is about to
send (`loop_request`), and the call that sends that very request takes the run's span as parent.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._exceptions import ModelError
from .._messages import ChatMessage, history_adapter
from .._model import ResponseComplete, StreamEvent
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "MAX_RESPONSE_MODELS",
    "MAX_RESPONSE_VALUE_CHARS",
    "TELEMETRY_LOG_INTERVAL",
    "ModelCall",
    "RunSpan",
    "Telemetry",
    "contained",
    "failed",
    "loop_request",
    "nanoseconds",
    "note_admission_wait",
    "switch",
    "traced",
]

ModelT = TypeVar("ModelT", bound=type)

logger = logging.getLogger("agentforge_typed")

TELEMETRY_LOG_INTERVAL = 60.0
"""Seconds between two log records of telemetry failures: the first is logged with its
traceback, the ones after it within the interval are counted in the next record."""

active: Telemetry | None = None
"""The instrumentation switched on, or `None` (set with `switch`)."""


def switch(telemetry: Telemetry | None) -> None:
    """Switch instrumentation on with `telemetry`, or off with `None`."""
    global active
    active = telemetry


class RunSpan(Protocol):
    """What a run's trace shares with the model calls made inside it."""

    context: Any
    """The OpenTelemetry context holding the run's span: a model call's span is its child."""
    model_call: ModelCall | None
    """The model call in flight, ended with the run if the run ends first."""
    span: Span
    """The run's span."""
    noop: bool
    """Whether the tracer is a no-op one: a model call of the run builds no span of its own."""


loop_request: ContextVar[tuple[ChatRequest, RunSpan] | None] = ContextVar(
    "agentforge_typedloop_request", default=None
)
"""The request a run is about to send, with its span's context: the model call that sends this
very request (compared by identity, so a stale value is never used) is a child of the run."""

_inside: ContextVar[object | None] = ContextVar("agentforge_typed_inside_model", default=None)
"""The model whose traced call is running: its own calls to itself (a test model's `stream`
replaying its `chat`) are part of that call, not calls of their own."""

_current_call: ContextVar[ModelCall | None] = ContextVar(
    "agentforge_typed_model_call", default=None
)
"""The traced model call running, for what the layers under it record on its span."""


MAX_RESPONSE_VALUE_CHARS = 256
"""The longest id or name a span or metric takes from what a model or a server wrote: an answer's
id and model name, a tool call's id, a name no tool has (they may send anything)."""
MAX_RESPONSE_MODELS = 100
"""The most distinct `gen_ai.response.model` values the metrics record; past them an answer's is
recorded as `_OTHER`, so a server naming a new model in every answer cannot grow the metric
series without end."""


class Telemetry:
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


def traced(cls: ModelT) -> ModelT:
    """Class decorator: the model's `chat`, `achat`, `stream` and `astream` record a `chat`
    span (and the metrics) while instrumentation is on; otherwise they are called as they are."""
    chat, achat, stream, astream = (cls.__dict__[n] for n in ("chat", "achat", "stream", "astream"))

    @functools.wraps(chat)
    def traced_chat(self: Any, request: ChatRequest) -> ChatResponse:
        if active is None or _inside.get() is self:
            return chat(self, request)  # type: ignore[no-any-return]
        call = _start_call(active, self, request)
        if call is None:
            return chat(self, request)  # type: ignore[no-any-return]
        with _Watch(call) as watch, _calling(self, call):
            return watch.answer(chat(self, request))

    @functools.wraps(achat)
    async def traced_achat(self: Any, request: ChatRequest) -> ChatResponse:
        if active is None or _inside.get() is self:
            return await achat(self, request)  # type: ignore[no-any-return]
        call = _start_call(active, self, request)
        if call is None:
            return await achat(self, request)  # type: ignore[no-any-return]
        with _Watch(call) as watch, _calling(self, call):
            return watch.answer(await achat(self, request))

    @functools.wraps(stream)
    def traced_stream(self: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        if active is None or _inside.get() is self:
            return stream(self, request)  # type: ignore[no-any-return]
        call = _start_call(active, self, request)
        if call is None:
            return stream(self, request)  # type: ignore[no-any-return]
        return _stream(self, call, stream(self, request))

    @functools.wraps(astream)
    def traced_astream(self: Any, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        if active is None or _inside.get() is self:
            return astream(self, request)  # type: ignore[no-any-return]
        call = _start_call(active, self, request)
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


def _stream(model: object, call: ModelCall, events: Iterator[StreamEvent]) -> Iterator[StreamEvent]:
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
    model: object, call: ModelCall, events: AsyncIterator[StreamEvent]
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

    def __init__(self, call: ModelCall) -> None:
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
def _calling(model: object, call: ModelCall) -> Iterator[None]:
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
            contained("recording an admission wait")


def _nothing() -> None:
    pass


def _start_call(telemetry: Telemetry, model: Any, request: ChatRequest) -> ModelCall | None:
    """The traced model call starting now, or `None` (the call goes on untraced) when the
    tracer fails to start its span."""
    try:
        return ModelCall(telemetry, model, request)
    except Exception:
        contained("starting a model call's span")
        return None


class ModelCall:
    """The `chat` span of one model call, started when the call is made."""

    def __init__(self, telemetry: Telemetry, model: Any, request: ChatRequest) -> None:
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
        loop = loop_request.get()
        run = loop[1] if loop is not None and loop[0] is request else None
        self.started = time.perf_counter()
        self.ended = False
        if run is not None:
            run.model_call = self
            if run.noop:  # no tracer: the metrics only, no span to build
                self.span: Span = run.span
                return
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
        self.span = telemetry.tracer.start_span(
            f"chat {model_name}" if model_name else "chat",
            context=None if run is None else run.context,
            attributes=attributes,
        )

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
            contained("ending a model call's span")

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
            metric["error.type"] = failed(span, error)
        self.telemetry.durations.record(time.perf_counter() - self.started, metric)


class _Failures:
    """Telemetry failures, logged at most once per `TELEMETRY_LOG_INTERVAL` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.logged_at: float | None = None
        self.unlogged = 0


_failures = _Failures()


def contained(doing: str) -> None:
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


def failed(span: Span, error: BaseException) -> str:
    """Mark `span` failed by `error`; return its `error.type`."""
    from opentelemetry.trace import Status, StatusCode

    kind = type(error).__qualname__
    if isinstance(error, ModelError) and error.status_code is not None:
        kind = str(error.status_code)
    span.set_attribute("error.type", kind)
    # The type only: a provider's message may quote the request.
    span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
    return kind


def _messages_json(messages: Sequence[ChatMessage]) -> str:
    return history_adapter().dump_json(list(messages)).decode()


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


def nanoseconds(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
