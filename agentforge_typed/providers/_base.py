"""What every HTTP provider shares: its constructor options, declared once, and the model that
composes a vendor's wire object with the HTTP shell.

Adding a provider is one wire module (a `Wire`, usually a `WireBase` subclass: path, auth
headers, and the sans-IO `build_payload`, `parse_response` and stream parser; a vendor whose
endpoint depends on the request, or whose error bodies say more, overrides `request_path`,
`retry_hint` or `refine_error`) and one thin `HttpChatModel` subclass that passes it the wire
object and its own few options.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

import httpx
from typing_extensions import Self, TypedDict

from .._content import BinaryContent, Content, ContentKind
from .._exceptions import ModelError
from .._identity import with_server_ids
from .._messages import ChatMessage
from .._model import ResponseComplete, StreamEvent
from .._request import (
    ChatRequest,
    ChatRequestParameters,
    ResponseFormat,
    ToolChoice,
    ToolSpecification,
)
from .._response import ChatResponse
from .._transport._redaction import NO_SECRETS, Redactor
from ._degrade import Adapted, adapt_request, fit_content, fit_tool_parts, with_json_arguments
from ._function import response_events
from ._http import HttpShell, StreamParser
from ._profiles import ModelProfile
from ._retry import RetryPolicy
from ._sse import ServerSentEvent
from ._tracing import traced

__all__ = [
    "HttpChatModel",
    "HttpModelOptions",
    "ParameterDefaults",
    "StreamParser",
    "Wire",
    "default_parameters",
    "secrets_of",
    "with_max_retries",
]


class Wire(Protocol):
    """One vendor API as the shared model sees it: where to POST, how to authenticate, and the
    sans-IO mapping of requests, responses and streams."""

    @property
    def provider(self) -> str:
        """The vendor's name in error messages and logs, e.g. `"OpenAI"`."""
        ...

    def request_path(self, model: str, *, stream: bool) -> str:
        """The endpoint of one call, relative to the base URL (`WireBase`: the fixed `path`)."""
        ...

    def retry_hint(self, body: Any) -> float | None:
        """The wait an error body asks for, in seconds, when the vendor says so there rather
        than in a `Retry-After` header (`WireBase`: never)."""
        ...

    def refine_error(self, error: ModelError) -> ModelError:
        """The vendor's reading of its own error body (`WireBase`: `error` as it is)."""
        ...

    @property
    def default_base_url(self) -> str:
        """The vendor's own API root; only there is an API key required."""
        ...

    @property
    def api_key_env(self) -> str:
        """The environment variable an absent `api_key` is read from."""
        ...

    @property
    def base_url_env(self) -> str:
        """The environment variable an absent `base_url` is read from."""
        ...

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The headers every request carries (authentication included, when there is a key)."""
        ...

    def build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        """The JSON body of a request."""
        ...

    def parse_response(self, body: Any) -> ChatResponse:
        """The response of a blocking call, from its parsed JSON body."""
        ...

    def stream_parser(self) -> StreamParser:
        """A fresh aggregator for one streamed answer."""
        ...

    @property
    def user_content(self) -> frozenset[ContentKind]:
        """The kinds of parts beyond text the API takes in user messages (`WireBase`: none)."""
        ...

    @property
    def tool_result_content(self) -> frozenset[ContentKind]:
        """The kinds of parts beyond text the API takes in tool results (`WireBase`: none)."""
        ...

    def refuse_part(self, part: BinaryContent) -> str | None:
        """Why the API cannot take `part`, of a kind it takes, by its source or format (a phrase
        after "the endpoint": `"takes a document only as inline data, not by URL"`); `None`
        when it can (`WireBase`: always)."""
        ...


class ParameterDefaults(TypedDict, total=False):
    """Default `ChatRequestParameters` a provider constructor takes as keywords (`model` and
    `max_tokens` are the constructor's own arguments)."""

    temperature: float | None
    top_p: float | None
    stop: Sequence[str] | None
    tools: Sequence[ToolSpecification] | None
    tool_choice: ToolChoice | str | None
    parallel_tool_calls: bool | None
    response_format: ResponseFormat | None
    custom: Mapping[str, Any]


class HttpModelOptions(ParameterDefaults, total=False):
    """The keyword options every HTTP provider takes, next to default `ChatRequestParameters`."""

    api_key: str | None
    """The vendor's API key; defaults to the wire's environment variable. Required only for the
    vendor's own endpoint: with another `base_url` (a local server, a gateway) it may be absent,
    and then no authentication header is sent."""
    base_url: str | None
    """The API root; defaults to the wire's environment variable, then the vendor's endpoint."""
    http_client: httpx.Client | None
    """The `httpx.Client` to use (e.g. with a `MockTransport` in tests); its own timeout applies
    and it is not closed by `close()`. One is created when omitted."""
    async_http_client: httpx.AsyncClient | None
    """The `httpx.AsyncClient` to use, likewise."""
    max_retries: int
    """Retries of transient failures (connect/read errors, timeouts, 408, 409, 429, 5xx), with
    exponential backoff and jitter, honouring `Retry-After`. Default 2."""
    timeout: float | httpx.Timeout | None
    """Seconds, or an `httpx.Timeout`, for the clients created here. Default 60."""
    total_timeout: float | None
    """Seconds one attempt of a model call may take, from connecting to the last byte of the
    answer, headers and stream included; each retry starts afresh. Over it, the call raises
    `ModelError`. `None` (the default) sets no bound beyond `timeout`, whose read timeout a
    server sending keep-alives or a byte at a time never trips."""
    max_line_length: int
    """The most characters one server-sent-event line (or one event's data) may hold before a
    stream is refused with `ModelError`; default 32 Mi."""
    max_connections: int
    """Connections of the pool of each client created here (all kept alive). Default 100."""
    max_concurrent_requests: int | None
    """The most requests of this model in flight at once, streams included (a stream holds its
    slot until read or closed); the others wait their turn, in order, and the wait counts in no
    timeout. Default: as many as the pool has connections (`max_connections`, or the pool limit
    of an `http_client`/`async_http_client` passed in where it can be read, else 100)."""
    max_response_bytes: int
    """The most bytes (after content decoding) a whole answer's body may hold — a blocking
    call's answer, or a JSON document answering a stream request — before the call is refused
    with `ModelError`, without reading the rest; default 32 MiB. An error answer's body is read
    up to it and the rest ignored."""
    max_stream_bytes: int
    """The most bytes (after content decoding) one event stream may hold in all, keep-alives
    included, before the stream is refused with `ModelError`; default 256 MiB."""


_TEST_HOOKS = frozenset({"sleep", "asleep"})
"""The retries' waits: options once, a test's hooks now (`retry_waits`); still honoured from
code written against them."""
_SHELL_OPTIONS = (
    frozenset(HttpModelOptions.__annotations__) - frozenset(ParameterDefaults.__annotations__)
) | _TEST_HOOKS
"""The options the `HttpShell` takes."""


def _warn_test_hooks(owner: str, options: Mapping[str, Any]) -> None:
    """Warn of the former options `sleep`/`asleep` (still honoured): test hooks."""
    hooks = sorted(options.keys() & _TEST_HOOKS)
    if hooks:
        warnings.warn(
            f"{owner}({'=..., '.join(hooks)}=...) is deprecated: how a retry waits is a test's "
            "hook, not a model option; use model.retry_waits(sleep, asleep)",
            DeprecationWarning,
            stacklevel=4,
        )


def default_parameters(
    owner: str, parameters: Mapping[str, Any], **fixed: Any
) -> ChatRequestParameters:
    """Model-level defaults: the `fixed` ones a constructor sets itself plus the user's
    `parameters` keywords, refusing names that are not `ChatRequestParameters` fields."""
    allowed = set(ChatRequestParameters.model_fields) - set(fixed)
    unknown = sorted(set(parameters) - allowed)
    if unknown:
        raise TypeError(
            f"{owner}() got unexpected keyword arguments: {', '.join(unknown)} "
            f"(default parameters are: {', '.join(sorted(allowed))})"
        )
    return ChatRequestParameters(**fixed, **parameters)


@traced
class HttpChatModel:
    """A `ChatModel` over one JSON endpoint: a vendor's `Wire` composed with the `HttpShell`.

    Providers subclass it only to give their constructor its own signature and docstring; they
    pass the wire object, the model name, the shared `options` and their fixed parameters.

    Raises:
        ModelError: no API key for the vendor's own endpoint.
        TypeError: a keyword that is not an option or a `ChatRequestParameters` field.
    """

    def __init__(
        self,
        wire: Wire,
        model: str,
        options: HttpModelOptions,
        *,
        profile: ModelProfile | None = None,
        **fixed: Any,
    ) -> None:
        owner = type(self).__name__
        _warn_test_hooks(owner, options)
        shell_options: dict[str, Any] = {k: v for k, v in options.items() if k in _SHELL_OPTIONS}
        parameters = {k: v for k, v in options.items() if k not in _SHELL_OPTIONS}
        self.model = model
        self.defaults = default_parameters(owner, parameters, model=model, **fixed)
        """Parameters every request starts from; a request's own parameters are merged over them."""
        api_key = shell_options.pop("api_key", None)
        if api_key is None:
            api_key = os.environ.get(wire.api_key_env)
        base_url = (
            shell_options.pop("base_url", None)
            or os.environ.get(wire.base_url_env)
            or wire.default_base_url
        )
        if not api_key and base_url.rstrip("/") == wire.default_base_url.rstrip("/"):
            raise ModelError(
                f"no {wire.provider} API key: pass api_key=... to {owner} or set the "
                f"{wire.api_key_env} environment variable (a custom base_url, e.g. a local "
                "server or a gateway, may go without one)"
            )
        self.profile = profile
        """What the model behind the endpoint supports; requests are adapted to it (or refused)
        before they are sent. `None`: everything is sent as asked."""
        self._wire = wire
        self._http = HttpShell(
            provider=wire.provider,
            label=_label(wire, profile),
            retry_hint=wire.retry_hint,
            refine_error=wire.refine_error,
            base_url=base_url,
            headers=wire.headers(api_key or None),
            secrets=[api_key],
            retry=RetryPolicy(max_retries=shell_options.pop("max_retries", 2)),
            **shell_options,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self._http.base_url!r})"

    def retry_waits(
        self,
        sleep: Callable[[float], None] | None = None,
        asleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> Self:
        """Wait between retries through `sleep` (sync calls) and `asleep` (async ones) in place
        of sleeping: a test records the waits. Returns this model."""
        if sleep is not None:
            self._http._sleep = sleep
        if asleep is not None:
            self._http._asleep = asleep
        return self

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._http.base_url

    def fit_tool_content(
        self, parts: Sequence[Content]
    ) -> tuple[tuple[Content, ...], tuple[str, ...]]:
        """A tool result's `parts` as this model takes them, decided at the tool result (the
        loop calls it once per result with content): each part the API and `profile` take
        nowhere replaced by a note saying why, and the notes; a request would leave them out
        the same way (`fit_content`), so a history never holds a part its next request fails on.

        Raises:
            UnsupportedFeatureError: a part a request would move or leave out, under the
                profile's `"error"` policy for `tool_result_content`.
        """
        user, tool = self._content_kinds()
        return fit_tool_parts(parts, user, tool, self.profile, self._wire.refuse_part)

    def _content_kinds(self) -> tuple[frozenset[ContentKind], frozenset[ContentKind]]:
        """The kinds of parts user messages and tool results may carry: the API's, as far as
        the profile allows."""
        wire, profile = self._wire, self.profile
        if profile is None:
            return wire.user_content, wire.tool_result_content
        return (
            wire.user_content & profile.user_content,
            wire.tool_result_content & profile.tool_result_content,
        )

    def _adapt(self, request: ChatRequest, *, stream: bool) -> Adapted:
        parameters = self.defaults.merge(request.parameters)
        # The server gets back the call ids it sent, whatever ids the loop gave the calls.
        messages = with_server_ids(request.messages)
        profile = self.profile
        if profile is None:
            adapted = Adapted(list(messages), parameters)
        else:
            adapted = adapt_request(profile, messages, parameters, stream=stream)
        user, tool = self._content_kinds()
        fitted = fit_content(adapted, user, tool, profile, self._wire.refuse_part)
        return with_json_arguments(fitted)

    def _path(self, adapted: Adapted, stream: bool) -> str:
        return self._wire.request_path(adapted.parameters.model or self.model, stream=stream)

    def _payload(self, adapted: Adapted, *, stream: bool) -> dict[str, Any]:
        return self._wire.build_payload(adapted.messages, adapted.parameters, stream=stream)

    def _parser(self, adapted: Adapted) -> Callable[[Any], ChatResponse]:
        """The wire's `parse_response`, recording the request's adaptations on the response."""
        if not adapted.adaptations:
            return self._wire.parse_response

        def parse(body: Any) -> ChatResponse:
            return _recorded(self._wire.parse_response(body), adapted)

        return parse

    def _stream_parser(self, adapted: Adapted) -> StreamParser:
        parser = self._wire.stream_parser()
        return _RecordingParser(parser, adapted) if adapted.adaptations else parser

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the whole answer.

        Raises:
            ModelError: HTTP error status (after retries), network failure, or a malformed answer.
            UnsupportedFeatureError: the request asks for what `profile` lacks, under an
                `"error"` policy; nothing was sent.
        """
        adapted = self._adapt(request, stream=False)
        payload = self._payload(adapted, stream=False)
        return self._http.post_json(self._path(adapted, False), payload, self._parser(adapted))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        adapted = self._adapt(request, stream=False)
        payload = self._payload(adapted, stream=False)
        path = self._path(adapted, False)
        return await self._http.apost_json(path, payload, self._parser(adapted))

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` as a stream; yield text, thinking and tool-call deltas, then
        `ResponseComplete` with the same response `chat` would return.

        Raises:
            ModelError: as `chat`, plus an error sent inside the stream, or a stream cut off
                before the answer was complete.
        """
        adapted = self._adapt(request, stream=True)
        if adapted.buffered:
            payload = self._payload(adapted, stream=False)
            path = self._path(adapted, False)
            yield from response_events(self._http.post_json(path, payload, self._parser(adapted)))
            return
        payload = self._payload(adapted, stream=True)
        path = self._path(adapted, True)
        yield from self._http.stream(path, payload, self._stream_parser(adapted))

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        adapted = self._adapt(request, stream=True)
        if adapted.buffered:
            payload = self._payload(adapted, stream=False)
            path = self._path(adapted, False)
            response = await self._http.apost_json(path, payload, self._parser(adapted))
            for event in response_events(response):
                yield event
            return
        payload = self._payload(adapted, stream=True)
        events = self._http.astream(
            self._path(adapted, True), payload, self._stream_parser(adapted)
        )
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    def close(self) -> None:
        """Close the HTTP client this model created (an injected one stays open)."""
        self._http.close()

    async def aclose(self) -> None:
        """Close the HTTP clients this model created (injected ones stay open)."""
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def secrets_of(model: object) -> Redactor:
    """The redactor of `model`'s keys, and of the models a `FallbackModel` asks (one that
    redacts nothing for a model holding no key)."""
    from ._fallback import FallbackModel

    if isinstance(model, HttpChatModel):
        return model._http.redactor
    if isinstance(model, FallbackModel):
        return Redactor.joined(secrets_of(m) for m in model.models)
    return NO_SECRETS


def with_max_retries(model: HttpChatModel, max_retries: int) -> HttpChatModel:
    """A copy of `model`, sharing its clients, whose requests are retried at most `max_retries`
    times (a durable run's activity: Temporal retries the activity instead, `0`)."""
    clone = copy.copy(model)
    clone._http = copy.copy(model._http)
    clone._http.retry = dataclasses.replace(model._http.retry, max_retries=max_retries)
    return clone


def _label(wire: Wire, profile: ModelProfile | None) -> str | None:
    """The name errors give a compatible server (its profile's), when it is not the vendor's
    own: a user who chose `llamacpp:` reads "llamacpp API error", not "OpenAI API error"."""
    if profile is None or profile.name in ("custom", wire.provider.lower()):
        return None
    return profile.name


def _recorded(response: ChatResponse, adapted: Adapted) -> ChatResponse:
    """`response` with the request's adaptations in `metadata["adaptations"]`."""
    if not adapted.adaptations:
        return response
    metadata = {**response.metadata, "adaptations": list(adapted.adaptations)}
    return response.model_copy(update={"metadata": metadata})


class _RecordingParser:
    """A wire's stream parser whose final response records the request's adaptations."""

    def __init__(self, parser: StreamParser, adapted: Adapted) -> None:
        self._parser = parser
        self._adapted = adapted

    @property
    def done(self) -> bool:
        return self._parser.done

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        return [self._recorded(e) for e in self._parser.take(event)]

    def end(self) -> list[StreamEvent]:
        return [self._recorded(e) for e in self._parser.end()]

    def _recorded(self, event: StreamEvent) -> StreamEvent:
        if isinstance(event, ResponseComplete):
            return ResponseComplete(response=_recorded(event.response, self._adapted))
        return event
