"""An MCP server's answers over HTTP, bounded: one message is at most `MAX_MESSAGE_BYTES`.

The SDK reads a JSON answer whole (`response.aread()`) and bounds each SSE event by its
`max_sse_event_size`. A server answering with an endless JSON body would fill the memory before
any deadline passed, so the HTTP client's transport counts each JSON answer's bytes as they are
decoded: a gzip or deflate body is inflated here, a step at a time, so a few kilobytes cannot
inflate past the cap either. An SSE event is bounded by the SDK, at the same size.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from ..._transport._decoding import INFLATED, Inflater

__all__ = ["ACCEPTED_ENCODINGS", "MAX_MESSAGE_BYTES", "bounded_transport"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The most bytes of one message an MCP server sends over HTTP: a JSON answer (decoded) or one
SSE event."""
ACCEPTED_ENCODINGS = ", ".join(sorted(INFLATED))
"""What the client asks a server to compress with: only what is inflated within the cap."""


def bounded_transport(limit: int = MAX_MESSAGE_BYTES) -> Any:
    """An `httpx2` transport whose JSON answers end with an error past `limit` bytes."""
    import httpx2

    return _classes()[0](httpx2.AsyncHTTPTransport(), limit)


@functools.cache
def _classes() -> tuple[type[Any], type[Any]]:
    import httpx2

    class TooLargeError(httpx2.StreamError):
        """An answer over the cap, or one that cannot be decoded within it. A `StreamError`,
        which the SDK answers the waiting request with, naming this message."""

    class Bounded(httpx2.AsyncBaseTransport):
        def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self._inner.handle_async_request(request)
            if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                return response  # each event is bounded by the SDK (`max_sse_event_size`)
            encoding = response.headers.get("content-encoding", "").strip().lower()
            headers = [
                (name, value)
                for name, value in response.headers.multi_items()
                if name.lower() not in ("content-encoding", "content-length")
            ]
            stream = _capped(response, encoding, self._limit, TooLargeError)
            return httpx2.Response(
                response.status_code,
                headers=headers,
                stream=_Stream(stream, response),
                request=request,
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    class _Stream(httpx2.AsyncByteStream):
        def __init__(self, chunks: AsyncIterator[bytes], response: httpx2.Response) -> None:
            self._chunks = chunks
            self._response = response

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            await self._response.aclose()

    return Bounded, TooLargeError


async def _capped(
    response: Any, encoding: str, limit: int, error: type[Exception]
) -> AsyncIterator[bytes]:
    """The decoded body of `response`, raising `error` once more than `limit` bytes came (or at
    once, for an encoding not inflated here: the SDK answers the request with the error, where a
    transport's error would end the session)."""
    if encoding not in ("", "identity", *INFLATED):
        raise error(
            f"the MCP server answered in Content-Encoding {encoding[:40]!r}, which the client "
            f"did not ask for (it takes {ACCEPTED_ENCODINGS})"
        )
    inflater = (
        Inflater(
            encoding,
            limit,
            lambda text: error(f"the MCP server's answer is not {encoding}: {text}"),
        )
        if encoding in INFLATED
        else None
    )
    room = limit
    async for raw in response.aiter_raw():
        for piece in inflater.feed(raw) if inflater is not None else (raw,):
            room -= len(piece)
            if room < 0:
                raise error(
                    f"the MCP server's answer is over {limit:,} bytes (MAX_MESSAGE_BYTES): not read"
                )
            yield piece
