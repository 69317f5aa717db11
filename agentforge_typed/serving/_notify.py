"""What a served call tells its client while it runs: progress, and the records it logs.

A tool reports progress with `ToolContext.report_progress` and logs with Python's `logging` on
`TOOL_LOGGER` (`"agentforge_typed.tool"`) or a logger below it; a sync tool does so from its worker
thread. Both land in the call's `Outbox`, which sends them, in order, on the call's own stream
(`notifications/progress` when the request carried a progress token, `notifications/message`
when the client asked for log messages at that level) before the result goes out.

Bounded: an outbox keeps the latest `MAX_QUEUED` notifications its client has not taken yet
(a tool reporting without end, a client reading slowly) and cuts each log message to
`MAX_LOG_CHARS`. Only `TOOL_LOGGER`'s records are forwarded, never those of the libraries a
tool uses (an HTTP client's debug log may show a URL's key).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import deque
from typing import Any

import mcp_types
from mcp.server.context import ServerRequestContext

__all__ = [
    "LOG_LEVELS",
    "MAX_LOG_CHARS",
    "MAX_QUEUED",
    "TOOL_LOGGER",
    "Outbox",
    "current_outbox",
    "forward_tool_logs",
]

logger = logging.getLogger("agentforge_typed.serving")

TOOL_LOGGER = "agentforge_typed.tool"
"""The logger whose records (its own and its children's) a served call sends to its client."""
MAX_QUEUED = 100
"""The most notifications one call keeps for its client; past it, the oldest go."""
MAX_LOG_CHARS = 2000
"""The longest log message sent; a longer one is cut, ending with `…`."""
LOG_LEVELS: tuple[mcp_types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""MCP's levels (RFC 5424), least severe first."""
_FLUSH_SECONDS = 5.0
"""How long the last notifications of a call may take to go out before its result."""

_current: contextvars.ContextVar[Outbox | None] = contextvars.ContextVar(
    "agentforge_typed.serving.outbox", default=None
)


def current_outbox() -> contextvars.ContextVar[Outbox | None]:
    """The context variable holding the outbox of the call running in this context."""
    return _current


def _level(levelno: int) -> mcp_types.LoggingLevel:
    if levelno <= logging.DEBUG:
        return "debug"
    if levelno <= logging.INFO:
        return "info"
    if levelno <= logging.WARNING:
        return "warning"
    if levelno <= logging.ERROR:
        return "error"
    return "critical"


class Outbox:
    """The notifications of one call, sent in order by a task of their own; any thread may add.

    Args:
        ctx: The call's request context (its stream).
        progress: Whether the request carried a progress token.
        log_levels: The levels the client takes log messages at (empty: none).
    """

    __slots__ = ("_ctx", "_items", "_loop", "_sender", "_thread", "log_levels", "progress")

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        progress: bool,
        log_levels: frozenset[str],
    ) -> None:
        self._ctx = ctx
        self.progress = progress
        self.log_levels = log_levels
        self._items: deque[tuple[Any, ...]] = deque(maxlen=MAX_QUEUED)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._sender: asyncio.Task[None] | None = None

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """`ToolContext.on_progress`: queue a progress notification (from any thread)."""
        if message is not None and len(message) > MAX_LOG_CHARS:
            message = message[: MAX_LOG_CHARS - 1] + "…"
        self._put(("progress", progress, total, message))

    def log(self, record: logging.LogRecord) -> None:
        """Queue a log record as a `notifications/message`, when the client takes its level."""
        level = _level(record.levelno)
        if level not in self.log_levels:
            return
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not format
            text = str(record.msg)
        if len(text) > MAX_LOG_CHARS:
            text = text[: MAX_LOG_CHARS - 1] + "…"
        self._put(("log", level, record.name, text))

    def _put(self, item: tuple[Any, ...]) -> None:
        self._items.append(item)
        if threading.get_ident() == self._thread:
            self._start()
        else:
            try:
                self._loop.call_soon_threadsafe(self._start)
            except RuntimeError:  # the loop is closed: the call is over
                pass

    def _start(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = self._loop.create_task(self._send())

    async def _send(self) -> None:
        session, request_id = self._ctx.session, self._ctx.request_id
        while self._items:
            item = self._items.popleft()
            try:
                if item[0] == "progress":
                    await session.report_progress(item[1], item[2], item[3])
                else:
                    notification = mcp_types.LoggingMessageNotification(
                        params=mcp_types.LoggingMessageNotificationParams(
                            level=item[1], logger=item[2], data=item[3]
                        )
                    )
                    await session.send_notification(notification, related_request_id=request_id)
            except Exception as exc:  # notifications are advisory: a lost one ends nothing
                logger.debug("a notification to the client was lost: %r", exc)

    async def close(self) -> None:
        """Send what is queued (for at most a few seconds), then stop."""
        try:
            await asyncio.wait_for(self._drain(), _FLUSH_SECONDS)
        except (asyncio.TimeoutError, Exception):
            pass
        finally:
            if self._sender is not None:
                self._sender.cancel()
            self._items.clear()

    async def _drain(self) -> None:
        while True:
            sender = self._sender
            if sender is not None and not sender.done():
                await asyncio.shield(sender)
            if not self._items:
                return
            # Queued as the sender finished its last round: a round of its own.
            self._start()


class _Forwarder(logging.Handler):
    """Hands each record of `TOOL_LOGGER` to the outbox of the call that logged it, if any."""

    def emit(self, record: logging.LogRecord) -> None:
        outbox = _current.get()
        if outbox is not None:
            outbox.log(record)


_installed = threading.Lock()
_FORWARDER = _Forwarder()


def forward_tool_logs() -> None:
    """Attach the forwarding handler to `TOOL_LOGGER` (once), and let its records through at every
    level unless the program set the logger's level itself."""
    with _installed:
        tool_logger = logging.getLogger(TOOL_LOGGER)
        if _FORWARDER not in tool_logger.handlers:
            tool_logger.addHandler(_FORWARDER)
            if tool_logger.level == logging.NOTSET:
                tool_logger.setLevel(logging.DEBUG)
