"""The I/O shell every HTTP provider shares: request → payload → HTTP → response, and
server-sent events → stream parser → `StreamEvent`s, sync and async.

A provider subclasses `HttpChatModel` and supplies only its sans-IO pieces: `_build_payload`,
`_parse_response` and `_stream_parser`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Protocol

from typing_extensions import Self

from .._events import StreamEvent
from .._messages import ChatMessage
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse
from ._http import HttpShell
from ._sse import ServerSentEvent

__all__ = ["HttpChatModel", "StreamParser", "default_parameters"]


class StreamParser(Protocol):
    """A provider's sans-IO stream aggregation, fed decoded server-sent events."""

    @property
    def done(self) -> bool:
        """Whether the stream's own end marker arrived (later events are not read)."""
        ...

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """The deltas one event carries."""
        ...

    def end(self) -> list[StreamEvent]:
        """The events owed once the bytes stop (the final `ResponseComplete`, unless already
        given); raises `ModelError` for a stream cut off before its answer was complete."""
        ...


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


class HttpChatModel:
    """A `ChatModel` over one JSON endpoint: subclasses set `_path`, `defaults`, `_http` and
    the three sans-IO hooks."""

    _path: ClassVar[str]
    model: str
    defaults: ChatRequestParameters
    """Parameters every request starts from; a request's own parameters are merged over them."""
    _http: HttpShell

    def _build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _parse_response(self, body: Any) -> ChatResponse:
        raise NotImplementedError

    def _stream_parser(self) -> StreamParser:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self._http.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._http.base_url

    def _payload(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        parameters = self.defaults.merge(request.parameters)
        return self._build_payload(request.messages, parameters, stream=stream)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the whole answer.

        Raises:
            ModelError: HTTP error status (after retries), network failure, or a malformed answer.
        """
        return self._parse_response(
            self._http.post_json(self._path, self._payload(request, stream=False))
        )

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Async `chat`."""
        body = await self._http.apost_json(self._path, self._payload(request, stream=False))
        return self._parse_response(body)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` as a stream; yield text, thinking and tool-call deltas, then
        `ResponseComplete` with the same response `chat` would return.

        Raises:
            ModelError: as `chat`, plus an error sent inside the stream, or a stream cut off
                before the answer was complete.
        """
        parser = self._stream_parser()
        for event in self._http.stream_sse(self._path, self._payload(request, stream=True)):
            yield from parser.take(event)
            if parser.done:
                break
        yield from parser.end()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async `stream`."""
        parser = self._stream_parser()
        events = self._http.astream_sse(self._path, self._payload(request, stream=True))
        try:
            async for event in events:
                for stream_event in parser.take(event):
                    yield stream_event
                if parser.done:
                    break
        finally:
            await events.aclose()
        for stream_event in parser.end():
            yield stream_event

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
