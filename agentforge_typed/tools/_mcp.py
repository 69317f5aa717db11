"""`MCPServer`: the tools of a Model Context Protocol server, as tools of this package.

Requires the `mcp` extra (`pip install "agentforge-typed[mcp]"`); the SDK is imported only when a
server is entered, so `import agentforge_typed` works without it.

The MCP SDK is async-only. Entered with `async with`, the session lives on the caller's event loop
and `aexecute` talks to it directly. Entered with `with`, the session runs on a background thread
with its own event loop (an anyio blocking portal), and both `execute` and `aexecute` reach it
through that portal. Every call is bounded by `timeout`, so a server that stops answering gives
error results instead of a hung conversation.

A session is held by a task of its own (`_hold`) in a task group that lives as long as the entered
server (`_run`), so that a lost session can be replaced from whichever call finds it gone: the
next call reconnects, with a backoff after failed attempts, and a call that was in flight when
the connection went is retried only when that is safe (see `MCPTool.retry_safe`). The holder
also holds the session's `subscriptions/listen` stream (`_listen`), which at the stateless
revision carries the server's tool list changes and, over HTTP, is the one lasting connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sys
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from typing_extensions import TypedDict, Unpack

from .._messages import ToolCall, shown_name
from .._records import ElicitationAnswer, ToolExecutionResult
from .._request import ToolAnnotations, ToolSpecification
from .._sync import running_loop
from .._transport._redaction import NO_SECRETS, Redactor, given_secrets, header_secrets, url_secrets
from ._base import (
    ApprovalPolicy,
    DeclaredTool,
    ExtraArguments,
    ReturnBehavior,
    ToolContext,
    check_extra_arguments,
    check_options,
)
from ._budget import DEFAULT_MAX_RESULT_CHARS, check_max_result_chars
from ._content_urls import ContentURLs, check_content_urls
from ._mcp_questions import MAX_INPUT_ROUNDS, Desk, Flight, OpenCall, Resend, scope_of
from ._mcp_results import OutputSchema, OutputType, amap_call_result
from ._mcp_session import (
    Revision,
    announces_listen,
    call_tool,
    describe,
    is_connection_lost,
    list_tools,
    negotiate,
    single,
)
from ._outcomes import (
    execution_error_result,
    failure_result,
    redacted_result,
    timeout_result,
    with_repairs,
)
from ._schema_arguments import SchemaArguments
from ._schema_tool import valid_arguments
from ._signature import check_tool_name

if TYPE_CHECKING:
    import anyio
    import anyio.abc
    import anyio.from_thread
    from mcp import ClientSession

    from ._scope import Scope

__all__ = ["MCPServer", "MCPServerOptions", "MCPTool", "MCPToolFilter"]

logger = logging.getLogger("agentforge_typed.mcp")

_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""The `_meta` key that ties a notification to its `subscriptions/listen` stream."""
_PORTAL_GRACE = 5.0
"""Extra seconds a blocking caller waits for the portal beyond the call's own timeout."""
DEFAULT_MAX_TOOLS = 1000
"""The most tools a server may list by default (`MCPServerOptions.max_tools`)."""
_STREAM_READ_TIMEOUT = 300.0
"""Seconds an HTTP read may wait (the SDK's default); each tool call has its own `timeout`."""
RECONNECT_FIRST_DELAY = 1.0
"""Seconds between the first failed reconnection attempt and the next one; each further failure
doubles the wait, up to `RECONNECT_MAX_DELAY`. The first attempt is made at once."""
RECONNECT_MAX_DELAY = 30.0
"""The longest wait between two reconnection attempts."""
_STATE_ONLY_FIRST_DELAY = 0.05
"""Seconds before sending a call again when its server only asked for its state back; doubled
each time, up to `_STATE_ONLY_MAX_DELAY`."""
_STATE_ONLY_MAX_DELAY = 0.25
RELIST_INTERVAL = 1.0
"""The least seconds between the starts of two listings after `notifications/tools/list_changed`,
however the notifications are spaced: a server flooding them gets one listing a second at most."""

_Streams = tuple[Any, Any]
"""A transport's (read, write) message streams, as the SDK's clients yield them."""
_Connector = Callable[[contextlib.AsyncExitStack[Any]], Awaitable[_Streams]]


@dataclass
class _Held:
    """One live session, held open by its own task until `done` is set."""

    session: ClientSession
    tools: list[MCPTool]
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
class _Live:
    """The task group that holds the sessions of one entered server, its reconnections and its
    tool list."""

    owner: anyio.abc.TaskGroup
    lock: anyio.Lock
    """Held while reconnecting: one attempt at a time."""
    held: _Held = field(init=False)
    tools: list[MCPTool] = field(default_factory=list)
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

    def adopt(self, tools: list[MCPTool]) -> None:
        """Make `tools` the current list, counting a new version when it differs."""
        if [t.specification for t in tools] != [t.specification for t in self.tools]:
            self.version += 1
        self.tools = tools


@dataclass
class _Connection:
    """One entered server and how to reach its session's loop."""

    live: _Live | None
    """`None` for an optional server that did not connect."""
    mode: Literal["sync", "async"]
    loop: asyncio.AbstractEventLoop | None = None
    """The caller's loop (`async with`)."""
    portal: anyio.from_thread.BlockingPortal | None = None
    """The background loop's portal (`with`)."""
    closed_reason: str | None = None
    """Set once the server is closed (or never connected): later calls fail fast."""


class MCPServerOptions(TypedDict, total=False):
    """The keyword options of `MCPServer`, `MCPServer.stdio` and `MCPServer.http`."""

    timeout: float
    """Seconds each tool call may take (default 30)."""
    connect_timeout: float
    """Seconds for agreeing on a revision (`server/discover`, the handshake), opening the
    `subscriptions/listen` stream, listing the tools and building them (checking each
    `inputSchema`), together (default 30); over it, entering raises `TimeoutError`."""
    max_tools: int
    """The most tools the server may list (default 1000); one more and entering raises
    `ValueError`, before the rest of the listing is read or any tool is built."""
    max_result_chars: int | None
    """The result budget of every tool of this server: the most characters of a result's text
    the model reads (a longer one keeps its head and tail around a marker). Default `None`: the
    `ToolService`'s, else 100,000."""
    tool_prefix: str
    """Prepended to every tool name offered to the model (to keep two servers' tools apart); the
    server still receives its own names."""
    tool_filter: Callable[[MCPTool], bool] | None
    """Which listed tools to use (`MCPToolFilter(allow=..., deny=...)` or any callable taking an
    `MCPTool`); the others are never offered nor callable."""
    return_behavior: ReturnBehavior
    """Given to every tool of this server (default `TO_LLM`)."""
    max_retries: int
    """Given to every tool of this server (default 2)."""
    sequential: bool
    """Given to every tool of this server (default `False`)."""
    extra_arguments: ExtraArguments
    """What happens to arguments a tool's `inputSchema` does not declare (many servers omit
    `additionalProperties: false`, and the server's SDK would drop them silently): `"forbid"`
    (the default) makes them an arguments error the model can correct, `"ignore"` drops them
    before the call, each drop recorded in the result's `repairs`. A schema that explicitly allows
    additional properties keeps them either way."""
    requires_approval: ApprovalPolicy | Mapping[str, ApprovalPolicy]
    """Pause a `ToolService` run on the calls of this server's tools until a person decides: one
    policy for every tool (`True`, or a sync or async `(call, context) -> bool`), or a mapping
    from the server's tool names (without `tool_prefix`) to policies. A tool it does not decide
    needs no approval, unless the server is `trusted` and the tool may be destructive."""
    trusted: bool
    """Let the tools' annotations set policy (default `False`: they are hints from a server that
    may lie, and change nothing). Trusted, a read-only tool needs no approval and runs in parallel;
    a tool that may be destructive (the specification's default for one that is not read-only)
    needs approval and runs alone, in the model's order; an idempotent or read-only one is retried
    after a reconnection. What `requires_approval` and `sequential` say wins."""
    output_types: Mapping[str, Any]
    """Types for the program, by the server's tool names: a pydantic model, a dataclass, a
    `TypedDict` or any type form. A named tool's `structuredContent`, once checked against its
    `outputSchema`, is validated into that type (lax, as JSON has no dates), so `result.value` is
    a typed value; one that does not fit is an execution error the model reads, one line per
    problem. A name the server does not list types nothing."""
    idempotent: bool | Collection[str]
    """The tools (by the server's names, or `True` for all) that may be sent again when the
    connection was lost during a call: the user's word, trusted or not (default `False`)."""
    idempotency_key_meta: str | None
    """Send each call's `ToolContext.idempotency_key` in the request's `_meta` under this key
    (e.g. `"example.com/idempotency-key"`), for a server that performs a key's effect once; such
    calls are retried after a reconnection (default `None`: not sent)."""
    reconnect: bool
    """Reconnect on the next call once the connection is lost (default `True`), waiting
    `RECONNECT_FIRST_DELAY` seconds after a failed attempt, doubling up to
    `RECONNECT_MAX_DELAY`; `False`: every later call fails at once."""
    elicitation_timeout: float
    """Seconds a question the server asks during a call (elicitation) waits for the user's
    answer while the run is paused on it (default 600); then the server is answered `cancel`."""
    revision: Revision
    """Which protocol revisions to offer: `"newest"` (the default) probes `server/discover` and
    speaks the stateless revision (2026-07-28) with a server that knows it, else falls back to
    the `initialize` handshake (2025-11-25 and older); `"handshake"` offers only the handshake,
    for a server that needs it (one whose tools ask questions mid-call, or one that leaves
    `server/discover` unanswered, which costs the SDK's 10 s probe on every connection)."""
    required: bool
    """Whether failing to connect when entered raises (default `True`); `False` logs a warning
    and enters the server with no tools, so a run proceeds without them."""
    content_urls: ContentURLs
    """Which links (`resource_link` blocks) the server's results may send on to the model's
    provider, which fetches them: `"https"` (the default: `https://` to public hosts only, each
    name resolved to check it), `"http"` (`http://` too), or `"any"` (any link, unchecked: for a
    server you trust whose links point into your own network). A link it does not allow is left
    out, a note in its place (`agentforge_typed.tools.ContentURLs`); `file://` never goes."""


class MCPServer:
    """An MCP server whose tools become tools of this package.

    ```python
    with MCPServer.stdio("uvx", ["mcp-server-time"]) as server:
        service = ToolService([server])  # or service.register(server)
        result = service.chat(model, "What time is it in Tokyo?")
    ```

    Use `MCPServer.stdio(...)` or `MCPServer.http(...)` to build one, then enter it (`with` or
    `async with`): that connects, initializes the session and lists the server's tools, which
    `tools()` then returns. Arguments are validated locally against each tool's `inputSchema`
    before anything is sent. Leaving the block closes the session (and stops a stdio server).

    Args:
        connect: Opens the transport on the given exit stack and returns its (read, write)
            message streams (what `stdio` and `http` build for you).
        label: How errors and `repr` name this server.
        **options: See `MCPServerOptions`.
    """

    _redactor: Redactor = NO_SECRETS
    """What `repr`, the warnings, the errors and the results are kept free of (`http`'s)."""

    def __init__(
        self, connect: _Connector, *, label: str, **options: Unpack[MCPServerOptions]
    ) -> None:
        check_options(options, MCPServerOptions, "MCPServer")
        self._connect = connect
        self.label = label
        self.timeout = options.get("timeout", 30.0)
        self.connect_timeout = options.get("connect_timeout", 30.0)
        self.tool_prefix = options.get("tool_prefix", "")
        self.tool_filter = options.get("tool_filter")
        self.return_behavior = options.get("return_behavior", ReturnBehavior.TO_LLM)
        self.max_retries = options.get("max_retries", 2)
        self.sequential = options.get("sequential", False)
        self.requires_approval = options.get("requires_approval", False)
        self.trusted = options.get("trusted", False)
        self._output_types = {
            name: OutputType(form) for name, form in options.get("output_types", {}).items()
        }
        idempotent = options.get("idempotent", False)
        if isinstance(idempotent, str):
            raise TypeError("idempotent must be a bool or a collection of tool names, not a str")
        self.idempotent = idempotent
        self.idempotency_key_meta = options.get("idempotency_key_meta")
        self.reconnect = options.get("reconnect", True)
        self.required = options.get("required", True)
        self.revision: Revision = options.get("revision", "newest")
        if self.revision not in ("newest", "handshake"):
            raise ValueError(f"revision must be 'newest' or 'handshake', got {self.revision!r}")
        self.elicitation_timeout = options.get("elicitation_timeout", 600.0)
        self.content_urls = check_content_urls(options.get("content_urls", "https"))
        self._desk = Desk(self.label, self.timeout, self.elicitation_timeout, self._deadline)
        # What the user said, which wins over what a trusted server's annotations imply.
        self._given = frozenset(options.keys() & {"requires_approval", "sequential"})
        self.extra_arguments = check_extra_arguments(options.get("extra_arguments", "forbid"))
        self.max_tools = options.get("max_tools", DEFAULT_MAX_TOOLS)
        if self.max_tools < 1:
            raise ValueError(f"max_tools must be at least 1, got {self.max_tools!r}")
        self.max_result_chars = check_max_result_chars(options.get("max_result_chars"))
        self._max_result = (
            DEFAULT_MAX_RESULT_CHARS if self.max_result_chars is None else self.max_result_chars
        )
        self._connection: _Connection | None = None
        self._exit: Callable[[], Any] | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | None = None,
        errlog: TextIO | None = None,
        **options: Unpack[MCPServerOptions],
    ) -> MCPServer:
        """A server started as a subprocess and spoken to over its stdin/stdout.

        Args:
            command: The executable.
            args: Its arguments.
            env: Extra environment variables for the process.
            cwd: Its working directory.
            errlog: Where the server's stderr goes (default: `sys.stderr`).
            **options: See `MCPServerOptions`.
        """

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> _Streams:
            from mcp import StdioServerParameters, stdio_client

            parameters = StdioServerParameters(
                command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
            )
            streams = await stack.enter_async_context(
                stdio_client(parameters, errlog=errlog or sys.stderr)
            )
            return streams[0], streams[1]

        return cls(connect, label=" ".join([command, *args]), **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        **options: Unpack[MCPServerOptions],
    ) -> MCPServer:
        """A server reached over the streamable HTTP transport at `url` (e.g. `.../mcp`).

        What the URL and the headers hold of secrets — credential headers' values, the URL's
        password, its query parameters named so (`api_key`, `token`…) or random-looking, its
        random-looking path segments — and `secrets` are `[redacted]` in the server's `repr`
        and label, its warnings and log records, its errors and its tools' results.

        Args:
            url: The server's MCP endpoint.
            headers: Sent with every request, e.g. `{"Authorization": "Bearer ..."}`.
            secrets: Further values never to show (e.g. a path segment that is a key but does
                not look random).
            **options: See `MCPServerOptions`.
        """
        given = given_secrets(secrets)
        redactor = Redactor([*given, *url_secrets(url), *header_secrets(headers or {})])

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> _Streams:
            from mcp.client import streamable_http

            # SDK 2's `streamable_http_client` takes headers through the HTTP client it is given
            # (an `httpx2` client) and yields (read, write); SDK 1's `streamablehttp_client`
            # takes them itself and also yields a session-id getter.
            transport: Any
            if hasattr(streamable_http, "streamable_http_client"):
                import httpx2

                client = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=headers,
                        # Reads may wait on a response stream the server holds open.
                        timeout=httpx2.Timeout(server.connect_timeout, read=_STREAM_READ_TIMEOUT),
                    )
                )
                transport = streamable_http.streamable_http_client(url, http_client=client)
            else:  # pragma: no cover - SDK 1
                transport = streamable_http.streamablehttp_client(  # type: ignore[attr-defined]
                    url, headers=dict(headers or {})
                )
            streams = await stack.enter_async_context(transport)
            return streams[0], streams[1]

        server = cls(connect, label=redactor.replace(url), **options)
        server._redactor = redactor
        redactor.watch_logs()
        return server

    def __repr__(self) -> str:
        connected = self._connection is not None and self._connection.live is not None
        state = "connected" if connected else "not connected"
        return f"MCPServer({self.label!r}, {state})"

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> MCPServer:
        self._check_not_entered()
        import anyio.from_thread

        portal_cm = anyio.from_thread.start_blocking_portal(name="agentforge-mcp")
        portal = portal_cm.__enter__()
        try:
            run_cm = portal.wrap_async_context_manager(self._run())
            live = run_cm.__enter__()
        except BaseException as exc:
            portal_cm.__exit__(None, None, None)
            self._not_connected(single(exc), "sync")
            return self

        def close() -> None:
            try:
                run_cm.__exit__(None, None, None)
            finally:
                portal_cm.__exit__(None, None, None)

        self._start(_Connection(live, "sync", portal=portal), close)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> MCPServer:
        self._check_not_entered()
        stack = contextlib.AsyncExitStack()
        try:
            live = await stack.enter_async_context(self._run())
        except BaseException as exc:
            self._not_connected(single(exc), "async")
            return self
        self._start(_Connection(live, "async", loop=asyncio.get_running_loop()), stack.aclose)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close a session entered with `with`."""
        connection, close = self._stop()
        if connection is None or close is None or connection.live is None:
            return
        if connection.mode != "sync":
            raise RuntimeError("this MCPServer was entered with `async with`: use `aclose()`")
        close()

    async def aclose(self) -> None:
        """Close a session entered with `async with` (or, without blocking, one entered with
        `with`)."""
        connection, close = self._stop()
        if connection is None or close is None or connection.live is None:
            return
        if connection.mode == "sync":
            await asyncio.to_thread(close)
        else:
            await close()

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[_Live]:
        """The task group holding this server's sessions, with the first one connected."""
        import anyio

        async with anyio.create_task_group() as owner:
            live = _Live(owner, anyio.Lock())
            live.held = await owner.start(self._hold, live)
            live.adopt(live.held.tools)
            try:
                yield live
            finally:
                live.held.done.set()

    async def _hold(self, live: _Live, *, task_status: anyio.abc.TaskStatus[_Held]) -> None:
        """Connect, hand the session over, and keep it open until told to close it.

        Failing to connect raises to whoever started this task; once the session is handed over,
        nothing escapes: a session that ends by itself is marked lost for the next call to see.
        """
        held: _Held | None = None
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
    async def _session(self, live: _Live) -> AsyncIterator[_Held]:
        import anyio
        from mcp import ClientSession

        async def on_message(message: Any) -> None:
            self._on_message(live, message)

        flights: set[Flight] = set()
        async with contextlib.AsyncExitStack() as stack:
            read, write = await self._connect(stack)
            elicit = self._desk.callback(flights)
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=on_message, elicitation_callback=elicit)
            )
            held = _Held(session, [], anyio.Event(), flights)
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

    async def _list(self, session: ClientSession) -> list[MCPTool]:
        listed = await list_tools(session, self.max_tools, self.label)
        return await self._usable_tools(listed)

    def _on_message(self, live: _Live, message: Any) -> None:
        """Runs in the session's receive loop: `notifications/tools/list_changed` sent on the
        session (the handshake revisions' way) sets off a listing. One stamped with a
        subscription id came on a `subscriptions/listen` stream, whose events `_listen` feeds."""
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            meta = message.params.meta if message.params is not None else None
            if not meta or _SUBSCRIPTION_ID not in meta:
                self._changed(live)

    def _changed(self, live: _Live) -> None:
        """The server says its tools changed: list them again, soon. Only takes note and starts
        a task, so that a server flooding notifications costs a flag each."""
        if live.relisting is not None:
            live.relist_again = True
        else:
            import anyio

            live.relisting = anyio.Event()
            live.owner.start_soon(self._relist, live, live.relisting)

    async def _listen(
        self, live: _Live, held: _Held, *, task_status: anyio.abc.TaskStatus[None]
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

    async def _relist(self, live: _Live, done: anyio.Event) -> None:
        """List the tools again (under `connect_timeout` and `max_tools`), and again after each
        listing during which more notifications came, each at least `RELIST_INTERVAL` seconds
        after the one before; a listing that fails leaves the list as it was, with a warning."""
        import anyio

        try:
            while True:
                await anyio.sleep(max(0.0, live.relisted_at + RELIST_INTERVAL - time.monotonic()))
                live.relist_again = False
                live.relisted_at = time.monotonic()
                # None while the first session connects: its own listing comes after this.
                held: _Held | None = getattr(live, "held", None)
                if held is not None and held.usable():
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

    def _start(self, connection: _Connection, close: Callable[[], Any]) -> None:
        self._connection, self._exit = connection, close

    def _not_connected(self, exc: BaseException, mode: Literal["sync", "async"]) -> None:
        """Enter an optional server that failed to connect with no tools; raise for another."""
        if self.required or not isinstance(exc, Exception):
            raise self._redactor.clean(exc)
        logger.warning(
            "MCP server %s did not connect; continuing without its tools: %s",
            self.label,
            describe(exc),
        )
        connection = _Connection(None, mode, closed_reason="the MCP server did not connect")
        self._start(connection, lambda: None)

    async def _usable_tools(self, listing: list[dict[str, Any]]) -> list[MCPTool]:
        """A tool for each one listed, except those whose name a provider would refuse, whose
        `inputSchema` is refused, or whose name the listing repeats: each of those is skipped
        with a warning, so that it does not cost the server's other tools.

        Building a tool checks its schema, which takes time: between tools the connect deadline
        is checked (a cancellation point), so that building counts against `connect_timeout`.
        """
        import anyio.lowlevel

        usable: list[MCPTool] = []
        seen: set[str] = set()
        for listed in listing:
            await anyio.lowlevel.checkpoint()
            try:
                if listed.get("name") in seen:
                    raise ValueError("the server lists a tool of that name already")
                tool = MCPTool(self, listed)
            except ValueError as exc:
                name = shown_name(str(listed.get("name")))
                logger.warning("MCP server %s: tool %r skipped: %s", self.label, name, exc)
                continue
            seen.add(tool.remote_name)
            if self.tool_filter is None or self.tool_filter(tool):
                usable.append(tool)
        allowed = self.tool_filter.allow if isinstance(self.tool_filter, MCPToolFilter) else None
        if allowed is not None:
            # A typo in an allow list would otherwise silently leave a tool out.
            missing = sorted(set(allowed) - {listed.get("name") for listed in listing})
            if missing:
                logger.warning(
                    "MCP server %s: tool_filter allows %s, which the server does not list",
                    self.label,
                    ", ".join(map(repr, missing)),
                )
        return usable

    def _stop(self) -> tuple[_Connection | None, Callable[[], Any] | None]:
        connection, close = self._connection, self._exit
        if connection is not None:
            connection.closed_reason = "the MCP session is closed"
        self._connection, self._exit = None, None
        return connection, close

    def _check_not_entered(self) -> None:
        if self._connection is not None:
            raise RuntimeError(f"{self!r} is already entered")

    # --- tools -----------------------------------------------------------------------------

    def tools(self) -> Sequence[MCPTool]:
        """The server's tools, as listed when the session was entered (none for an optional
        server that did not connect).

        Raises:
            RuntimeError: When the server has not been entered (`with` / `async with`).
        """
        if self._connection is None:
            raise RuntimeError(f"enter {self!r} (`with` or `async with`) before listing its tools")
        live = self._connection.live
        return () if live is None else tuple(live.tools)

    @property
    def protocol_version(self) -> str | None:
        """The MCP revision the session speaks: the stateless `"2026-07-28"` with a server that
        answers `server/discover`, else the newest both sides offered at the `initialize`
        handshake (e.g. `"2025-11-25"`); `None` when not connected."""
        live = self._connection.live if self._connection is not None else None
        if live is None:
            return None
        version: str | None = getattr(live.held.session, "protocol_version", None)
        return version

    @property
    def tools_version(self) -> int:
        """Counts the changes of `tools()`: a server's `notifications/tools/list_changed` (or a
        reconnection) that brings a different list adds one. A `ToolService` compares it
        between rounds and takes the new list then, never mid-round."""
        live = self._connection.live if self._connection is not None else None
        return 0 if live is None else live.version

    @property
    def _deadline(self) -> float:
        """How long a caller outside the session's loop waits: a reconnection and two tries at
        most (the inner deadlines end it first), plus the portal's grace."""
        return self.connect_timeout + 2 * self.timeout + _PORTAL_GRACE

    def _call_blocking(
        self, tool: MCPTool, call: ToolCall, arguments: dict[str, Any], context: ToolContext[Any]
    ) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and running_loop() is connection.loop:
            return execution_error_result(
                tool.name,
                "the MCP server was entered with `async with`; "
                "call it with `aexecute` (or from another thread)",
            )
        future = self._submit(connection, tool, call, arguments, context)
        try:
            return future.result(self._deadline)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return timeout_result(tool.name, self.timeout)
        except BaseException:  # KeyboardInterrupt: the call stops with its caller
            future.cancel()
            raise

    async def _call_async(
        self, tool: MCPTool, call: ToolCall, arguments: dict[str, Any], context: ToolContext[Any]
    ) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and connection.loop is asyncio.get_running_loop():
            return await self._acall(connection, tool, call, arguments, context)
        future = self._submit(connection, tool, call, arguments, context)
        wrapped = asyncio.wrap_future(future)
        try:
            done, _ = await asyncio.wait({wrapped}, timeout=self._deadline)
        except BaseException:  # cancelled: the call stops with its caller
            future.cancel()
            raise
        if not done:
            future.cancel()
            return timeout_result(tool.name, self.timeout)
        return wrapped.result()

    def _submit(
        self,
        connection: _Connection,
        tool: MCPTool,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
    ) -> concurrent.futures.Future[ToolExecutionResult]:
        """Start the call on the session's loop, from outside that loop."""
        if connection.portal is not None:
            return connection.portal.start_task_soon(
                self._acall, connection, tool, call, arguments, context
            )
        assert connection.loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._acall(connection, tool, call, arguments, context), connection.loop
        )

    async def _acall(
        self,
        connection: _Connection,
        tool: MCPTool,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
    ) -> ToolExecutionResult:
        """Runs on the session's loop. A call resuming with the user's answer gives it to its
        waiting request; a call that may pause on a question is sent apart from the run (see
        `_mcp_questions`); any other is sent here."""
        scope = scope_of(context) if context.may_pause else None
        resend = None
        if context.answer is not None:
            resumed = await self._desk.resume(call, tool.name, context.answer, scope)
            if not isinstance(resumed, Resend):
                return resumed
            resend = resumed
        live = connection.live
        opened = None
        if scope is not None and live is not None and resend is None:
            opened = self._desk.open(call, scope)
        if opened is None or scope is None or live is None:
            return await self._call(connection, tool, call, arguments, context, None, resend)
        live.owner.start_soon(self._call_apart, opened, connection, tool, call, arguments, context)
        return await self._desk.next(call, opened, scope)

    async def _call_apart(
        self,
        opened: OpenCall,
        connection: _Connection,
        tool: MCPTool,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
    ) -> None:
        import anyio

        try:
            with anyio.CancelScope() as stop:
                opened.started(stop)
                opened.outcome = await self._call(
                    connection, tool, call, arguments, context, opened
                )
            if stop.cancelled_caught:
                opened.outcome = execution_error_result(
                    tool.name, "the call was cancelled: its run ended without it"
                )
        except Exception as exc:  # a task of the server's task group: nothing may escape
            opened.outcome = failure_result(tool.name, exc)
        finally:
            opened.changed.set()

    async def _call(
        self,
        connection: _Connection,
        tool: MCPTool,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
        opened: OpenCall | None,
        resend: Resend | None = None,
    ) -> ToolExecutionResult:
        """Maps every outcome of one call to a result.

        A session known to be gone is replaced before the call (nothing was sent). A connection
        lost during the call is an error result, unless the call is safe to send again: then,
        if this call did not reconnect already, once more on a new session.
        """
        live = connection.live
        if connection.closed_reason is not None or live is None:
            return execution_error_result(tool.name, connection.closed_reason or "not connected")
        reconnected = not live.held.usable()
        held = await self._usable_session(live)
        if isinstance(held, str):
            return execution_error_result(tool.name, held)
        meta = None
        if self.idempotency_key_meta is not None:
            meta = {self.idempotency_key_meta: context.idempotency_key}
        scope = scope_of(context) if context.may_pause else None
        progress = _progress_callback(context)
        send = _Send(tool, call, arguments, meta, progress, context.may_pause, scope)
        outcome = await self._send(held, send, opened, resend)
        if not isinstance(outcome, Exception):
            await self._settle_listing(live)
            return outcome
        if reconnected or not tool.retry_safe:
            why = "" if tool.retry_safe else "; not sent again, as it may have taken effect"
            return execution_error_result(
                tool.name,
                f"the connection to the MCP server was lost during the call ({held.lost}){why}",
                exception=outcome,
            )
        retry = await self._usable_session(live)
        if isinstance(retry, str):
            return execution_error_result(tool.name, retry, exception=outcome)
        again = await self._send(retry, send, opened, resend)
        if isinstance(again, Exception):
            return execution_error_result(
                tool.name,
                f"the connection to the MCP server was lost during the call, twice ({retry.lost})",
                exception=again,
            )
        return again

    async def _settle_listing(self, live: _Live) -> None:
        """Let a listing the call set off (its server sent `tools/list_changed` before the
        result) end before the result is returned, so that the next round offers the new list;
        within `connect_timeout`."""
        if live.relisting is not None:
            import anyio

            with anyio.move_on_after(self.connect_timeout):
                await live.relisting.wait()

    async def _send(
        self, held: _Held, send: _Send, opened: OpenCall | None, resend: Resend | None
    ) -> ToolExecutionResult | Exception:
        """One call on `held`'s session (`tools/call`, sent again for each `input_required`
        result it gets): a result, or the exception that says the connection was lost (and
        marks `held` lost)."""
        import anyio

        tool = send.tool
        flight = Flight(opened, "" if opened is not None else _cannot_pause(send))
        held.flights.add(flight)
        try:
            # On the deadline (or when its caller is cancelled) the SDK sends
            # `notifications/cancelled` for the request as it unwinds, so the server stops the
            # call rather than running it to no one.
            with anyio.CancelScope(deadline=anyio.current_time() + self.timeout) as deadline:
                if opened is not None:  # a question sets the deadline aside while it waits
                    opened.deadline = deadline
                result = await self._follow(held.session, send, resend)
            if deadline.cancelled_caught:
                return timeout_result(tool.name, self.timeout)
        except Exception as exc:
            if not is_connection_lost(exc):
                return failure_result(tool.name, exc)
            held.lost = describe(exc)
            logger.warning("MCP server %s: connection lost: %r", self.label, exc)
            return exc
        finally:
            held.flights.discard(flight)
        if isinstance(result, ToolExecutionResult):
            return result
        return await amap_call_result(
            tool.name,
            result,
            self._max_result,
            tool.output_schema,
            self._output_types.get(tool.remote_name),
            self.content_urls,
        )

    async def _follow(
        self, session: ClientSession, send: _Send, resend: Resend | None
    ) -> dict[str, Any] | ToolExecutionResult:
        """The call's result (wire form) once no `input_required` result comes any more, or
        what the desk makes of one (a pending question, an error)."""
        import anyio

        delay = _STATE_ONLY_FIRST_DELAY
        for _ in range(MAX_INPUT_ROUNDS + 1):
            result = await call_tool(
                session,
                send.tool.remote_name,
                send.arguments,
                progress=send.progress,
                meta=send.meta,
                resend=resend,
            )
            if result.get("resultType") != "input_required":
                return result
            step = self._desk.settle(
                send.call, send.tool.name, result, may_pause=send.may_pause, scope=send.scope
            )
            if isinstance(step, ToolExecutionResult):
                return step
            if not step.responses:  # the server only wants its state back: back off a little
                await anyio.sleep(delay)
                delay = min(2 * delay, _STATE_ONLY_MAX_DELAY)
            resend = step
        return execution_error_result(
            send.tool.name,
            f"the server answered input_required more than {MAX_INPUT_ROUNDS} times",
        )

    async def _usable_session(self, live: _Live) -> _Held | str:
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
                held: _Held = await live.owner.start(self._hold, live)
            except Exception as exc:
                live.failures += 1
                delay = min(RECONNECT_FIRST_DELAY * 2 ** (live.failures - 1), RECONNECT_MAX_DELAY)
                live.retry_at = time.monotonic() + delay
                reason = describe(single(exc))
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


class MCPTool(DeclaredTool):
    """One tool of an entered `MCPServer`; it satisfies `ToolLike`.

    Its specification comes from the server's listing (name, description, `inputSchema`);
    arguments are validated against that schema locally, so invalid ones never reach the server.

    Raises:
        ValueError: The name (with the server's `tool_prefix`) is one providers refuse, or the
            `inputSchema` is refused.
    """

    def __init__(self, server: MCPServer, listed: Mapping[str, Any]) -> None:
        self.server = server
        self.remote_name: str = listed["name"]
        """The name the server knows the tool by (without `tool_prefix`)."""
        name = check_tool_name(server.tool_prefix + self.remote_name)
        self._arguments = SchemaArguments(
            listed.get("inputSchema") or {"type": "object", "properties": {}},
            tool_name=name,
            extra_arguments=server.extra_arguments,
        )
        self._specification = ToolSpecification(
            name=name,
            description=listed.get("description") or "",
            parameters=self._arguments.schema,  # what is enforced: undeclared keys refused
            annotations=_map_annotations(listed),
        )
        output = listed.get("outputSchema")
        self.output_schema = None if output is None else OutputSchema(output, tool_name=name)
        """The `outputSchema` its results' `structuredContent` is checked against, if any."""
        # A trusted tool that says nothing gets the specification's defaults (not read-only,
        # possibly destructive, not idempotent).
        hints = (self.annotations or ToolAnnotations()) if server.trusted else None
        # Trusted hints that contradict each other are read as the worst case: not read-only.
        read_only = hints is not None and bool(hints.read_only) and not hints.contradictions()
        self._read_only = read_only
        self._may_destroy = hints is not None and not read_only and hints.destructive is not False
        self._idempotent = read_only or (hints is not None and hints.idempotent is True)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r} of {self.server.label!r})"

    @property
    def annotations(self) -> ToolAnnotations | None:
        """What the server says about the tool's behaviour (`None` when it says nothing); acted
        on only when the server is `trusted`."""
        return self._specification.annotations

    @property
    def return_behavior(self) -> ReturnBehavior:
        """What the loop does with this tool's result (the server's setting)."""
        return self.server.return_behavior

    @property
    def max_retries(self) -> int:
        """How many invalid-arguments attempts the loop tolerates (the server's setting)."""
        return self.server.max_retries

    @property
    def sequential(self) -> bool:
        """Whether calls must not run concurrently: the server's setting when given, else
        whether a trusted server says the tool may be destructive."""
        if "sequential" in self.server._given:
            return self.server.sequential
        return self._may_destroy

    @property
    def max_result_chars(self) -> int | None:
        """Its result budget (the server's setting; `None`: the service's, else the default)."""
        return self.server.max_result_chars

    @property
    def requires_approval(self) -> ApprovalPolicy:
        """Whether its calls wait for a person's decision: the server's setting for it when
        given, else whether a trusted server says the tool may be destructive."""
        policy = self.server.requires_approval
        if isinstance(policy, Mapping):
            if self.remote_name in policy:
                return policy[self.remote_name]
        elif "requires_approval" in self.server._given:
            return policy
        return self._may_destroy

    @property
    def retry_safe(self) -> bool:
        """Whether a call lost with its connection may be sent again after reconnecting: the
        user says the tool is `idempotent`, calls carry an idempotency key, or a trusted server
        says it is idempotent or read-only."""
        idempotent = self.server.idempotent
        said = idempotent if isinstance(idempotent, bool) else self.remote_name in idempotent
        return said or self.server.idempotency_key_meta is not None or self._idempotent

    def check_answer(
        self, call: ToolCall, answer: ElicitationAnswer, conversation_id: str | None = None
    ) -> None:
        """Refuse an answer the open question's requested schema does not accept, or one that
        carries another question than the one `conversation_id`'s call paused on.

        Raises:
            ToolArgumentsError: Listing each problem of the answer's content.
            ValueError: A refusal that carries content, or an answer to another question
                (naming what differs).
        """
        self.server._desk.check(call, self.name, answer, conversation_id)

    def validate_arguments(self, arguments: str | bytes) -> dict[str, Any]:
        """Decode and validate raw JSON arguments locally, sending nothing.

        Raises:
            ToolArgumentsError: Listing every problem (`path`, `message`, `input`).
        """
        return valid_arguments(self.name, self._arguments.validate(arguments))

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate locally, then call the server, blocking; never raises for a failed call."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        result = self.server._call_blocking(self, call, decoded.arguments, context)
        return redacted_result(with_repairs(result, decoded.repairs), self.server._redactor)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate locally, then call the server without blocking the event loop."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        result = await self.server._call_async(self, call, decoded.arguments, context)
        return redacted_result(with_repairs(result, decoded.repairs), self.server._redactor)


@dataclass(frozen=True)
class MCPToolFilter:
    """Allow and deny lists of a server's tools, by the names the server lists them under
    (without `tool_prefix`); pass as `MCPServer(..., tool_filter=...)`.

    A tool is used when `allow` is `None` or names it, `deny` does not name it, and `where` (if
    given) returns `True` for it. A filtered-out tool is never offered, and a call to it is a call
    to an unknown tool: it never reaches the server.

    Args:
        allow: The only tools to use (`None`: all of them).
        deny: Tools never to use; wins over `allow`.
        where: A further test on each `MCPTool` (its `remote_name`, `description`,
            `specification`).
    """

    allow: Collection[str] | None = None
    deny: Collection[str] = ()
    where: Callable[[MCPTool], bool] | None = None

    def __post_init__(self) -> None:
        for name, names in (("allow", self.allow), ("deny", self.deny)):
            # A lone string is a collection of its characters: "delete" would deny "d", "e", ...
            if isinstance(names, str):
                raise TypeError(f"MCPToolFilter.{name} must be a collection of names, not a str")

    def __call__(self, tool: MCPTool) -> bool:
        """Whether `tool` is used."""
        name = tool.remote_name
        if self.allow is not None and name not in self.allow:
            return False
        return name not in self.deny and (self.where is None or self.where(tool))


@dataclass(frozen=True)
class _Send:
    """What one call sends, however many times."""

    tool: MCPTool
    call: ToolCall
    arguments: dict[str, Any]
    meta: Any
    progress: Any
    may_pause: bool
    scope: Scope | None
    """Where a question the call pauses on is remembered (`None`: not in this process)."""


def _map_annotations(listed: Mapping[str, Any]) -> ToolAnnotations | None:
    """A listed tool's `annotations` (and top-level `title`), or `None` when it has neither."""
    given = listed.get("annotations") or {}
    title = given.get("title") or listed.get("title")
    if not given and title is None:
        return None
    return ToolAnnotations(
        title=title,
        read_only=given.get("readOnlyHint"),
        destructive=given.get("destructiveHint"),
        idempotent=given.get("idempotentHint"),
        open_world=given.get("openWorldHint"),
    )


def _cannot_pause(send: _Send) -> str:
    """Why a call sent in line cannot take a question asked mid-call."""
    if not send.may_pause:
        return "it runs outside a ToolService run, with no way to pause for the user"
    if send.scope is None:
        return "it has no conversation to keep its open request in"
    return "its conversation has the same call waiting on a question already"


def _not_connected(tool: MCPTool) -> ToolExecutionResult:
    return execution_error_result(tool.name, "the MCP server is not connected")


def _progress_callback(context: ToolContext[Any]) -> Any:
    """The SDK's progress callback for a call, forwarding to `context.report_progress`; `None`
    (no progress token sent) when no one listens."""
    report = context.on_progress
    if report is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        report(progress, total, message)

    return forward
