"""An entered server's session, held by a task of its own (`_hold`) in a task group that lives as
long as the entered server (`_run`), so that a lost session can be replaced from whichever call
finds it gone: the next call reconnects (`_usable_session`), with a backoff after failed attempts.
The holder also holds the session's `subscriptions/listen` stream (`_listen`), which at the
stateless revision carries the server's tool list changes and, over HTTP, is the one lasting
connection; a change sets off a new listing (`_relist`).

`SessionHolder` is the base of `MCPServer` that does this, generic in the kind of tool a listing
makes (`MCPTool`), which `MCPServer._usable_tools` builds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from ..._request import ToolSpecification
from ._questions import Desk, Flight
from ._session import (
    Refusal,
    Revision,
    announces_listen,
    describe,
    is_connection_lost,
    list_tools,
    negotiate,
    open_session,
    single,
)
from ._tasks import offers_tasks

if TYPE_CHECKING:
    import anyio
    import anyio.abc
    import anyio.from_thread
    from mcp import ClientSession


__all__ = [
    "RECONNECT_FIRST_DELAY",
    "RECONNECT_MAX_DELAY",
    "RELIST_INTERVAL",
    "Connection",
    "Connector",
    "Held",
    "ListedTool",
    "Live",
    "SessionHolder",
    "Streams",
]

logger = logging.getLogger("agentforge_typed.mcp")

_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""The `_meta` key that ties a notification to its `subscriptions/listen` stream."""
RECONNECT_FIRST_DELAY = 1.0
"""Seconds between the first failed reconnection attempt and the next one; each further failure
doubles the wait, up to `RECONNECT_MAX_DELAY`. The first attempt is made at once."""
RECONNECT_MAX_DELAY = 30.0
"""The longest wait between two reconnection attempts."""
RELIST_INTERVAL = 1.0
"""The least seconds between the starts of two listings after `notifications/tools/list_changed`,
however the notifications are spaced: a server flooding them gets one listing a second at most."""

Streams = tuple[Any, Any]
"""A transport's (read, write) message streams, as the SDK's clients yield them."""
Connector = Callable[[contextlib.AsyncExitStack[Any]], Awaitable[Streams]]


class ListedTool(Protocol):
    """What the session code reads of a listed tool."""

    @property
    def specification(self) -> ToolSpecification: ...


ToolT = TypeVar("ToolT", bound=ListedTool)


@dataclass
class Held(Generic[ToolT]):
    """One live session, held open by its own task until `done` is set."""

    session: ClientSession
    tools: list[ToolT]
    """The tools it listed when it connected."""
    done: anyio.Event
    flights: set[Flight] = field(default_factory=set)
    """The `tools/call` requests in flight on it (a question asked mid-call is one's)."""
    lost: str | None = None
    """Why the session is known to be gone, once it is."""

    def usable(self) -> bool:
        """Whether calls may go to this session (not known to be gone)."""
        # The SDK's dispatcher notices the end of the stream (a server that exited between two
        # calls) before any call does: then nothing was sent, so reconnecting first is safe.
        dispatcher = getattr(self.session, "_dispatcher", None)
        if self.lost is None and getattr(dispatcher, "_closed", False):
            self.lost = "the connection is closed"
        return self.lost is None


@dataclass
class Live(Generic[ToolT]):
    """The task group that holds the sessions of one entered server, its reconnections and its
    tool list."""

    owner: anyio.abc.TaskGroup
    lock: anyio.Lock
    """Held while reconnecting: one attempt at a time."""
    held: Held[ToolT] = field(init=False)
    tools: list[ToolT] = field(default_factory=list)
    """The tools as last listed; replaced whole, never changed in place."""
    version: int = 0
    """+1 each time `tools` is replaced by a different list."""
    failures: int = 0
    """Reconnection attempts that failed in a row."""
    retry_at: float = 0.0
    """`time.monotonic()` before which no new attempt is made."""
    relisting: anyio.Event | None = None
    """Set when the listing under way after `notifications/tools/list_changed` ends."""
    relist_again: bool = False
    """Another notification came during it: list once more when it ends (however many came)."""
    relisted_at: float = -RELIST_INTERVAL
    """`time.monotonic()` when the last listing after a notification started."""

    def adopt(self, tools: list[ToolT]) -> None:
        """Make `tools` the current list, counting a new version when it differs."""
        if [t.specification for t in tools] != [t.specification for t in self.tools]:
            self.version += 1
        self.tools = tools


@dataclass
class Connection(Generic[ToolT]):
    """One entered server and how to reach its session's loop."""

    live: Live[ToolT] | None
    """`None` for an optional server that did not connect."""
    mode: Literal["sync", "async"]
    loop: asyncio.AbstractEventLoop | None = None
    """The caller's loop (`async with`)."""
    portal: anyio.from_thread.BlockingPortal | None = None
    """The background loop's portal (`with`)."""
    closed_reason: str | None = None
    """Set once the server is closed (or never connected): later calls fail fast."""


class SessionHolder(Generic[ToolT]):
    """Holds an entered server's sessions, reconnects them and keeps its tool list current."""

    label: str
    connect_timeout: float
    revision: Revision
    max_tools: int
    reconnect: bool
    _connect: Connector
    _desk: Desk
    _refusal: Refusal | None = None
    """Over HTTP: the server's last refusal (401, 403)."""
    _authorizing: bool = False
    """Over HTTP: whether an `auth=` flow answers the server's challenges."""

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[Live[ToolT]]:
        """The task group holding this server's sessions, with the first one connected."""
        import anyio

        async with anyio.create_task_group() as owner:
            live = Live[ToolT](owner, anyio.Lock())
            live.held = await owner.start(self._hold, live)
            live.adopt(live.held.tools)
            try:
                yield live
            finally:
                live.held.done.set()

    async def _hold(
        self, live: Live[ToolT], *, task_status: anyio.abc.TaskStatus[Held[ToolT]]
    ) -> None:
        """Connect, hand the session over, and keep it open until told to close it.

        Failing to connect raises to whoever started this task; once the session is handed over,
        nothing escapes: a session that ends by itself is marked lost for the next call to see.
        """
        held: Held[ToolT] | None = None
        try:
            async with self._session(live) as held:
                task_status.started(held)
                await held.done.wait()
        except Exception as exc:
            if held is None:
                raise
            held.lost = held.lost or f"the session ended ({describe(single(exc))})"
            logger.debug("MCP server %s: session ended: %r", self.label, exc)

    @contextlib.asynccontextmanager
    async def _session(self, live: Live[ToolT]) -> AsyncIterator[Held[ToolT]]:
        import anyio

        async def on_message(message: Any) -> None:
            self._on_message(live, message)

        flights: set[Flight] = set()
        async with contextlib.AsyncExitStack() as stack:
            read, write = await self._connect(stack)
            elicit = self._desk.callback(flights)
            session = await stack.enter_async_context(
                open_session(read, write, message_handler=on_message, elicitation_callback=elicit)
            )
            held = Held[ToolT](session, [], anyio.Event(), flights)
            # Tasks of this session (its `subscriptions/listen` stream), ended before it is.
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)
            try:
                with anyio.fail_after(self.connect_timeout):
                    await negotiate(session, self.revision)
                    if announces_listen(session):
                        # Acknowledged before the listing, so that no change falls between.
                        await tasks.start(self._listen, live, held)
                    held.tools = await self._list(session)
            except TimeoutError:
                raise TimeoutError(
                    f"MCP server {self.label!r} did not initialize and list its tools within "
                    f"{self.connect_timeout:g} seconds (connect_timeout)"
                ) from None
            yield held

    def _explain(self, exc: BaseException) -> BaseException:
        """`exc`, or the `MCPAuthorizationError` it stands for over HTTP: a refusal, or an
        authorization flow that failed."""
        if self._refusal is None:
            return exc
        return self._refusal.explain(exc, self.label, authorizing=self._authorizing)

    async def _list(self, session: ClientSession) -> list[ToolT]:
        listed = await list_tools(session, self.max_tools, self.label)
        return await self._usable_tools(listed, tasks=offers_tasks(session))

    def _on_message(self, live: Live[ToolT], message: Any) -> None:
        """Runs in the session's receive loop: `notifications/tools/list_changed` sent on the
        session (the handshake revisions' way) sets off a listing. One stamped with a
        subscription id came on a `subscriptions/listen` stream, whose events `_listen` feeds."""
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            meta = message.params.meta if message.params is not None else None
            if not meta or _SUBSCRIPTION_ID not in meta:
                self._changed(live)

    def _changed(self, live: Live[ToolT]) -> None:
        """The server says its tools changed: list them again, soon. Only takes note and starts
        a task, so that a server flooding notifications costs a flag each."""
        if live.relisting is not None:
            live.relist_again = True
        else:
            import anyio

            live.relisting = anyio.Event()
            live.owner.start_soon(self._relist, live, live.relisting)

    async def _listen(
        self, live: Live[ToolT], held: Held[ToolT], *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """Hold a `subscriptions/listen` stream of the server's `tools/list_changed` events for
        the session's life, feeding them to `_changed`: the stateless revision (2026-07-28)
        sends change notifications only on such a stream.

        Started once the server acknowledges the stream, or refuses it (a warning: the tools
        stay as listed). A stream that ends while the connection lasts (the server closed it,
        or it was lost) is opened again after `RECONNECT_FIRST_DELAY` seconds, doubling up to
        `RECONNECT_MAX_DELAY` while each new one ends without an event, and the tools are listed
        again, as changes may have been missed. Each acknowledgement is awaited for
        `connect_timeout` at most. A stream lost with its connection marks the session lost:
        over the stateless HTTP transport, that is how a server that went away between two
        calls is noticed before the next call is sent. Nothing else escapes.
        """
        import anyio
        from mcp.client.subscriptions import listen

        opened = False
        ended = 0  # streams that ended in a row without an event
        while True:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    with anyio.fail_after(self.connect_timeout):
                        subscription = await stack.enter_async_context(
                            listen(held.session, tools_list_changed=True)
                        )
                    if opened:
                        self._changed(live)
                    else:
                        opened = True
                        task_status.started()
                    async for _ in subscription:
                        ended = 0
                        self._changed(live)
                why = "the server closed it"
            except Exception as exc:
                # `SubscriptionLost` comes from the SDK's `MCPError`, which says why.
                cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
                if is_connection_lost(cause):
                    if held.lost is None:
                        held.lost = describe(cause)
                        logger.warning("MCP server %s: connection lost: %r", self.label, cause)
                    return  # the next call reconnects, and its session listens anew
                if not opened:
                    logger.warning(
                        "MCP server %s: subscriptions/listen refused; changes to its tools "
                        "will not be seen: %s",
                        self.label,
                        describe(exc),
                    )
                    task_status.started()
                    return
                why = describe(exc)
            ended += 1
            delay = min(RECONNECT_FIRST_DELAY * 2 ** (ended - 1), RECONNECT_MAX_DELAY)
            logger.warning(
                "MCP server %s: the subscription to its tool changes ended (%s); "
                "listening again in %g s",
                self.label,
                why,
                delay,
            )
            await anyio.sleep(delay)

    async def _relist(self, live: Live[ToolT], done: anyio.Event) -> None:
        """List the tools again (under `connect_timeout` and `max_tools`), and again after each
        listing during which more notifications came, each at least `RELIST_INTERVAL` seconds
        after the one before; a listing that fails leaves the list as it was, with a warning."""
        import anyio

        try:
            while True:
                await anyio.sleep(max(0.0, live.relisted_at + RELIST_INTERVAL - time.monotonic()))
                live.relist_again = False
                live.relisted_at = time.monotonic()
                held: Held[ToolT] | None = getattr(live, "held", None)
                if held is None:
                    # The first session is still being handed over: its listing may have been
                    # answered before the change, so list again once it is.
                    live.relist_again = True
                elif held.usable():
                    try:
                        with anyio.fail_after(self.connect_timeout):
                            live.adopt(await self._list(held.session))
                    except Exception as exc:
                        logger.warning(
                            "MCP server %s: listing its changed tools failed; keeping the old "
                            "list: %s",
                            self.label,
                            describe(single(exc)),
                        )
                if not live.relist_again:
                    return
        finally:
            live.relisting = None
            done.set()

    async def _settle_listing(self, live: Live[ToolT]) -> None:
        """Let a listing the call set off (its server sent `tools/list_changed` before the
        result) end before the result is returned, so that the next round offers the new list;
        within `connect_timeout`."""
        if live.relisting is not None:
            import anyio

            with anyio.move_on_after(self.connect_timeout):
                await live.relisting.wait()

    async def _usable_session(self, live: Live[ToolT]) -> Held[ToolT] | str:
        """`live`'s session, reconnected first when it is known to be gone; or why there is
        none (reconnection off, waiting out the backoff, or the attempt failed)."""
        if live.held.usable():
            return live.held
        if not self.reconnect:
            return f"the MCP server is gone ({live.held.lost})"
        async with live.lock:
            if live.held.usable():  # another call reconnected meanwhile
                return live.held
            wait = live.retry_at - time.monotonic()
            if wait > 0:
                return (
                    f"the MCP server is gone ({live.held.lost}); "
                    f"the next reconnection attempt is in {wait:.1f} s"
                )
            live.held.done.set()
            try:
                held: Held[ToolT] = await live.owner.start(self._hold, live)
            except Exception as exc:
                live.failures += 1
                delay = min(RECONNECT_FIRST_DELAY * 2 ** (live.failures - 1), RECONNECT_MAX_DELAY)
                live.retry_at = time.monotonic() + delay
                reason = describe(self._explain(single(exc)))
                live.held.lost = f"reconnecting failed: {reason}"
                logger.warning("MCP server %s: reconnecting failed: %s", self.label, reason)
                return (
                    f"the MCP server is gone and reconnecting failed ({reason}); "
                    f"the next attempt is in {delay:g} s"
                )
            live.failures, live.held = 0, held
            live.adopt(held.tools)
            logger.warning("MCP server %s: reconnected", self.label)
            return held

    async def _usable_tools(self, listing: list[dict[str, Any]], *, tasks: bool) -> list[ToolT]:
        """The tools of a listing, built by the server's own kind (`MCPServer`); `tasks`: whether
        task-only tools can be called."""
        raise NotImplementedError
