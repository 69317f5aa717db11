"""Streamable HTTP: the ASGI app serving `/mcp`, and running it under uvicorn.

The SDK's streamable HTTP transport, stateful (a session per `initialize`, answers on SSE
streams, so that a call can ask its client a question and report progress on the way) and also
serving the stateless revision's requests. Around it:

- DNS-rebinding protection, always on: the `Host` header must name the loopback (any port) or a
  host the server was told of (`allowed_hosts`, or the `host` it binds when that is a name), an
  `Origin` header likewise (421 and 403 otherwise), so that a web page cannot reach a local
  server through a name it controls.
- A bearer token (`token=`): every request without `Authorization: Bearer <token>` is refused
  with 401, compared in constant time. Bound to anything but the loopback without one, the
  server logs a warning: anyone who can reach the port can call the tools.
- Bodies over `max_request_bytes` are refused with 413 before they are parsed; sessions are
  capped (`max_sessions`, 503 past it) and closed after `session_idle_timeout` idle seconds;
  uvicorn takes at most `max_connections` connections at once (503 past it).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from typing_extensions import TypedDict, Unpack

from .._transport._asgi import ASGIApp, Receive, Scope, Send, is_loopback
from ..tools._base import check_options

if TYPE_CHECKING:
    from starlette.applications import Starlette


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_PORT",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "HttpOptions",
    "http_app",
    "is_loopback",
    "serve_http",
]

logger = logging.getLogger("agentforge_typed.serving")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_SESSIONS = 1000
"""The most HTTP sessions open at once; an `initialize` past it is refused with 503."""
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
"""Seconds an HTTP session may stay idle before it is closed."""
DEFAULT_MAX_CONNECTIONS = 200
"""The most HTTP connections uvicorn serves at once; past it, 503."""


class HttpOptions(TypedDict, total=False):
    """The keyword options of `ToolServer.http_app` and `serve_http` (`host`, `port` and
    `max_connections` for the latter only)."""

    host: str
    """The address to bind (default `127.0.0.1`, the loopback); it also names a `Host` header
    value accepted besides the loopback's."""
    port: int
    """The port (default 8765; 0 picks a free one)."""
    token: str | None
    """Require `Authorization: Bearer <token>` on every request (default `None`: none)."""
    allowed_hosts: Sequence[str] | None
    """`Host` header values accepted besides the loopback's: `name:port`, or `name:*` for any
    port (default: the `host` bound, when it is a name or an address other than a wildcard)."""
    max_sessions: int
    """The most sessions open at once (default 1000)."""
    session_idle_timeout: float
    """Seconds an idle session lives (default 600)."""
    max_connections: int
    """The most connections served at once (default 200)."""
    on_ready: Callable[[str], None] | None
    """Called with the endpoint's URL (`http://HOST:PORT/mcp`) once the server listens."""


_APP_OPTIONS = ("host", "token", "allowed_hosts", "max_sessions", "session_idle_timeout")


class Served(Protocol):
    """What the transport reads of the `ToolServer` it serves."""

    sdk_server: Any
    """The SDK's low-level `Server`, whose streamable HTTP app this transport runs."""
    max_request_bytes: int


def _security(host: str, allowed_hosts: Sequence[str] | None) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    extra = list(allowed_hosts or ())
    if allowed_hosts is None and not is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        extra = [f"[{host}]:*" if ":" in host else f"{host}:*"]
    for allowed in extra:
        hosts.append(allowed)
        origins += [f"http://{allowed}", f"https://{allowed}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class _Bearer:
    """Refuses every HTTP request that does not carry the bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Unauthorized"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="mcp"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(server: Served, **options: Unpack[HttpOptions]) -> Starlette:
    """The Starlette app serving `server` at `/mcp` (see `HttpOptions` and the module).

    Its lifespan runs the SDK's session manager: mounted in another app, run that app's lifespan
    through it (see the serving guide)."""
    check_options(options, HttpOptions, "http_app")
    unknown = set(options) - set(_APP_OPTIONS)
    if unknown:
        raise TypeError(f"http_app takes no {', '.join(sorted(unknown))} (serve_http does)")
    host = options.get("host", DEFAULT_HOST)
    app: Starlette = server.sdk_server.streamable_http_app(
        streamable_http_path="/mcp",
        max_request_body_size=server.max_request_bytes,
        session_idle_timeout=options.get("session_idle_timeout", DEFAULT_SESSION_IDLE_TIMEOUT),
        max_sessions=options.get("max_sessions", DEFAULT_MAX_SESSIONS),
        transport_security=_security(host, options.get("allowed_hosts")),
        host=host,
    )
    token = options.get("token")
    if token is not None:
        if not token:
            raise ValueError("token must not be empty")
        app.add_middleware(_Bearer, token=token)
    return app


async def serve_http(server: Served, **options: Unpack[HttpOptions]) -> None:
    """Serve `server` under uvicorn until cancelled (see `HttpOptions`)."""
    import anyio
    import uvicorn

    check_options(options, HttpOptions, "serve_http")
    host = options.get("host", DEFAULT_HOST)
    port = options.get("port", DEFAULT_PORT)
    if not is_loopback(host) and options.get("token") is None:
        logger.warning(
            "serving on %s without a token: anyone who can reach this address can call the tools "
            "(give a bearer token: token=..., or --token-env VAR)",
            host,
        )
    app = http_app(
        server,
        host=host,
        token=options.get("token"),
        allowed_hosts=options.get("allowed_hosts"),
        max_sessions=options.get("max_sessions", DEFAULT_MAX_SESSIONS),
        session_idle_timeout=options.get("session_idle_timeout", DEFAULT_SESSION_IDLE_TIMEOUT),
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        limit_concurrency=options.get("max_connections", DEFAULT_MAX_CONNECTIONS),
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    runner = uvicorn.Server(config)
    on_ready = options.get("on_ready")
    finished = anyio.Event()

    async def run() -> None:
        # Shielded: a cancelled caller asks uvicorn to stop (below), which then closes its
        # connections and runs the app's shutdown rather than being torn down mid-request.
        with anyio.CancelScope(shield=True):
            try:
                await runner.serve()
            finally:
                finished.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        try:
            # uvicorn says it listens with a flag, not an event.
            while not runner.started and not finished.is_set():  # noqa: ASYNC110
                await anyio.sleep(0.01)
            if runner.started and on_ready is not None:
                bound = runner.servers[0].sockets[0].getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                on_ready(f"http://{shown}:{bound[1]}/mcp")
            await finished.wait()
        finally:
            runner.should_exit = True
