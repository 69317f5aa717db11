"""An MCP server's answers over HTTP, bounded: one message is at most `MAX_MESSAGE_BYTES`.

The SDK reads most answers whole (`response.aread()`): a JSON answer, the session's DELETE, a
redirect it drains, every answer of an authorization flow. It bounds only an event stream it
parses, each event by its `max_sse_event_size`. A server answering with an endless body would fill
the memory before any deadline passed, so every answer's body is counted as it is decoded (a gzip
or deflate body is inflated here, a step at a time, so a few kilobytes cannot inflate past the cap
either), but for the event streams the client asked for.

It is done by a response hook, not a transport, so that the client keeps the transports it makes
itself (the environment's proxies among them).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import Any

from ..._transport._decoding import INFLATED, Inflater

__all__ = ["ACCEPTED_ENCODINGS", "MAX_MESSAGE_BYTES", "bounding", "is_too_large"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The most bytes of one message an MCP server sends over HTTP: an answer's body (decoded), or
one event of an event stream."""
ACCEPTED_ENCODINGS = ", ".join(sorted(INFLATED))
"""What the client asks a server to compress with: only what is inflated within the cap."""


def bounding(limit: int = MAX_MESSAGE_BYTES) -> Callable[[Any], Coroutine[Any, Any, None]]:
    """An `httpx2` response hook whose answers end with an error past `limit` decoded bytes,
    but for the event streams a GET or POST asked for (which the SDK reads event by event)."""
    too_large, stream_class = _classes()

    async def bound(response: Any) -> None:
        request = response.request
        if (
            request.method in ("GET", "POST")
            and 200 <= response.status_code < 300
            and "text/event-stream" in request.headers.get("accept", "").lower()
            and response.headers.get("content-type", "").lower().startswith("text/event-stream")
        ):
            return
        encoding = response.headers.get("content-encoding", "").strip().lower()
        original = response.stream
        for name in ("content-encoding", "content-length"):  # decoded here: httpx must not
            response.headers.pop(name, None)
        response.stream = stream_class(_capped(original, encoding, limit, too_large), original)

    return bound


def is_too_large(exc: BaseException) -> bool:
    """Whether `exc` is an answer refused here (over the cap, or not decodable within it)."""
    return isinstance(exc, _classes()[0])


@functools.cache
def _classes() -> tuple[type[Exception], type[Any]]:
    import httpx2

    class TooLargeError(httpx2.StreamError):
        """An answer over the cap, or one that cannot be decoded within it. A `StreamError`,
        which the SDK answers a waiting request with, naming this message."""

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, chunks: AsyncGenerator[bytes, None], original: Any) -> None:
            self._chunks = chunks
            self._original = original

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            await self._chunks.aclose()  # a body left unread: its generator ends here too
            await self._original.aclose()

    return TooLargeError, Capped


async def _capped(
    raw: Any, encoding: str, limit: int, error: type[Exception]
) -> AsyncGenerator[bytes, None]:
    """The decoded body read from `raw` (the response's own stream), raising `error` once more
    than `limit` bytes came (or at once, for an encoding not inflated here: raised while the
    body is read, the SDK answers the request with it, where a transport's error would end the
    session)."""
    if encoding not in ("", "identity", *INFLATED):
        raise error(
            f"the MCP server answered in Content-Encoding {encoding[:40]!r}, which the client "
            f"did not ask for (it takes {ACCEPTED_ENCODINGS})"
        )
    inflater = None
    if encoding in INFLATED:
        inflater = Inflater(
            encoding,
            limit,
            lambda text: error(f"the MCP server's answer is not {encoding}: {text}"),
        )
    room = limit
    async for chunk in raw:
        for piece in inflater.feed(chunk) if inflater is not None else (chunk,):
            room -= len(piece)
            if room < 0:
                raise error(
                    f"the MCP server's answer is over {limit:,} bytes (MAX_MESSAGE_BYTES): not read"
                )
            yield piece
