"""`MCPServer`: the tools of a Model Context Protocol server, as tools of this package.

Requires the `mcp` extra (`pip install "agentforge-typed[mcp]"`); the SDK is imported only when a
server is entered, so `import agentforge_typed` works without it.

`MCPServer` is what a program builds (`stdio`, `http`), enters (`with` or `async with`: that
connects, negotiates a revision and lists the tools) and registers; `MCPTool` is one listed tool,
its arguments validated locally against its `inputSchema` before anything is sent. The server's
two other halves are its bases: holding the session, reconnecting it and keeping the tool list
current (`_connection.SessionHolder`), and sending one call to its result (`_calls.ServerCalls`).
Every call is bounded by `timeout`, so a server that stops answering gives error results instead
of a hung conversation; a call that was in flight when the connection went is retried only when
that is safe (see `MCPTool.retry_safe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from typing_extensions import TypedDict, Unpack

from ..._messages import ToolCall, shown_name
from ..._records import ElicitationAnswer, ToolExecutionResult
from ..._request import ToolAnnotations, ToolSpecification
from ..._transport._redaction import (
    NO_SECRETS,
    Redactor,
    given_secrets,
    header_secrets,
    url_secrets,
)
from .._base import (
    ApprovalPolicy,
    ContentURLs,
    DeclaredTool,
    ExtraArguments,
    ReturnBehavior,
    ToolContext,
    check_content_urls,
    check_extra_arguments,
    check_options,
)
from .._budget import DEFAULT_MAX_RESULT_CHARS, check_max_result_chars
from .._outcomes import redacted_result, with_repairs
from .._schema_arguments import SchemaArguments
from .._schema_tool import valid_arguments
from .._signature import check_tool_name
from ._auth import LocalRedirect, accept_legacy_issuer, noting_failures, watch_tokens
from ._bounded import ACCEPTED_ENCODINGS, MAX_MESSAGE_BYTES, bounding
from ._calls import ServerCalls
from ._connection import Connection, Connector, Streams
from ._questions import Desk
from ._results import OutputSchema, OutputType
from ._session import MCPAuthorizationError, Refusal, Revision, describe, is_connection_lost, single
from ._stdio import StderrTail
from ._tokens import MemoryTokens, StoreTokens

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "LocalRedirect",
    "MCPAuthorizationError",
    "MCPServer",
    "MCPServerOptions",
    "MCPTool",
    "MCPToolFilter",
    "MemoryTokens",
    "StoreTokens",
]

logger = logging.getLogger("agentforge_typed.mcp")

DEFAULT_MAX_TOOLS = 1000
"""The most tools a server may list by default (`MCPServerOptions.max_tools`)."""
_STREAM_READ_TIMEOUT = 300.0
"""Seconds an HTTP read may wait (the SDK's default); each tool call has its own `timeout`."""


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


class MCPServer(ServerCalls["MCPTool"]):
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
    _stderr: StderrTail | None = None
    """A stdio server's stderr, whose end says why it did not start."""

    def __init__(
        self, connect: Connector, *, label: str, **options: Unpack[MCPServerOptions]
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
        self._desk = Desk(
            self.label,
            self.timeout,
            self.elicitation_timeout,
            self._deadline,
            redactor=lambda: self._redactor,
        )
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
        self._connection: Connection[MCPTool] | None = None
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

        stderr = StderrTail(errlog or sys.stderr)

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> Streams:
            from mcp import StdioServerParameters, stdio_client

            parameters = StdioServerParameters(
                command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
            )
            with stderr.open() as write:  # closed here once the process holds its copy
                streams = await stack.enter_async_context(stdio_client(parameters, errlog=write))
            return streams[0], streams[1]

        server = cls(connect, label=" ".join([command, *args]), **options)
        server._stderr = stderr
        return server

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        auth: httpx2.Auth | None = None,
        **options: Unpack[MCPServerOptions],
    ) -> MCPServer:
        """A server reached over the streamable HTTP transport at `url` (e.g. `.../mcp`).

        What the URL and the headers hold of secrets — credential headers' values, the URL's
        password, its query parameters named so (`api_key`, `token`…) or random-looking, its
        random-looking path segments — and `secrets` are `[redacted]` in the server's `repr`
        and label, its warnings and log records, its errors and its tools' results; so are the
        tokens and client secret an `auth` flow's token storage holds, once it holds them.

        A server that answers HTTP 401 or 403 (and no `auth` flow satisfies it) makes entering
        raise `MCPAuthorizationError`, naming the server and the status.

        Args:
            url: The server's MCP endpoint.
            headers: Sent with every request, e.g. `{"Authorization": "Bearer ..."}`.
            secrets: Further values never to show (e.g. a path segment that is a key but does
                not look random).
            auth: How to authorize with the server: the MCP SDK's OAuth providers
                (`mcp.client.auth.OAuthClientProvider` for the authorization-code grant,
                `ClientCredentialsOAuthProvider` or `PrivateKeyJWTOAuthProvider` for a machine
                client), which discover the server's authorization server from its 401
                challenge, register or identify the client, obtain, store and refresh tokens,
                and ask for more scope on a 403 `insufficient_scope`.
            **options: See `MCPServerOptions`.
        """
        given = given_secrets(secrets)
        redactor = Redactor([*given, *url_secrets(url), *header_secrets(headers or {})])
        refusal = Refusal()

        async def connect(stack: contextlib.AsyncExitStack[Any]) -> Streams:
            from mcp.client import streamable_http

            # SDK 2's `streamable_http_client` takes headers through the HTTP client it is given
            # (an `httpx2` client) and yields (read, write); SDK 1's `streamablehttp_client`
            # takes them itself and also yields a session-id getter.
            transport: Any
            if hasattr(streamable_http, "streamable_http_client"):
                import httpx2

                sent = httpx2.Headers({"Accept-Encoding": ACCEPTED_ENCODINGS})
                sent.update(headers or {})  # the caller's own, in any case, win
                client = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=sent,
                        auth=noting_failures(auth, refusal.failed),
                        event_hooks={"response": [refusal.note, bounding()]},
                        # Reads may wait on a response stream the server holds open.
                        timeout=httpx2.Timeout(server.connect_timeout, read=_STREAM_READ_TIMEOUT),
                    )
                )
                transport = streamable_http.streamable_http_client(
                    url, http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
                )
            else:  # pragma: no cover - SDK 1
                transport = streamable_http.streamablehttp_client(  # type: ignore[attr-defined]
                    url, headers=dict(headers or {}), auth=auth
                )
            streams = await stack.enter_async_context(transport)
            return streams[0], streams[1]

        server = cls(connect, label=redactor.replace(url), **options)
        server._redactor = redactor
        server._refusal, server._authorizing = refusal, auth is not None
        redactor.watch_logs()
        if auth is not None:
            watch_tokens(auth, server._more_secrets)
            accept_legacy_issuer(auth)
        return server

    def _more_secrets(self, secrets: Iterable[str | None]) -> None:
        """Keep `secrets` (tokens an authorization flow obtained) out of everything shown."""
        redactor = self._redactor.with_secrets(secrets)
        if redactor is not self._redactor:
            self._redactor = redactor
            redactor.watch_logs()

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

        self._start(Connection[MCPTool](live, "sync", portal=portal), close)
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
        self._start(
            Connection[MCPTool](live, "async", loop=asyncio.get_running_loop()), stack.aclose
        )
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

    def _start(self, connection: Connection[MCPTool], close: Callable[[], Any]) -> None:
        self._connection, self._exit = connection, close

    def _not_connected(self, exc: BaseException, mode: Literal["sync", "async"]) -> None:
        """Enter an optional server that failed to connect with no tools; raise for another."""
        exc = self._explain(exc)  # over HTTP: the authorization refusal it stands for
        if self._stderr is not None and _did_not_start(exc):
            # Not a traceback through the SDK's task groups: the command and what it wrote.
            exc = self._stderr.start_error(self.label, exc)
        if self.required or not isinstance(exc, Exception):
            raise self._redactor.clean(exc)
        logger.warning(
            "MCP server %s did not connect; continuing without its tools: %s",
            self.label,
            describe(exc),
        )
        connection = Connection[MCPTool](None, mode, closed_reason="the MCP server did not connect")
        self._start(connection, lambda: None)

    async def _usable_tools(self, listing: list[dict[str, Any]], *, tasks: bool) -> list[MCPTool]:
        """A tool for each one listed, except those whose name a provider would refuse, whose
        `inputSchema` is refused, whose name the listing repeats, or that can only be called as
        a task when the server takes none (`tasks`): each of those is skipped with a warning, so
        that it does not cost the server's other tools.

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
                tool = MCPTool(self, listed, tasks=tasks)
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

    def _stop(self) -> tuple[Connection[MCPTool] | None, Callable[[], Any] | None]:
        connection, close = self._connection, self._exit
        if connection is not None:
            connection.closed_reason = "the MCP session is closed"
        self._connection, self._exit = None, None
        return connection, close

    def _check_not_entered(self) -> None:
        if self._connection is not None:
            raise RuntimeError(f"{self!r} is already entered")

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


class MCPTool(DeclaredTool):
    """One tool of an entered `MCPServer`; it satisfies `ToolLike`.

    Its specification comes from the server's listing (name, description, `inputSchema`);
    arguments are validated against that schema locally, so invalid ones never reach the server.

    A tool the server lists as task-only (`execution.taskSupport: "required"`) is called as a
    task (`as_task`), when the server takes `tools/call` as one (`tasks`).

    Raises:
        ValueError: The name (with the server's `tool_prefix`) is one providers refuse, the
            `inputSchema` is refused, or the tool can only be called as a task and the server
            takes none.
    """

    def __init__(
        self, server: MCPServer, listed: Mapping[str, Any], *, tasks: bool = False
    ) -> None:
        self.server = server
        self.remote_name: str = listed["name"]
        """The name the server knows the tool by (without `tool_prefix`)."""
        execution = listed.get("execution")
        self.as_task = isinstance(execution, Mapping) and execution.get("taskSupport") == "required"
        """Whether its calls are sent as tasks (the tasks extension)."""
        if self.as_task and not tasks:
            raise ValueError(
                "it can only be called as a task (execution.taskSupport is 'required'), and "
                "the server does not say it takes tools/call as one"
            )
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
    def trusted_annotations(self) -> ToolAnnotations | None:
        """`annotations` when the server is `trusted`, else `None` (its hints are not taken:
        a `CallRule` on an annotation reads MCP's defaults)."""
        return self._specification.annotations if self.server.trusted else None

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


def _did_not_start(exc: BaseException) -> bool:
    """Whether a stdio server's connection failed as a process that could not be run, or that
    ended before it initialized (not one that answered with an error, nor a timeout)."""
    if isinstance(exc, TimeoutError) or not isinstance(exc, Exception):
        return False
    return isinstance(exc, OSError) or is_connection_lost(exc)
