"""A sans-IO Server-Sent Events decoder (the WHATWG `text/event-stream` format).

`SSEDecoder.feed()` takes bytes or text in chunks of any size — a line, an event, or a
multi-byte UTF-8 character may be split anywhere — and returns the events each chunk completes.
`iter_sse` / `aiter_sse` drive it over an `httpx.Response`. Decoding follows the spec: `LF`,
`CRLF` and lone `CR` end lines; `:` lines are comments (keep-alives); `data:` lines of one event
join with `\\n`; `id` persists across events; a block without `data` dispatches nothing; and an
event left unfinished when the stream ends is discarded (see `SSEDecoder.pending`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pydantic_core

__all__ = ["SSEDecoder", "ServerSentEvent", "aiter_sse", "iter_sse"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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
    """Incremental decoder: feed chunks, get back the events they complete."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self.last_event_id: str | None = None
        """The id that the next dispatched event will carry."""

    @property
    def pending(self) -> bool:
        """Whether an unfinished line or event is buffered (at end of stream: it was cut off)."""
        return bool(self._buffer or self._data or self._event or self._utf8.getstate()[0])

    def feed(self, chunk: bytes | str) -> list[ServerSentEvent]:
        """Decode one chunk and return the events it completes, in order."""
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
        buffer = self._buffer + text
        if "\r" in buffer:
            lines = _LINE_BREAK.split(buffer)
            if buffer[-1] == "\r":
                self._skip_lf = True
        else:
            lines = buffer.split("\n")
        self._buffer = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = ""
                    self._retry = None
                continue
            self._field(line)
        return events

    def _field(self, line: str) -> None:
        name, _, value = line.partition(":")
        if not name:
            return  # a comment, e.g. a keep-alive ": ping"
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
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
        self._event = ""
        self._retry = None
        return event


def iter_sse(response: httpx.Response) -> Iterator[ServerSentEvent]:
    """Yield the events of a streamed `httpx.Response` as its bytes arrive."""
    decoder = SSEDecoder()
    for chunk in response.iter_bytes():
        yield from decoder.feed(chunk)


async def aiter_sse(response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """Async `iter_sse`."""
    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        for event in decoder.feed(chunk):
            yield event
