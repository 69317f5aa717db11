"""A sans-IO Server-Sent Events decoder (the WHATWG `text/event-stream` format).

`SSEDecoder.feed()` takes bytes or text in chunks of any size — a line, an event, or a
multi-byte UTF-8 character may be split anywhere — and returns the events each chunk completes.
`iter_sse` / `aiter_sse` drive it over an `httpx.Response`. Decoding follows the spec: `LF`,
`CRLF` and lone `CR` end lines; `:` lines are comments (keep-alives); `data:` lines of one event
join with `\\n`; `id` persists across events; a block without `data` dispatches nothing.

At the end of the input (`SSEDecoder.end()`), an event whose lines are all complete is dispatched
even without the final blank line (real servers end that way, and the official SDKs accept it).
So is a last `data:` line without its line break when its value is whole — a JSON document, or
OpenAI's `[DONE]` — as the SDKs read it too. Any other stream that stops inside a line was cut
off, and that is a `ModelError`.

Work is linear in the stream's size however it is chunked: each chunk is scanned once, and the
pieces of an unfinished line are joined once, when it ends. A line, or the data of one event,
longer than `max_line_length` characters is a `ModelError` rather than unbounded memory.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pydantic_core

from .._exceptions import ModelError
from .._transport._decoding import aiter_bounded, iter_bounded

__all__ = [
    "DEFAULT_MAX_LINE_LENGTH",
    "DEFAULT_MAX_STREAM_BYTES",
    "SSEDecoder",
    "ServerSentEvent",
    "aiter_sse",
    "iter_sse",
]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")

DEFAULT_MAX_LINE_LENGTH = 32 * 1024 * 1024
"""Characters one line, or the data of one event, may hold (32 Mi): far above any real chunk,
low enough that a hostile server cannot exhaust memory."""
DEFAULT_MAX_STREAM_BYTES = 256 * 1024 * 1024
"""Bytes one event stream may hold in all, after content decoding (256 MiB): the envelopes of a
very long answer (each token's delta wrapped in an event of a few hundred bytes) stay far below,
and a server that streams keep-alives or deltas forever is stopped."""


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event."""

    event: str = "message"
    """The `event:` field, `"message"` when the event has none."""
    data: str = ""
    """The `data:` lines joined with `\\n`."""
    id: str | None = None
    """The last event id seen so far in the stream (ids persist across events)."""
    retry: int | None = None
    """The `retry:` reconnection time in milliseconds, when this event carried one."""

    def json(self) -> Any:
        """Parse `data` as JSON.

        Raises:
            ValueError: `data` is not valid JSON.
        """
        return pydantic_core.from_json(self.data)


class SSEDecoder:
    """Incremental decoder: feed chunks, get back the events they complete.

    Args:
        max_line_length: The most characters one line, or one event's data, may hold.
        source: Who sends the stream, for error messages (a provider's name).
    """

    def __init__(
        self, *, max_line_length: int = DEFAULT_MAX_LINE_LENGTH, source: str = "server"
    ) -> None:
        self._source = source
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max = max_line_length
        self._partial: list[str] = []
        """The pieces of the line not ended yet."""
        self._partial_length = 0
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._data_length = 0
        self._event = ""
        self._retry: int | None = None
        self.last_event_id: str | None = None
        """The id that the next dispatched event will carry."""

    @property
    def pending(self) -> bool:
        """Whether an unfinished line or event is buffered (at end of stream: it was cut off)."""
        return bool(self._partial or self._data or self._event or self._utf8.getstate()[0])

    def feed(self, chunk: bytes | str) -> list[ServerSentEvent]:
        """Decode one chunk and return the events it completes, in order.

        Raises:
            ModelError: a line or an event's data is longer than `max_line_length`.
        """
        text = self._utf8.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            # The previous chunk ended on CR, already taken as a line end: drop the LF of a CRLF.
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        if "\r" in text:
            lines = _LINE_BREAK.split(text)
            if text[-1] == "\r":
                self._skip_lf = True
        else:
            lines = text.split("\n")
        last = lines.pop()
        if lines and self._partial:
            # Only the chunk is scanned; what came before of its first line is joined once, here.
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial.clear()
            self._partial_length = 0
        if last:
            self._partial_length += len(last)
            if self._partial_length > self._max:
                raise self._too_long("line")
            self._partial.append(last)
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = ""
                    self._retry = None
                continue
            if len(line) > self._max:
                raise self._too_long("line")
            self._field(line)
        return events

    def end(self) -> list[ServerSentEvent]:
        """The event the input ended on, when all its lines are complete but the final blank line
        is missing (or its last line is a `data:` line whose value is whole, see the module).

        Raises:
            ModelError: the input stopped inside a line (it was cut off).
        """
        if self._utf8.decode(b"", final=True):  # a character cut in two
            raise self._cut_off()
        if self._partial:
            line = "".join(self._partial)
            self._partial.clear()
            if not _whole_data_line(line):
                raise self._cut_off()
            self._field(line)
        return [self._dispatch()] if self._data else []

    def _cut_off(self) -> ModelError:
        return ModelError(f"{self._source} stream ended inside a line: it was cut off")

    def _too_long(self, what: str) -> ModelError:
        return ModelError(
            f"{self._source} sent a server-sent event {what} longer than the limit of "
            f"{self._max} characters"
        )

    def _field(self, line: str) -> None:
        name, _, value = line.partition(":")
        if not name:
            return  # a comment, e.g. a keep-alive ": ping"
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data_length += len(value)
            if self._data_length > self._max:
                raise self._too_long("data")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)

    def _dispatch(self) -> ServerSentEvent:
        event = ServerSentEvent(
            self._event or "message", "\n".join(self._data), self.last_event_id, self._retry
        )
        self._data = []
        self._data_length = 0
        self._event = ""
        self._retry = None
        return event


def _whole_data_line(line: str) -> bool:
    """Whether an unterminated last line is a `data:` line that cannot have been cut: its value is
    `[DONE]` or a whole JSON object (a cut one does not parse; every payload here is one)."""
    name, _, value = line.partition(":")
    if name != "data":
        return False
    value = value.removeprefix(" ")
    if value == "[DONE]":
        return True
    if not value.startswith("{"):
        return False
    try:
        pydantic_core.from_json(value)
    except ValueError:
        return False
    return True


def iter_sse(
    response: httpx.Response,
    *,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    max_bytes: int = DEFAULT_MAX_STREAM_BYTES,
    source: str = "server",
) -> Iterator[ServerSentEvent]:
    """Yield the events of a streamed `httpx.Response` as its bytes arrive.

    Raises:
        ModelError: a line too long, the stream longer than `max_bytes` (after content
            decoding), or cut off inside a line.
    """
    decoder = SSEDecoder(max_line_length=max_line_length, source=source)
    read = 0
    for chunk in iter_bounded(response, max_bytes):
        read += len(chunk)
        if read > max_bytes:
            raise _too_large(source, max_bytes)
        yield from decoder.feed(chunk)
    yield from decoder.end()


async def aiter_sse(
    response: httpx.Response,
    *,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    max_bytes: int = DEFAULT_MAX_STREAM_BYTES,
    source: str = "server",
) -> AsyncIterator[ServerSentEvent]:
    """Async `iter_sse`."""
    decoder = SSEDecoder(max_line_length=max_line_length, source=source)
    read = 0
    async for chunk in aiter_bounded(response, max_bytes):
        read += len(chunk)
        if read > max_bytes:
            raise _too_large(source, max_bytes)
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.end():
        yield event


def _too_large(source: str, max_bytes: int) -> ModelError:
    return ModelError(
        f"{source} sent a stream of more than {max_bytes} bytes, over the limit of "
        f"max_stream_bytes={max_bytes}; pass a larger max_stream_bytes= to the model to accept it"
    )
