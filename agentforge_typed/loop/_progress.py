"""Progress that calls in flight report (`ToolContext.report_progress`), kept for whoever watches
the run: the streaming drivers yield it, instrumentation records it on the tool's span.

Tools may report from any thread (an MCP server's notifications arrive on the session's loop), so
the sink only appends to bounded deques and wakes the driver; a tool or server reporting without
end keeps the latest `MAX_WAITING` events for the stream and `MAX_PER_CALL` for each call's span.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from .._messages import ToolCall
from ._events import SubRunEvent, ToolProgressEvent

__all__ = ["MAX_MESSAGE_CHARS", "MAX_PER_CALL", "MAX_WAITING", "ProgressSink"]

MAX_WAITING = 1000
"""The most progress events waiting for the stream to yield them; past it, the oldest go."""
MAX_PER_CALL = 100
"""The most progress events kept for one call's span; past it, the oldest go."""
MAX_MESSAGE_CHARS = 1000
"""The longest progress message kept; a longer one is cut, ending with `…`."""

Reporter = Callable[[float, float | None, str | None], None]


class ProgressSink:
    """The progress reported during one run.

    Args:
        stream: Keep events for the stream to yield (`take`).
        record: Keep events per call, with their times, for the spans (`recorded`).
        wake: Called (from the reporting thread) after each event the stream keeps.
    """

    def __init__(
        self, *, stream: bool, record: bool, wake: Callable[[], None] | None = None
    ) -> None:
        self.waiting: deque[ToolProgressEvent | SubRunEvent] | None = (
            deque(maxlen=MAX_WAITING) if stream else None
        )
        self.per_call: dict[str, deque[tuple[float, ToolProgressEvent]]] | None = (
            {} if record else None
        )
        self.wake = wake

    def reporter(self, call: ToolCall) -> Reporter:
        """What a call's `ToolContext.on_progress` is set to."""

        def report(progress: float, total: float | None = None, message: str | None = None) -> None:
            if message is not None and len(message) > MAX_MESSAGE_CHARS:
                message = message[: MAX_MESSAGE_CHARS - 1] + "…"
            event = ToolProgressEvent(call, progress, total, message)
            if self.per_call is not None:
                kept = self.per_call.setdefault(call.id, deque(maxlen=MAX_PER_CALL))
                kept.append((time.time(), event))
            if self.waiting is not None:
                self.waiting.append(event)
                if self.wake is not None:
                    self.wake()

        return report

    def forward(self, event: SubRunEvent) -> None:
        """Keep a sub-run's event for the stream (bounded as progress is), when it streams."""
        if self.waiting is not None:
            self.waiting.append(event)
            if self.wake is not None:
                self.wake()

    def take(self) -> list[ToolProgressEvent | SubRunEvent]:
        """The events waiting for the stream, oldest first; none wait after."""
        events: list[ToolProgressEvent | SubRunEvent] = []
        while self.waiting:
            events.append(self.waiting.popleft())
        return events

    def recorded(self, call_id: str) -> list[tuple[float, ToolProgressEvent]]:
        """The events kept for a call's span (`time.time()`, event), once."""
        if self.per_call is None:
            return []
        return list(self.per_call.pop(call_id, ()))
