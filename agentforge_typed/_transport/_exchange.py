"""One HTTP exchange, bounded: one deadline for all of it, one cap on what is read.

Every path that reads a server over httpx — the providers' shell, `HttpTool`, `probe` — reads
through this module:

- A `Deadline` covers a whole exchange: connecting, sending, waiting for the headers, every
  redirect, the body. Each request sent under it carries it in its timeouts
  (`Deadline.timeout`: every phase capped, and the deadline itself); the connections of a client
  passed through `bound` check it at each socket operation, so a server that drips its headers
  a byte at a time — which no read timeout catches, each byte arriving in time — is cut off
  there; and `Deadline.watch` checks it between a body's chunks, whatever the transport.
- `read_body` reads a body whole up to a cap counted after content decoding (`_decoding`
  inflates in steps, so a small gzip body cannot inflate past it in memory), refusing a body over
  it or keeping its head; `capped` refuses a body once its bytes pass a cap, as they are read.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ._decoding import aiter_bounded, iter_bounded

__all__ = ["Body", "Deadline", "aread_body", "bound", "capped", "read_body"]

ClientT = TypeVar("ClientT", httpx.Client, httpx.AsyncClient)


class Deadline:
    """The moment one exchange must be over by, and the error it ends with past it."""

    __slots__ = ("_overtime", "at", "seconds")

    def __init__(self, seconds: float, overtime: Callable[[], Exception]) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self._overtime = overtime

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def check(self) -> None:
        """Raise the overtime error once the deadline has passed."""
        if time.monotonic() >= self.at:
            raise self._overtime()

    def overtime(self) -> Exception:
        """The error the exchange ends with past its deadline."""
        return self._overtime()

    def timeout(self, timeout: httpx.Timeout) -> httpx.Timeout:
        """`timeout` with every phase capped at the deadline's length, and carrying the deadline
        to the sockets of clients passed through `bound`; a redirect httpx builds keeps it."""
        return httpx.Timeout(
            **{
                phase: _Until(self.seconds if limit is None else min(limit, self.seconds), self.at)
                for phase, limit in timeout.as_dict().items()
            }
        )

    def watch(self, response: httpx.Response) -> httpx.Response:
        """`response`, its body raising the overtime error once the deadline has passed."""
        response.stream = _Watched(response.stream, deadline=self)
        return response


class _Until(float):
    """A phase's timeout that also carries its exchange's deadline (a monotonic time)."""

    __slots__ = ("at",)
    at: float

    def __new__(cls, seconds: float, at: float) -> _Until:
        until = super().__new__(cls, seconds)
        until.at = at
        return until


def _left(timeout: Any, error: str) -> Any:
    """A socket operation's timeout: the phase's, or what is left of the deadline it carries
    when that is less; the httpcore timeout named `error` once nothing is left."""
    if type(timeout) is not _Until:
        return timeout
    left = timeout.at - time.monotonic()
    if left <= 0:
        import httpcore

        raise getattr(httpcore, error)("the exchange's deadline has passed")
    return min(float(timeout), left)


def bound(client: ClientT) -> ClientT:
    """`client`, whose connections opened from now on honour the deadline a request carries
    (`Deadline.timeout`) at each socket operation; requests without one are untouched. Its own
    transports (httpx's, for any URL it mounts) are reached; another transport is left as it is
    (a test's `MockTransport` opens no socket)."""
    wrapper = _AsyncBackend if isinstance(client, httpx.AsyncClient) else _Backend
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, _Backend | _AsyncBackend):
            pool._network_backend = wrapper(backend)  # type: ignore[union-attr]
    return client


class _Backend:
    """httpcore's blocking network backend, each operation within the deadline."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> _Stream:
        stream = self._backend.connect_tcp(
            host, port, _left(timeout, "ConnectTimeout"), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> _Stream:
        stream = self._backend.connect_unix_socket(
            path, _left(timeout, "ConnectTimeout"), socket_options
        )
        return _Stream(stream)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _Stream:
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(max_bytes, _left(timeout, "ReadTimeout"))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, "WriteTimeout"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        stream = self._stream.start_tls(
            ssl_context, server_hostname, _left(timeout, "ConnectTimeout")
        )
        return _Stream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _AsyncBackend:
    """Async `_Backend`."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> _AsyncStream:
        stream = await self._backend.connect_tcp(
            host, port, _left(timeout, "ConnectTimeout"), local_address, socket_options
        )
        return _AsyncStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> _AsyncStream:
        stream = await self._backend.connect_unix_socket(
            path, _left(timeout, "ConnectTimeout"), socket_options
        )
        return _AsyncStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _AsyncStream:
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = await self._stream.read(max_bytes, _left(timeout, "ReadTimeout"))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, _left(timeout, "WriteTimeout"))

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _AsyncStream:
        stream = await self._stream.start_tls(
            ssl_context, server_hostname, _left(timeout, "ConnectTimeout")
        )
        return _AsyncStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


# -- bodies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """A body read up to its cap."""

    content: bytes
    truncated: bool
    """Whether more followed the cap (not read)."""


def read_body(
    response: httpx.Response, limit: int, refuse: Callable[[str], Exception] | None = None
) -> Body:
    """Read the body of `response` whole, then close it: at most `limit` bytes, counted after
    content decoding. Past the limit, `refuse(size)` is raised when given (before any byte is
    read when the `Content-Length` says so; `size` in words), else the head is kept."""
    try:
        collector = _Collector(response, limit, refuse)
        for chunk in iter_bounded(response, limit):
            if collector.full(chunk):
                break
    finally:
        response.close()
    return collector.body()


async def aread_body(
    response: httpx.Response, limit: int, refuse: Callable[[str], Exception] | None = None
) -> Body:
    """Async `read_body`."""
    try:
        collector = _Collector(response, limit, refuse)
        async for chunk in aiter_bounded(response, limit):
            if collector.full(chunk):
                break
    finally:
        await response.aclose()
    return collector.body()


class _Collector:
    __slots__ = ("_chunks", "_limit", "_refuse", "_size", "_truncated")

    def __init__(
        self, response: httpx.Response, limit: int, refuse: Callable[[str], Exception] | None
    ) -> None:
        self._limit = limit
        self._refuse = refuse
        self._chunks: list[bytes] = []
        self._size = 0
        self._truncated = False
        declared = response.headers.get("content-length", "")
        if (
            refuse is not None
            and declared.isdigit()
            and "content-encoding" not in response.headers
            and int(declared) > limit
        ):
            raise refuse(declared)

    def full(self, chunk: bytes) -> bool:
        """Take one chunk; `True` once the limit is reached (stop reading)."""
        room = self._limit - self._size
        if len(chunk) <= room:
            self._chunks.append(chunk)
            self._size += len(chunk)
            return False
        if self._refuse is not None:
            raise self._refuse(f"more than {self._limit}")
        self._chunks.append(chunk[:room])
        self._size, self._truncated = self._limit, True
        return True

    def body(self) -> Body:
        return Body(b"".join(self._chunks), self._truncated)


def capped(response: httpx.Response, cap: int, over: Callable[[], Exception]) -> httpx.Response:
    """`response`, its body raising `over()` once more than `cap` bytes of it were read (a
    stream, which `read_body` does not hold whole, included)."""
    response.stream = _Watched(response.stream, cap=cap, over=over)
    return response


class _Watched(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body checked at each chunk: against a deadline (a server trickling keep-alives
    or single bytes never trips a read timeout), and against a cap on its bytes."""

    def __init__(
        self,
        stream: httpx.SyncByteStream | httpx.AsyncByteStream,
        *,
        deadline: Deadline | None = None,
        cap: int | None = None,
        over: Callable[[], Exception] | None = None,
    ) -> None:
        self._stream = stream
        self._deadline = deadline
        self._cap = cap
        self._over = over
        self._read = 0

    def _check(self, chunk: bytes) -> None:
        if self._deadline is not None:
            self._deadline.check()
        if self._cap is not None and self._over is not None:
            self._read += len(chunk)
            if self._read > self._cap:
                raise self._over()

    def _overtime(self, error: httpx.TimeoutException) -> Exception:
        """The deadline's error for a read that timed out because the deadline passed."""
        if self._deadline is not None and self._deadline.passed():
            return self._deadline.overtime()
        return error

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self._stream, httpx.SyncByteStream)
        try:
            for chunk in self._stream:
                self._check(chunk)
                yield chunk
        except httpx.TimeoutException as error:
            raise self._overtime(error) from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self._stream, httpx.AsyncByteStream)
        try:
            async for chunk in self._stream:
                self._check(chunk)
                yield chunk
        except httpx.TimeoutException as error:
            raise self._overtime(error) from None

    def close(self) -> None:
        if isinstance(self._stream, httpx.SyncByteStream):
            self._stream.close()

    async def aclose(self) -> None:
        if isinstance(self._stream, httpx.AsyncByteStream):
            await self._stream.aclose()
