"""`ToolServer`: a tool collection served over MCP, on the official SDK's low-level `Server`.

The low-level tier, not the SDK's decorator tier: that one would derive schemas from signatures
again, and coerce `"5"` into `5`. Here `tools/list` declares each tool as the library renders it
(`_catalog`), and `tools/call` runs the tool's own `aexecute` — the validation and the results
every other part of the library gives a model (`_results`). The SDK validates nothing of the
arguments; it parses the JSON-RPC and routes each request to a handler below.

One `Server` speaks every revision the SDK does: the handshake ones (`2024-11-05` to
`2025-11-25`: `initialize`, then requests on a session) and the stateless `2026-07-28`, where each
request carries its own envelope and a question to the client travels as an `input_required`
result (`_approval`).

State a session keeps (its deps, its log level, its conversation id) lives on the SDK's
connection object and goes with it; at the stateless revision every request is its own session.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, cast, overload

import anyio
import mcp_types
import pydantic_core
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from typing_extensions import TypedDict, Unpack

from .._identity import random_id
from .._messages import ToolCall
from .._records import ToolExecutionResult
from ..loop._approval import ApprovalState
from ..loop._service import ToolService
from ..tools._base import DepsT, ToolContext, ToolLike, check_options, may_wait
from ..tools._budget import within_budget
from ..tools._invoke import ainvoke
from ..tools._outcomes import describe_exception, reraise_uncontained, timeout_result
from ..tools._signature import deps_accepted, needing_deps, type_name
from ._approval import Approvals, ask, can_ask, cannot_ask, denied_text
from ._catalog import Catalog, Served, catalog_of
from ._notify import LOG_LEVELS, Outbox, current_outbox, forward_tool_logs
from ._questions import STATE_PREFIX, CannotAskError, InputNeeded, Questions, questions
from ._results import call_result, error_result

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ._http import HttpOptions

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DepsFactory",
    "DepsScope",
    "ToolServer",
    "ToolServerOptions",
]

logger = logging.getLogger("agentforge_typed.serving")

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request a client may send (4 MiB): a longer stdio line is answered with an
error and never held; a longer HTTP body is refused with status 413."""
DEFAULT_MAX_CONCURRENT_CALLS = 32
"""The most tool calls one server runs at once; a call past it is answered at once with an
error result saying the server is busy."""
DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds a call's body may run (its tool's own `timeout` applies within it)."""
DEFAULT_APPROVAL_TIMEOUT = 300.0
"""Seconds a person has to answer an approval question (and, at the stateless revision, how
long the question stays answerable)."""

DepsScope = Literal["session", "call"]
"""How often the deps factory is called: once per session (a stdio process, an HTTP session; at
the stateless revision every request is one), or once per call."""
DepsFactory = Callable[[], "DepsT | Awaitable[DepsT]"]
"""Makes what tools receive as `ToolContext.deps`: a sync or async function of no arguments."""

_STATE_KEY = "agentforge_typed.serving"
_NO_DEPS: Any = object()


class ToolServerOptions(TypedDict, total=False):
    """The keyword options of `ToolServer` and `serve_mcp`, each optional (defaults below)."""

    name: str
    """The server's name in its `serverInfo` (default `"agentforge-typed"`)."""
    version: str
    """Its version in its `serverInfo` (default: the package's)."""
    instructions: str | None
    """What the server tells clients about using its tools (default `None`)."""
    select: Sequence[str] | None
    """Serve only these tools: names and `"group:NAME"` selectors, as a run's `tools=`
    (default `None`: every registered tool). The others are neither listed nor callable."""
    deps_scope: DepsScope
    """How often `deps` is called (default `"session"`)."""
    max_concurrent_calls: int
    """The most calls run at once (default 32, `DEFAULT_MAX_CONCURRENT_CALLS`)."""
    call_timeout: float | None
    """Seconds a call's body may run (default 300; `None`: no limit beyond the tool's own)."""
    approval_timeout: float
    """Seconds an approval question waits for its answer (default 300)."""
    max_request_bytes: int
    """The largest request accepted, in bytes (default 4 MiB, `DEFAULT_MAX_REQUEST_BYTES`)."""


@dataclass
class _Session:
    """What one session keeps between its calls."""

    id: str = field(default_factory=random_id)
    """The `conversation_id` its calls' `ToolContext` carries."""
    deps: Any = _NO_DEPS
    lock: anyio.Lock | None = None
    log_level: mcp_types.LoggingLevel | None = None
    """The level `logging/setLevel` asked for (handshake revisions); `None`: no log messages."""


def _session(ctx: ServerRequestContext[Any, Any]) -> _Session:
    # The SDK keeps per-connection state on its `Connection`, which the request context does not
    # expose yet (its `Context` rework will): without it, each request is a session of its own.
    state = getattr(getattr(ctx.session, "_connection", None), "state", None)
    if not isinstance(state, dict):
        return _Session()
    found = state.get(_STATE_KEY)
    if found is None:
        found = state[_STATE_KEY] = _Session()
    return cast(_Session, found)


class _DepsError(Exception):
    """The deps factory raised, or returned deps the tools do not accept."""


class ToolServer(Generic[DepsT]):
    """A tool collection served over MCP, to any client: desktop assistants, IDEs, other agents.

    ```python
    server = ToolServer([get_weather, get_forecast])
    server.serve_stdio()  # or serve_http(port=8765), or mount server.http_app()
    ```

    Args:
        tools: A `ToolService` (its registered tools, groups, approval policies, `deps_type` and
            result budget), or anything `ToolService.register` takes — a `@tool`, a function,
            an object with `@tool` methods, an entered `MCPServer` (its tools as it filters
            them) — or a list of those.
        deps: Makes what tools receive as `ToolContext.deps`, once per session or per call
            (`deps_scope`); checked against the service's `deps_type`.
        **options: See `ToolServerOptions`.

    Raises:
        TypeError: A tool needs deps and no `deps` factory is given, or an unknown option.
        ValueError: `select` names no registered tool or group; a tool is external.
    """

    @overload
    def __init__(
        self: ToolServer[DepsT],
        tools: ToolService[DepsT],
        *,
        deps: DepsFactory[DepsT] | None = None,
        **options: Unpack[ToolServerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ToolServer[Any],
        tools: object,
        *,
        deps: DepsFactory[Any] | None = None,
        **options: Unpack[ToolServerOptions],
    ) -> None: ...

    def __init__(
        self,
        tools: object,
        *,
        deps: DepsFactory[Any] | None = None,
        **options: Unpack[ToolServerOptions],
    ) -> None:
        check_options(options, ToolServerOptions, "ToolServer")
        self.service: ToolService[Any] = _service_of(tools)
        self.select = options.get("select")
        self.deps = deps
        self.deps_scope: DepsScope = options.get("deps_scope", "session")
        if self.deps_scope not in ("session", "call"):
            raise ValueError(f"deps_scope must be 'session' or 'call', got {self.deps_scope!r}")
        self.max_concurrent_calls = _at_least_one(
            options.get("max_concurrent_calls", DEFAULT_MAX_CONCURRENT_CALLS),
            "max_concurrent_calls",
        )
        self.call_timeout = options.get("call_timeout", DEFAULT_CALL_TIMEOUT)
        self.approval_timeout = options.get("approval_timeout", DEFAULT_APPROVAL_TIMEOUT)
        for what, seconds in (
            ("call_timeout", self.call_timeout),
            ("approval_timeout", self.approval_timeout),
        ):
            if seconds is not None and not seconds > 0:
                raise ValueError(f"{what} must be a positive number of seconds, got {seconds!r}")
        self.max_request_bytes = _at_least_one(
            options.get("max_request_bytes", DEFAULT_MAX_REQUEST_BYTES), "max_request_bytes"
        )
        self.service._refresh()
        self._catalog = self._build_catalog(None)
        if deps is None:
            needy = needing_deps(entry.tool for entry in self._catalog.by_name.values())
            if needy:
                raise TypeError(
                    f"{', '.join(needy)} need{'s' if len(needy) == 1 else ''} deps: pass "
                    "deps=<a function making them> (called once per session)"
                )
        self._running = 0
        self._ids = itertools.count(1)
        self._approvals = Approvals(self.approval_timeout)
        forward_tool_logs()
        self.name = options.get("name", "agentforge-typed")
        self.sdk_server: Server[Any] = self._build_server(
            self.name, options.get("version") or _version(), options.get("instructions")
        )
        """The SDK's low-level `Server` this one runs on (for a transport of your own)."""

    def __repr__(self) -> str:
        return f"ToolServer({self.name!r}, tools={list(self._catalog.by_name)!r})"

    # -- what is served ---------------------------------------------------------------------

    def _build_catalog(self, previous: Catalog | None) -> Catalog:
        return catalog_of(self.service, self.select, self.service._generation, previous)

    def _current(self) -> Catalog:
        service = self.service
        if service._watched:
            # Sources whose tools changed (an `MCPServer`'s `tools/list_changed`): their new
            # lists are taken now, as a run takes them between rounds.
            service._refresh()
        catalog = self._catalog
        if catalog.version != service._generation:
            try:
                catalog = self._build_catalog(catalog)
            except (TypeError, ValueError) as exc:
                # A changed source whose tools cannot be served now (one turned external, a
                # return type without a schema): the former listing stays, as a service keeps a
                # source's former tools when it refuses its new ones.
                logger.warning("the changed tools cannot be served, the former stay: %s", exc)
                catalog = Catalog(list(catalog.by_name.values()), service._generation)
            self._catalog = catalog
        return catalog

    def declarations(self) -> list[dict[str, Any]]:
        """The tools as `tools/list` declares them (JSON, as on the wire)."""
        return [
            declaration.model_dump(mode="json", by_alias=True, exclude_none=True)
            for declaration in self._current().declarations
        ]

    # -- the SDK server ---------------------------------------------------------------------

    def _build_server(self, name: str, version: str, instructions: str | None) -> Server[Any]:
        server: Server[Any] = Server(
            name,
            version=version,
            instructions=instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        # Registered by method rather than `on_set_logging_level=`, which warns at construction
        # (logging is deprecated at 2026-07-28, and still what the handshake revisions use).
        server.add_request_handler("logging/setLevel", mcp_types.SetLevelRequestParams, _set_level)
        security = RequestStateSecurity.ephemeral(ttl=self.approval_timeout)
        server.middleware.append(RequestStateBoundary(security, default_audience=name))
        return server

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=self._current().declarations)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        entry = self._catalog.by_name.get(name)
        return None if entry is None else entry.declaration.input_schema

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        entry = self._current().by_name.get(params.name)
        if entry is None:
            # Never a name the client made up reaching anything: unlisted is unknown.
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        name = entry.tool.name
        if self._running >= self.max_concurrent_calls:
            return error_result(
                f"Tool `{name}` did not run: the server is busy ({self.max_concurrent_calls} "
                "calls in flight); try again shortly."
            )
        self._running += 1
        try:
            return await self._call(ctx, params, entry)
        except (_DepsError, CannotAskError) as exc:
            return error_result(f"Tool `{name}` did not run: {exc}")
        except BaseException as exc:  # contained: a tool's failure is never a protocol error
            reraise_uncontained(exc)
            logger.warning("serving %r failed: %s", name, type(exc).__name__)
            return error_result(f"Tool `{name}` failed: {describe_exception(exc)}")
        finally:
            self._running -= 1

    async def _call(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.CallToolRequestParams,
        entry: Served,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        tool = entry.tool
        session = _session(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        asking = Questions(ctx, self.approval_timeout, modern)
        if modern:
            asking.take(params)  # the answers of the rounds before, if any
        deps = await self._deps(session)
        given = params.arguments
        # As JSON again: the tool validates JSON in strict mode (an ISO date is a date, "5" is
        # not an integer), exactly as a model's arguments.
        raw = "{}" if given is None else pydantic_core.to_json(given).decode()
        call = ToolCall.model_construct(id=f"mcp-{next(self._ids)}", name=tool.name, arguments=raw)
        outbox = _outbox(ctx, session)
        context: ToolContext[Any] = ToolContext(
            deps,
            call.id,
            tool.name,
            conversation_id=session.id,
            on_progress=outbox.report_progress if outbox and outbox.progress else None,
        )
        if may_wait(tool):
            refusal = await self._approve(ctx, params, tool, call, context)
            if isinstance(refusal, mcp_types.InputRequiredResult):
                return refusal
            if refusal is not None:
                return error_result(refusal)
        token = current_outbox().set(outbox) if outbox is not None else None
        asked = questions().set(asking)
        try:
            result = await self._execute(tool, call, context)
        finally:
            questions().reset(asked)
            if token is not None:
                current_outbox().reset(token)
            if outbox is not None:
                await outbox.close()
        if result.is_error and isinstance(result.exception, InputNeeded):
            return asking.input_required(result.exception)
        return call_result(tool.name, result, entry.output)

    async def _execute(
        self, tool: ToolLike, call: ToolCall, context: ToolContext[Any]
    ) -> ToolExecutionResult:
        limit = self.call_timeout
        try:
            with anyio.fail_after(limit) if limit is not None else nullcontext():
                result = await tool.aexecute(call, context)
        except TimeoutError:
            assert limit is not None
            return timeout_result(tool.name, limit)
        own = getattr(tool, "max_result_chars", None)
        return within_budget(result, own, self.service.max_result_chars)

    async def _approve(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.CallToolRequestParams,
        tool: ToolLike,
        call: ToolCall,
        context: ToolContext[Any],
    ) -> mcp_types.InputRequiredResult | str | None:
        """`None` when the call may run now (no approval needed, or the person approved), else
        the question to send (stateless revision) or the error text that ends the call."""
        policy = ApprovalState(None, None, asynchronous=True)
        held = policy.hold(call, context, tool)  # the policy sees only valid arguments
        if ApprovalState.deferred(held):
            held = await policy.ahold(call, context, tool)
        if held is None:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            state = params.request_state
            if state is not None and state.startswith(STATE_PREFIX):
                # Answers to the tool's own questions: sealed, bound to this tool and these
                # arguments, and minted only by a round that ran it, so after its approval.
                return None
            decided = self._approvals.answer(params)
            if decided is not None:
                return None if decided else denied_text(tool.name)
            if not can_ask(ctx):
                return cannot_ask(tool.name)
            return self._approvals.question(tool.name, call.arguments)
        return await ask(ctx, tool.name, call.arguments, self.approval_timeout)

    async def _deps(self, session: _Session) -> Any:
        if self.deps is None:
            return None
        if self.deps_scope == "call":
            return await self._make_deps()
        if session.deps is _NO_DEPS:
            session.lock = session.lock or anyio.Lock()
            async with session.lock:  # one factory call for the session's concurrent calls
                if session.deps is _NO_DEPS:
                    session.deps = await self._make_deps()
        return session.deps

    async def _make_deps(self) -> Any:
        assert self.deps is not None
        try:
            made = await ainvoke(self.deps)
        except BaseException as exc:
            reraise_uncontained(exc)
            # Its type alone, to the client and the log: a factory's error (a driver's connection
            # error) may name a password, and the client is not the program's own model.
            logger.warning("the deps factory raised %s", type(exc).__name__)
            raise _DepsError(f"making its deps failed ({type(exc).__name__})") from exc
        expected = self.service.deps_type
        if expected is not None and not deps_accepted(expected, type(made)):
            raise _DepsError(
                f"the deps factory made a {type(made).__qualname__}, not the "
                f"{type_name(expected)} the tools take"
            )
        return made

    # -- transports --------------------------------------------------------------------------

    async def aserve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout, until stdin ends."""
        from ._stdio import stdio_streams

        async with stdio_streams(self.max_request_bytes) as (read, write):
            await self.sdk_server.run(read, write, self.sdk_server.create_initialization_options())

    def serve_stdio(self) -> None:
        """`aserve_stdio`, blocking (on a new event loop)."""
        anyio.run(self.aserve_stdio)

    def http_app(self, **options: Unpack[HttpOptions]) -> Starlette:
        """The ASGI app serving streamable HTTP at `/mcp` (see `HttpOptions`): run it with any
        ASGI server, or mount it in an app of your own (see the serving guide)."""
        from ._http import http_app

        return http_app(self, **options)

    async def aserve_http(self, **options: Unpack[HttpOptions]) -> None:
        """Serve streamable HTTP at `http://HOST:PORT/mcp` under uvicorn until cancelled (see
        `HttpOptions`: `host` 127.0.0.1, `port` 8765, `token`, ...)."""
        from ._http import serve_http

        await serve_http(self, **options)

    def serve_http(self, **options: Unpack[HttpOptions]) -> None:
        """`aserve_http`, blocking (on a new event loop), until interrupted."""

        async def serve() -> None:
            await self.aserve_http(**options)

        anyio.run(serve)


async def _set_level(
    ctx: ServerRequestContext[Any, Any], params: mcp_types.SetLevelRequestParams
) -> mcp_types.EmptyResult:
    _session(ctx).log_level = params.level
    return mcp_types.EmptyResult()


def _outbox(ctx: ServerRequestContext[Any, Any], session: _Session) -> Outbox | None:
    """The call's outbox, when its client takes progress or log messages; else `None` (the
    common case costs nothing)."""
    meta = ctx.meta
    progress = bool(meta) and meta.get("progress_token") is not None  # type: ignore[union-attr]
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        levels = allowed_log_levels(ctx.protocol_version, cast(Any, meta))
    elif session.log_level is not None:
        levels = frozenset(LOG_LEVELS[LOG_LEVELS.index(session.log_level) :])
    else:
        levels = frozenset()
    if not progress and not levels:
        return None
    return Outbox(ctx, progress=progress, log_levels=levels)


def _service_of(tools: object) -> ToolService[Any]:
    if isinstance(tools, ToolService):
        return tools
    service: ToolService[Any] = ToolService()
    items = tools if isinstance(tools, list | tuple) else [tools]
    for item in items:
        service.register(item)
    return service


def _at_least_one(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return value


def _version() -> str:
    from .. import __version__

    return __version__
