"""`FallbackModel`: a `ChatModel` that asks other models, in order, when one fails.

Each request goes to the first model; when it fails with an error `fallback_on` accepts (by
default a transient one: a rate limit, an overload, a 5xx, a connection error or timeout), the
same request goes to the next, and so on; an error it does not accept (a refused request: bad
arguments, a 400, a missing feature) surfaces at once. The conversation is the provider-neutral
history, so every provider renders it in its own dialect; what an answer carries that only its
own provider replays (thinking signatures, reasoning items) is not sent to another, and that is
recorded on the response.

`_Attempts` holds the decisions, free of I/O, for the four shells.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import httpx

from .._content import Content
from .._exceptions import ModelError
from .._messages import AiMessage
from .._model import ChatModel, ResponseComplete, StreamEvent
from .._request import ChatRequest
from .._response import ChatResponse
from ._anthropic_wire import CONTENT_ATTRIBUTE as _ANTHROPIC_CONTENT
from ._anthropic_wire import AnthropicWire
from ._gemini_wire import PARTS_ATTRIBUTE as _GEMINI_PARTS
from ._gemini_wire import GeminiWire
from ._responses_wire import OUTPUT_ATTRIBUTE as _RESPONSES_OUTPUT
from ._responses_wire import OpenAIResponsesWire
from ._retry import RETRYABLE_STATUS_CODES

__all__ = ["AllModelsFailedError", "FallbackModel"]

_TRANSIENT_CAUSES = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
_OVERLOADED_CODES = frozenset({"overloaded_error", "rate_limit_error", "RESOURCE_EXHAUSTED"})
"""Error codes a provider sends inside a stream (no HTTP status) for a transient refusal:
Anthropic's `overloaded_error` and `rate_limit_error`, Gemini's `RESOURCE_EXHAUSTED`."""

_REPLAYED: dict[type, str] = {
    AnthropicWire: _ANTHROPIC_CONTENT,
    GeminiWire: _GEMINI_PARTS,
    OpenAIResponsesWire: _RESPONSES_OUTPUT,
}
"""The `AiMessage.attributes` key each wire replays verbatim (its own raw answer)."""


class AllModelsFailedError(ModelError):
    """Every model of a `FallbackModel` failed with an error it falls back on.

    Attributes:
        errors: Each model's error, in the order they were asked. `status_code` and `code` are
            the last one's.
    """

    def __init__(self, errors: Sequence[tuple[str, ModelError]]) -> None:
        self.errors = tuple(error for _, error in errors)
        last = self.errors[-1]
        reasons = "; ".join(f"{label}: {error.message}" for label, error in errors)
        super().__init__(f"every model failed: {reasons}", last.status_code, code=last.code)


def is_transient(error: ModelError) -> bool:
    """Whether `error` is worth asking another model: a 408, 409, 429 or 5xx (529 included),
    an overload or rate-limit error sent inside a stream, or a connection that failed or timed
    out. A refused request (any other 4xx), a malformed answer or a missing feature is not."""
    status = error.status_code
    if status is not None:
        return status in RETRYABLE_STATUS_CODES or status >= 500
    return error.code in _OVERLOADED_CODES or isinstance(error.__cause__, _TRANSIENT_CAUSES)


def _label(model: object) -> str:
    name = getattr(model, "model", None)
    return f"{type(model).__name__}({name!r})" if isinstance(name, str) else repr(model)


class FallbackModel:
    """A `ChatModel` answering with the first of `models` that does not fail.

    `FallbackModel(primary, *fallbacks)`: each request goes to `primary`; when it fails with an
    error `fallback_on` accepts, to the next model, and so on. Which model answered is in the
    response's `metadata["fallback"]` (`index`, `model`, and the `failed` models before it, each
    with its `error` and `status_code`), and each model's call has its own span; a run's cost is
    priced per response, at the model that answered it. A stream falls back only until its first
    event: once an event has been delivered, an error surfaces as it is.

    Args:
        model: The model asked first.
        *fallbacks: The models asked next, in order.
        fallback_on: Which errors move on to the next model; `FallbackModel.is_transient` by
            default (rate limits, overload, 5xx, connection errors and timeouts). Compose it to
            add your own: `lambda e: FallbackModel.is_transient(e) or e.status_code == 400`.

    Raises:
        AllModelsFailedError: (from the calls) every model failed with an error `fallback_on`
            accepts; an error it does not accept surfaces as it is.
    """

    is_transient = staticmethod(is_transient)

    def __init__(
        self,
        model: ChatModel,
        *fallbacks: ChatModel,
        fallback_on: Callable[[ModelError], bool] | None = None,
    ) -> None:
        self.models: tuple[ChatModel, ...] = (model, *fallbacks)
        """The models, in the order they are asked."""
        self.fallback_on = fallback_on or is_transient

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(_label(model) for model in self.models)})"

    def fit_tool_content(
        self, parts: Sequence[Content]
    ) -> tuple[tuple[Content, ...], tuple[str, ...]]:
        """A tool result's `parts` as every one of `models` takes them (each model's own
        `fit_tool_content`, in order; a model without one takes them as they are), and the
        notes: any of them may answer the next request, so the history keeps only what all of
        them can read."""
        kept, notes = tuple(parts), ()
        for model in self.models:
            fit = getattr(model, "fit_tool_content", None)
            if fit is not None:
                kept, more = fit(kept)
                notes += more
        return kept, notes

    def answering(self, response: ChatResponse) -> object:
        """The model of `self.models` that answered `response` (one this model returned)."""
        recorded = response.metadata.get("fallback")
        index = recorded.get("index") if isinstance(recorded, dict) else None
        if isinstance(index, int) and 0 <= index < len(self.models):
            return self.models[index]
        return self

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` to each model in turn until one answers (see the class)."""
        attempts = _Attempts(self, request)
        for index, model in enumerate(self.models):
            try:
                response = model.chat(request)
            except ModelError as error:
                attempts.failed(index, error)
                continue
            return attempts.answered(index, response)
        raise AssertionError("unreachable: the last failure raises")

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        attempts = _Attempts(self, request)
        for index, model in enumerate(self.models):
            try:
                response = await model.achat(request)
            except ModelError as error:
                attempts.failed(index, error)
                continue
            return attempts.answered(index, response)
        raise AssertionError("unreachable: the last failure raises")

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """`chat` as a stream; falls back only until the first event."""
        attempts = _Attempts(self, request)
        for index, model in enumerate(self.models):
            try:
                events = iter(model.stream(request))  # a stream that fails when opened
            except ModelError as error:
                attempts.failed(index, error)
                continue
            try:
                try:
                    first = next(events, None)  # a generator fails at its first event
                except ModelError as error:
                    attempts.failed(index, error)
                    continue
                if first is not None:
                    yield attempts.event(index, first)
                    for event in events:
                        yield attempts.event(index, event)
                return
            finally:
                getattr(events, "close", _nothing)()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        attempts = _Attempts(self, request)
        for index, model in enumerate(self.models):
            try:
                events = aiter(model.astream(request))
            except ModelError as error:
                attempts.failed(index, error)
                continue
            try:
                try:
                    first = await anext(events, None)
                except ModelError as error:
                    attempts.failed(index, error)
                    continue
                if first is not None:
                    yield attempts.event(index, first)
                    async for event in events:
                        yield attempts.event(index, event)
                return
            finally:
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()


def _nothing() -> None:
    pass


class _Attempts:
    """One request's way through the models: the failures so far, and what the answer records."""

    def __init__(self, fallback: FallbackModel, request: ChatRequest) -> None:
        self.fallback = fallback
        self.request = request
        self.errors: list[tuple[str, ModelError]] = []

    def failed(self, index: int, error: ModelError) -> None:
        """Take the failure of model `index`; raise when it ends the request (an error not to
        fall back on, or the last model's)."""
        if not self.fallback.fallback_on(error):
            raise error
        self.errors.append((_label(self.fallback.models[index]), error))
        if index == len(self.fallback.models) - 1:
            raise AllModelsFailedError(self.errors) from error

    def event(self, index: int, event: StreamEvent) -> StreamEvent:
        """`event`, the final one recording which model answered."""
        if isinstance(event, ResponseComplete):
            return ResponseComplete(response=self.answered(index, event.response))
        return event

    def answered(self, index: int, response: ChatResponse) -> ChatResponse:
        """`response` with `metadata["fallback"]`, and the history it could not replay (another
        provider's own content) among its `adaptations`."""
        model = self.fallback.models[index]
        failed = [
            {"model": label, "error": error.message, "status_code": error.status_code}
            for label, error in self.errors
        ]
        metadata: dict[str, Any] = {
            **response.metadata,
            "fallback": {"index": index, "model": _label(model), "failed": failed},
        }
        dropped = _not_replayed(self.request, model)
        if dropped is not None:
            metadata["adaptations"] = [*response.metadata.get("adaptations", ()), dropped]
        return response.model_copy(update={"metadata": metadata})


def _not_replayed(request: ChatRequest, model: object) -> dict[str, str] | None:
    """The adaptation to record when earlier answers carry content only another provider
    replays (its thinking signatures, reasoning items), which `model`'s wire leaves out."""
    wire = getattr(model, "_wire", None)
    if wire is None:
        return None  # not an HTTP provider: it gets the messages as they are
    own = _REPLAYED.get(type(wire))
    foreign = set(_REPLAYED.values()) - {own}
    answers, keys = 0, set()
    for message in request.messages:
        if isinstance(message, AiMessage) and message.attributes:
            found = foreign.intersection(message.attributes)
            if found:
                answers += 1
                keys |= found
    if not answers:
        return None
    return {
        "feature": "history",
        "rule": (
            f"{answers} earlier answer(s) carried content only another provider replays "
            f"({', '.join(sorted(keys))}): sent as their text and tool calls, without their "
            "thinking and its signatures"
        ),
    }
