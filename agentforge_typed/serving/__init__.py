"""Serving typed tools over MCP: one collection, every client that speaks the protocol.

Requires the `serve` extra (`pip install "agentforge-typed[serve]"`: the MCP SDK, Starlette and
uvicorn). The modules:

- `_server`: `ToolServer`, on the SDK's low-level `Server`: `tools/list` and `tools/call`, deps,
  bounds, approvals.
- `_catalog`: what is served, each tool's declaration (input and output schemas, annotations).
- `_results`: a tool's result as a `CallToolResult` (content blocks, structured content).
- `_approval`: asking the client before a call that needs approval; `_questions`: the questions
  a tool asks its client (`ask_client`, `ask_client_model`).
- `_notify`: progress and log records sent while a call runs.
- `_stdio` and `_http`: the transports, bounded.

The command line serves a module's tools the same way: `agentforge-typed mcp TARGET`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from .. import _lazy

if TYPE_CHECKING:
    from ._http import (
        DEFAULT_HOST,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_MAX_SESSIONS,
        DEFAULT_PORT,
        DEFAULT_SESSION_IDLE_TIMEOUT,
        HttpOptions,
    )
    from ._notify import TOOL_LOGGER
    from ._questions import CannotAskError, ask_client, ask_client_model
    from ._server import (
        DEFAULT_APPROVAL_TIMEOUT,
        DEFAULT_CALL_TIMEOUT,
        DEFAULT_MAX_CONCURRENT_CALLS,
        DEFAULT_MAX_REQUEST_BYTES,
        DepsFactory,
        DepsScope,
        ToolServer,
        ToolServerOptions,
    )

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_PORT",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "TOOL_LOGGER",
    "TRANSPORTS",
    "CannotAskError",
    "DepsFactory",
    "DepsScope",
    "HttpOptions",
    "ToolServer",
    "ToolServerOptions",
    "ask_client",
    "ask_client_model",
    "serve_mcp",
]

TRANSPORTS = ("stdio", "http")
"""The transports a `ToolServer` serves on."""

_HOMES = {
    "DEFAULT_APPROVAL_TIMEOUT": "._server",
    "DEFAULT_CALL_TIMEOUT": "._server",
    "DEFAULT_HOST": "._http",
    "DEFAULT_MAX_CONCURRENT_CALLS": "._server",
    "DEFAULT_MAX_CONNECTIONS": "._http",
    "DEFAULT_MAX_REQUEST_BYTES": "._server",
    "DEFAULT_MAX_SESSIONS": "._http",
    "DEFAULT_PORT": "._http",
    "DEFAULT_SESSION_IDLE_TIMEOUT": "._http",
    "CannotAskError": "._questions",
    "DepsFactory": "._server",
    "DepsScope": "._server",
    "HttpOptions": "._http",
    "TOOL_LOGGER": "._notify",
    "ToolServer": "._server",
    "ToolServerOptions": "._server",
    "ask_client": "._questions",
    "ask_client_model": "._questions",
}


def serve_mcp(
    tools: object,
    *,
    http: bool = False,
    deps: Callable[[], Any] | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    **options: Unpack[ToolServerOptions],
) -> None:
    """Serve `tools` over MCP until the client leaves (stdio) or the process is interrupted
    (HTTP): `serve_mcp([get_weather])` in a script a desktop client starts.

    Args:
        tools: What `ToolServer` takes: a `ToolService`, tools, functions, an entered
            `MCPServer`, or a list of them.
        http: Serve streamable HTTP at `http://HOST:PORT/mcp` rather than stdio.
        deps: Makes what tools receive as `ToolContext.deps` (see `ToolServer`).
        host: The address to bind (HTTP; default the loopback).
        port: The port (HTTP).
        token: Require `Authorization: Bearer <token>` (HTTP).
        allowed_hosts: `Host` header values accepted besides the loopback's (HTTP).
        **options: See `ToolServerOptions`.
    """
    from ._server import ToolServer

    server = ToolServer(tools, deps=deps, **options)
    if http:
        server.serve_http(host=host, port=port, token=token, allowed_hosts=allowed_hosts)
    else:
        server.serve_stdio()


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _HOMES)
