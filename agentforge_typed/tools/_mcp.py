"""`MCPServer`: the tools of a Model Context Protocol server, as tools of this package.

Requires the `mcp` extra (`pip install "agentforge-typed[mcp]"`); the SDK is imported only when a
server is entered, so `import agentforge_typed` works without it.

The MCP SDK is async-only. Entered with `async with`, the session lives on the caller's event loop
and `aexecute` talks to it directly. Entered with `with`, the session runs on a background thread
with its own event loop (an anyio blocking portal), and both `execute` and `aexecute` reach it
through that portal. Every call is bounded by `timeout`, so a server that stops answering gives
error results instead of a hung conversation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sys
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

from .._messages import ToolCall
from .._request import ToolSpecification
from .._sync import running_loop
from ._base import (
    ApprovalPolicy,
    DeclaredTool,
    ExtraArguments,
    ReturnBehavior,
    ToolContext,
    ToolExecutionResult,
    check_extra_arguments,
    check_options,
)
from ._budget import DEFAULT_MAX_RESULT_CHARS, check_max_result_chars
from ._mcp_results import OutputSchema, map_call_result, own_output_validation
from ._outcomes import (
    execution_error_result,
    failure_result,
    timeout_result,
    with_repairs,
)
from ._schema_arguments import SchemaArguments
from ._schema_tool import valid_arguments
from ._signature import check_tool_name

if TYPE_CHECKING:
    import anyio.from_thread
    from mcp import ClientSession

__all__ = ["MCPServer", "MCPServerOptions", "MCPTool", "MCPToolFilter"]

logger = logging.getLogger("agentforge_typed.mcp")

_CONNECTION_CLOSED = -32000
"""JSON-RPC error code the SDK raises for requests on a closed connection."""
_PORTAL_GRACE = 5.0
"""Extra seconds a blocking caller waits for the portal beyond the call's own timeout."""
DEFAULT_MAX_TOOLS = 1000
"""The most tools a server may list by default (`MCPServerOptions.max_tools`)."""
_STREAM_READ_TIMEOUT = 300.0
"""Seconds an HTTP read may wait (the SDK's default); each tool call has its own `timeout`."""

_Connector = Callable[[contextlib.AsyncExitStack[Any]], Awaitable["ClientSession"]]


@dataclass
class _Connection:
    """One entered session and how to reach it."""

    session: ClientSession
    mode: Literal["sync", "async"]
    loop: asyncio.AbstractEventLoop | None = None
    """The caller's loop (`async with`)."""
    portal: anyio.from_thread.BlockingPortal | None = None
    """The background loop's portal (`with`)."""
    closed_reason: str | None = None
    """Set once the connection is known to be gone: later calls fail fast."""
    tools: list[MCPTool] = field(default_factory=list)


class MCPServerOptions(TypedDict, total=False):
    """The keyword options of `MCPServer`, `MCPServer.stdio` and `MCPServer.http`."""

    timeout: float
    """Seconds each tool call may take (default 30)."""
    connect_timeout: float
    """Seconds for initializing the session, listing the tools and building them (checking each
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
    from the server's tool names (without `tool_prefix`) to policies, the unnamed tools needing
    none (default `False`)."""


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
        connect: Opens the transport and an unstarted `ClientSession` on the given exit stack
            (what `stdio` and `http` build for you).
        label: How errors and `repr` name this server.
        **options: See `MCPServerOptions`.
    """

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
        self._built: list[MCPTool] = []

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

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> ClientSession:
            from mcp import ClientSession, StdioServerParameters, stdio_client

            parameters = StdioServerParameters(
                command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
            )
            streams = await stack.enter_async_context(
                stdio_client(parameters, errlog=errlog or sys.stderr)
            )
            return ClientSession(streams[0], streams[1])

        return cls(connect, label=" ".join([command, *args]), **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        **options: Unpack[MCPServerOptions],
    ) -> MCPServer:
        """A server reached over the streamable HTTP transport at `url` (e.g. `.../mcp`).

        Args:
            url: The server's MCP endpoint.
            headers: Sent with every request, e.g. `{"Authorization": "Bearer ..."}`.
            **options: See `MCPServerOptions`.
        """

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> ClientSession:
            from mcp import ClientSession
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
            return ClientSession(streams[0], streams[1])

        server = cls(connect, label=url, **options)
        return server

    def __repr__(self) -> str:
        state = "connected" if self._connection else "not connected"
        return f"MCPServer({self.label!r}, {state})"

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> MCPServer:
        self._check_not_entered()
        import anyio.from_thread

        portal_cm = anyio.from_thread.start_blocking_portal(name="agentforge-mcp")
        portal = portal_cm.__enter__()
        try:
            session_cm = portal.wrap_async_context_manager(self._session())
            session = session_cm.__enter__()
        except BaseException as exc:
            portal_cm.__exit__(None, None, None)
            raise _single(exc) from None

        def close() -> None:
            try:
                session_cm.__exit__(None, None, None)
            finally:
                portal_cm.__exit__(None, None, None)

        self._start(_Connection(session, "sync", portal=portal), close)
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
            session = await stack.enter_async_context(self._session())
        except BaseException as exc:
            raise _single(exc) from None
        self._start(_Connection(session, "async", loop=asyncio.get_running_loop()), stack.aclose)
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
        if connection is None or close is None:
            return
        if connection.mode != "sync":
            raise RuntimeError("this MCPServer was entered with `async with`: use `aclose()`")
        close()

    async def aclose(self) -> None:
        """Close a session entered with `async with` (or, without blocking, one entered with
        `with`)."""
        connection, close = self._stop()
        if connection is None or close is None:
            return
        if connection.mode == "sync":
            await asyncio.to_thread(close)
        else:
            await close()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        import anyio

        async with contextlib.AsyncExitStack() as stack:
            session = await stack.enter_async_context(await self._connect(stack))
            try:
                with anyio.fail_after(self.connect_timeout):
                    await session.initialize()
                    listed = await _list_tools(session, self.max_tools, self.label)
                    self._built = await self._usable_tools(listed)
            except TimeoutError:
                raise TimeoutError(
                    f"MCP server {self.label!r} did not initialize and list its tools within "
                    f"{self.connect_timeout:g} seconds (connect_timeout)"
                ) from None
            yield session

    def _start(self, connection: _Connection, close: Callable[[], Any]) -> None:
        connection.tools, self._built = self._built, []
        self._connection, self._exit = connection, close

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
                logger.warning(
                    "MCP server %s: tool %r skipped: %s", self.label, listed.get("name"), exc
                )
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
        """The server's tools, as listed when the session was entered.

        Raises:
            RuntimeError: When the server has not been entered (`with` / `async with`).
        """
        if self._connection is None:
            raise RuntimeError(f"enter {self!r} (`with` or `async with`) before listing its tools")
        return tuple(self._connection.tools)

    def _call_blocking(self, tool: MCPTool, arguments: dict[str, Any]) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and running_loop() is connection.loop:
            return execution_error_result(
                tool.name,
                "the MCP server was entered with `async with`; "
                "call it with `aexecute` (or from another thread)",
            )
        future = self._submit(connection, tool, arguments)
        try:
            return future.result(self.timeout + _PORTAL_GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return timeout_result(tool.name, self.timeout)

    async def _call_async(self, tool: MCPTool, arguments: dict[str, Any]) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and connection.loop is asyncio.get_running_loop():
            return await self._acall(connection, tool, arguments)
        future = self._submit(connection, tool, arguments)
        wrapped = asyncio.wrap_future(future)
        done, _ = await asyncio.wait({wrapped}, timeout=self.timeout + _PORTAL_GRACE)
        if not done:
            future.cancel()
            return timeout_result(tool.name, self.timeout)
        return wrapped.result()

    def _submit(
        self, connection: _Connection, tool: MCPTool, arguments: dict[str, Any]
    ) -> concurrent.futures.Future[ToolExecutionResult]:
        """Start the call on the session's loop, from outside that loop."""
        if connection.portal is not None:
            return connection.portal.start_task_soon(self._acall, connection, tool, arguments)
        assert connection.loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._acall(connection, tool, arguments), connection.loop
        )

    async def _acall(
        self, connection: _Connection, tool: MCPTool, arguments: dict[str, Any]
    ) -> ToolExecutionResult:
        """Runs on the session's loop; maps every outcome to a result."""
        import anyio

        if connection.closed_reason is not None:
            return execution_error_result(tool.name, connection.closed_reason)
        try:
            with anyio.fail_after(self.timeout):
                result = await connection.session.call_tool(tool.remote_name, arguments)
        except TimeoutError:
            return timeout_result(tool.name, self.timeout)
        except Exception as exc:
            if not _is_connection_lost(exc):
                return failure_result(tool.name, exc)
            connection.closed_reason = f"the MCP server is gone ({type(exc).__name__}: {exc})"
            logger.warning("MCP server %s: connection lost: %r", self.label, exc)
            return execution_error_result(tool.name, connection.closed_reason, exception=exc)
        dumped = result.model_dump(mode="json", by_alias=True)
        return map_call_result(tool.name, dumped, self._max_result, tool.output_schema)


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
        )
        output = listed.get("outputSchema")
        self.output_schema = None if output is None else OutputSchema(output, tool_name=name)
        """The `outputSchema` its results' `structuredContent` is checked against, if any."""

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r} of {self.server.label!r})"

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
        """Whether calls must not run concurrently (the server's setting)."""
        return self.server.sequential

    @property
    def max_result_chars(self) -> int | None:
        """Its result budget (the server's setting; `None`: the service's, else the default)."""
        return self.server.max_result_chars

    @property
    def requires_approval(self) -> ApprovalPolicy:
        """Whether its calls wait for a person's decision (the server's setting for it)."""
        policy = self.server.requires_approval
        return policy.get(self.remote_name, False) if isinstance(policy, Mapping) else policy

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
        result = self.server._call_blocking(self, decoded.arguments)
        return with_repairs(result, decoded.repairs)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate locally, then call the server without blocking the event loop."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        result = await self.server._call_async(self, decoded.arguments)
        return with_repairs(result, decoded.repairs)


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


async def _list_tools(session: ClientSession, most: int, label: str) -> list[dict[str, Any]]:
    """Every tool the server lists, following pagination, as wire-format dicts (camelCase keys,
    the same whichever SDK version parsed them); `ValueError` once there are more than `most`
    (a server paginating without end is cut off there too)."""
    from mcp.types import PaginatedRequestParams

    own_output_validation(session)
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        page = (await session.list_tools(params=params)).model_dump(mode="json", by_alias=True)
        if len(listed) + len(page["tools"]) > most:
            raise ValueError(
                f"MCP server {label!r} lists more than max_tools={most} tools; pass a larger "
                "max_tools= to MCPServer to accept them"
            )
        listed.extend(page["tools"])
        cursor = page.get("nextCursor")
        if not cursor:
            return listed


def _is_connection_lost(exc: Exception) -> bool:
    import anyio

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return True
    error = getattr(exc, "error", None)  # the SDK's `MCPError` / `McpError` carry `ErrorData`
    return getattr(error, "code", None) == _CONNECTION_CLOSED


def _single(exc: BaseException) -> BaseException:
    """The one exception inside the task-group wrappers of the transports, or `exc` itself."""
    while (inner := getattr(exc, "exceptions", None)) and len(inner) == 1:
        exc = inner[0]
    return exc


def _not_connected(tool: MCPTool) -> ToolExecutionResult:
    return execution_error_result(tool.name, "the MCP server is not connected")
