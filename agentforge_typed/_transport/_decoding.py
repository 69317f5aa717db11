"""A response body, content-decoded without inflating past a cap.

httpx decodes each chunk it receives whole: a few kilobytes of gzip (a "zip bomb") may become
hundreds of megabytes in memory before a reader sees the first chunk and checks its cap. Here a
gzip or deflate body is inflated in steps that never give more than one byte past the cap, so a
reader's cap bounds the memory too. Other encodings (`br`, `zstd`, when their packages are
installed, or several stacked) are left to httpx.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable, Iterator

import httpx

__all__ = ["INFLATED", "Inflater", "aiter_bounded", "iter_bounded"]

_WINDOWS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The zlib window of each encoding inflated here (gzip's with its header and trailer)."""
INFLATED = frozenset(_WINDOWS)
"""The content encodings `Inflater` inflates."""


def iter_bounded(response: httpx.Response, limit: int) -> Iterator[bytes]:
    """The decoded body of a streamed `response`, in chunks, ending once more than `limit` bytes
    were given (at most `limit + 1` in all)."""
    inflater = _inflater(response, limit)
    if inflater is None:
        yield from response.iter_bytes()
        return
    for raw in response.iter_raw():
        yield from inflater.feed(raw)
        if inflater.full:
            return


async def aiter_bounded(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """Async `iter_bounded`."""
    inflater = _inflater(response, limit)
    if inflater is None:
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    async for raw in response.aiter_raw():
        for piece in inflater.feed(raw):
            yield piece
        if inflater.full:
            return


class Inflater:
    """One gzip or deflate stream, inflated a step at a time, `limit + 1` bytes in all at most;
    a body that is not one raises what `error` makes of zlib's message."""

    def __init__(self, encoding: str, limit: int, error: Callable[[str], Exception]) -> None:
        self._deflate = encoding == "deflate"
        self._inflate = zlib.decompressobj(_WINDOWS[encoding])
        self._started = False
        self._error = error
        self._room = limit + 1

    @property
    def full(self) -> bool:
        """Whether more than the limit was given: nothing more will be."""
        return self._room <= 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        """What `data` inflates to, in pieces, within the room left."""
        while data and self._room > 0:
            try:
                piece = self._inflate.decompress(data, self._room)
            except zlib.error as exc:
                if self._deflate and not self._started:
                    # Raw deflate, without zlib's header: some servers send it, and httpx takes it.
                    self._inflate, self._started = zlib.decompressobj(-zlib.MAX_WBITS), True
                    continue
                raise self._error(str(exc)) from exc
            self._started = True
            self._room -= len(piece)
            data = self._inflate.unconsumed_tail
            if piece:
                yield piece


def _inflater(response: httpx.Response, limit: int) -> Inflater | None:
    """An inflater for the body's one gzip or deflate encoding; `None` when httpx decodes it (no
    encoding, identity, or one this module does not inflate)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in _WINDOWS:
        return None
    request = response.request
    return Inflater(encoding, limit, lambda text: httpx.DecodingError(text, request=request))
