"""The stdio transport: newline-delimited JSON-RPC over the process's stdin and stdout, bounded.

The SDK's own stdio transport buffers a whole line however long it is, drops a malformed one
without a word, and writes to a client that has stopped reading forever. This one, built on
asyncio pipes:

- reads at most `max_line` bytes of a line: a longer one is discarded as it streams in (never
  held) and answered with a JSON-RPC error (`-32600`, "request too large");
- answers a line that is not JSON with `-32700` (parse error) and one that is JSON but not a
  JSON-RPC message with `-32600`, with the request's `id` when it has one;
- stops reading while `MAX_IN_FLIGHT` requests wait for their answer (the client's writes then
  block: backpressure, not a queue), and ends the session when one answer waits more than
  `write_timeout` seconds for the client to read it.

While serving, file descriptor 0 reads the null device and 1 writes to stderr, so that a tool's
stray `print` cannot corrupt the wire and a child process cannot steal its input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

__all__ = ["MAX_IN_FLIGHT", "stdio_streams"]

logger = logging.getLogger("agentforge_typed.serving")

MAX_IN_FLIGHT = 64
"""The most requests read and not yet answered; past it, reading waits for answers to go out."""
_CHUNK = 64 * 1024

_Read = MemoryObjectReceiveStream[SessionMessage | Exception]
_Write = MemoryObjectSendStream[SessionMessage]


class _Line:
    """The line being read: its pieces, kept only while their sum is within the cap."""

    __slots__ = ("cap", "pieces", "size")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.pieces: list[bytes] | None = []
        self.size = 0

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.pieces is not None:
            if self.size > self.cap:
                self.pieces = None  # too long: everything until its end is dropped as it comes
            else:
                self.pieces.append(piece)

    def take(self) -> bytes | None:
        """The line (`None` when it was over the cap); the next one starts empty."""
        line = None if self.pieces is None else b"".join(self.pieces)
        self.pieces, self.size = [], 0
        return line


def _refusal(line: bytes) -> mcp_types.JSONRPCError:
    """The error answering a line that is not a JSON-RPC message."""
    try:
        decoded = pydantic_core.from_json(line)
    except ValueError:
        return _error(None, mcp_types.PARSE_ERROR, "Parse error: not JSON")
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    return _error(request_id, mcp_types.INVALID_REQUEST, "Invalid request: not a JSON-RPC message")


def _error(request_id: Any, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message)
    )


class _Pipes:
    """The transport of one session: reads lines into `read`, writes what `write` receives."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_line: int,
        write_timeout: float,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.max_line = max_line
        self.write_timeout = write_timeout
        self.in_flight = 0
        self.answered = anyio.Event()

    async def read_into(self, inbound: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        async with inbound:
            line = _Line(self.max_line)
            while chunk := await self.reader.read(_CHUNK):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    line.add(chunk[start:end])
                    start = end + 1
                    await self._deliver(line.take(), inbound)
                line.add(chunk[start:])
            if line.size:
                await self._deliver(line.take(), inbound)

    async def _deliver(
        self, line: bytes | None, inbound: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        if line is None:
            await self._send(
                _error(
                    None,
                    mcp_types.INVALID_REQUEST,
                    f"Request too large (over {self.max_line} bytes)",
                )
            )
            return
        if not line.strip():
            return
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            await self._send(_refusal(line))
            return
        if isinstance(message, mcp_types.JSONRPCRequest):
            while self.in_flight >= MAX_IN_FLIGHT:
                self.answered = anyio.Event()
                await self.answered.wait()
            self.in_flight += 1
        await inbound.send(SessionMessage(message))

    async def write_from(self, outbound: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with outbound:
            async for item in outbound:
                message = item.message
                if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                    self.in_flight = max(self.in_flight - 1, 0)
                    self.answered.set()
                await self._send(message)

    async def _send(self, message: mcp_types.JSONRPCMessage) -> None:
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        self.writer.write(data)
        try:
            with anyio.fail_after(self.write_timeout):
                await self.writer.drain()
        except TimeoutError:
            raise ConnectionError(
                f"the client has read nothing for {self.write_timeout:g} seconds"
            ) from None


@contextlib.asynccontextmanager
async def stdio_streams(
    max_line: int,
    *,
    write_timeout: float = 60.0,
    stdin: int | None = None,
    stdout: int | None = None,
) -> AsyncIterator[tuple[_Read, _Write]]:
    """The `(read, write)` streams `Server.run` takes, over stdin and stdout (or the file
    descriptors given, which are then not diverted), until stdin ends.

    Raises:
        ConnectionError: An answer waited over `write_timeout` seconds for the client to read.
    """
    loop = asyncio.get_running_loop()
    with contextlib.ExitStack() as claims:
        in_fd = stdin if stdin is not None else claims.enter_context(_claimed(0, os.O_RDONLY))
        out_fd = stdout if stdout is not None else claims.enter_context(_claimed(1, os.O_WRONLY))
        reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0, closefd=False)
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", 0, closefd=False)
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        pipes = _Pipes(reader, writer, max_line, write_timeout)
        inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(pipes.read_into, inbound_send)
                tasks.start_soon(pipes.write_from, outbound_receive)
                yield inbound, outbound
        finally:
            read_transport.close()
            # Every answer was drained before the next: what is left is for a client that stopped
            # reading, and would keep the transport open for ever.
            if write_transport.get_write_buffer_size():
                write_transport.abort()
            else:
                write_transport.close()


@contextlib.contextmanager
def _claimed(fd: int, mode: int) -> Any:
    """A private duplicate of `fd` for the wire, `fd` itself pointing elsewhere meanwhile (the null
    device for stdin, stderr for stdout); restored on exit."""
    private = os.dup(fd)
    try:
        diversion = os.open(os.devnull, mode) if fd == 0 else os.dup(2)
        os.dup2(diversion, fd)
        os.close(diversion)
    except OSError:  # nowhere to divert to: serve on it in place
        os.close(private)
        yield fd
        return
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(private, fd)
        os.close(private)
        if fd == 1:
            sys.stdout.flush()
