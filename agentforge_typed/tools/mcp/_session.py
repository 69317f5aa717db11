"""What an `MCPServer` asks of one MCP session through the SDK: the protocol revision agreed, the
tools listed, a tool called (with the answers of the stateless revision), and how the SDK's
failures read."""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._bounded import is_too_large
from ._questions import Resend
from ._results import own_output_validation

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "CONNECTION_CLOSED",
    "MCPAuthorizationError",
    "Refusal",
    "Revision",
    "announces_listen",
    "call_tool",
    "describe",
    "is_connection_lost",
    "list_tools",
    "negotiate",
    "open_session",
    "single",
]

logger = logging.getLogger("agentforge_typed.mcp")


class MCPAuthorizationError(PermissionError):
    """An HTTP MCP server refused this client: it answered HTTP 401 (authorization needed, or
    the credentials were refused) or 403 (the credentials do not allow it, e.g. a scope they
    lack), or the `auth=` flow its 401 set off failed (the protected resource metadata names
    another resource, the authorization server's metadata another issuer, a token request was
    refused...). Raised on entering; a call refused so is an error result saying the same.

    Attributes:
        server: The server's label (its URL, secrets redacted).
        status: The HTTP status, 401 or 403.
    """

    def __init__(self, message: str, *, server: str, status: int) -> None:
        super().__init__(message)
        self.server = server
        self.status = status


@dataclass
class Refusal:
    """The HTTP 401 or 403 a server answered last (cleared by a later success), noted by an
    `httpx2` response hook: the SDK turns it into a bare `Server returned an error response`."""

    status: int | None = None
    challenge: dict[str, str] = field(default_factory=dict)
    """The `WWW-Authenticate` challenge's `error` and `scope`, if given (each cut to
    `_MAX_PARAMETER` characters)."""
    flow_failures: int = 0
    """How many times the `auth=` flow failed (each ends the session's transport)."""
    flow_error: BaseException | None = None
    """Its last failure."""

    def failed(self, exc: BaseException) -> None:
        self.flow_failures += 1
        self.flow_error = exc

    async def note(self, response: Any) -> None:
        status = response.status_code
        if status in (401, 403):
            # The HTTP client bounds the header; each value is read up to `_MAX_PARAMETER`.
            header = response.headers.get("www-authenticate", "")
            given: dict[str, str] = {}
            for name, value in _CHALLENGE_PARAMETER.findall(header):
                given.setdefault(name, value)
            self.status = status
            self.challenge = {name: given[name] for name in ("error", "scope") if name in given}
        elif status < 400:
            self.status = None

    def explain(self, exc: BaseException, label: str, *, authorizing: bool) -> BaseException:
        """`exc`, or the `MCPAuthorizationError` it stands for when the server's last answer
        was a refusal (`authorizing`: the server has an `auth=` flow, which did not satisfy it)."""
        from mcp.client.auth import OAuthFlowError

        status = self.status
        if is_too_large(exc):  # met outside a call (entering, an authorization flow)
            too_large = ConnectionError(f"MCP server {label!r}: {exc}")
            too_large.__cause__ = exc
            return too_large
        if isinstance(exc, OAuthFlowError):
            message = f"MCP server {label!r}: authorization failed: {describe(exc)}"
            failed = MCPAuthorizationError(message, server=label, status=status or 401)
            failed.__cause__ = exc
            return failed
        error = getattr(exc, "error", None)
        if status is None or getattr(error, "message", None) != _ERROR_RESPONSE:
            return exc
        said = ", ".join(f"{name}={value!r}" for name, value in self.challenge.items())
        said = f" ({said})" if said else ""
        if status == 401 and not authorizing:
            hint = (
                "it requires authorization: pass auth= (e.g. the MCP SDK's "
                "OAuthClientProvider) or credentials in headers="
            )
        elif status == 401:
            hint = "it refused the credentials the authorization flow obtained"
        else:
            hint = "the credentials do not allow this request"
        reason = "Unauthorized" if status == 401 else "Forbidden"
        message = f"MCP server {label!r} answered HTTP {status} {reason}{said}: {hint}"
        return MCPAuthorizationError(message, server=label, status=status)


_ERROR_RESPONSE = "Server returned an error response"
"""What the SDK's streamable HTTP client makes of an HTTP error status."""
_MAX_PARAMETER = 200
_CHALLENGE_PARAMETER = re.compile(rf'(?<![\w-])(error|scope)="([^"]{{0,{_MAX_PARAMETER}}})')
"""The parameters quoted, by name: a pattern of any name before `=` would backtrack
quadratically over a long run of word characters (a hostile challenge)."""

Revision = Literal["newest", "handshake"]
URL_ELICITATION_REQUIRED = -32042
CONNECTION_CLOSED = -32000
"""JSON-RPC error code the SDK raises for requests on a closed connection."""


def open_session(read: Any, write: Any, **callbacks: Any) -> ClientSession:
    """A `ClientSession` on the transport's streams that names this library as its client
    (`clientInfo`); with an elicitation callback, it offers form and URL-mode questions."""
    from importlib.metadata import PackageNotFoundError, version

    from mcp.types import Implementation

    try:
        release = version("agentforge-typed")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout
        release = "0"
    info = Implementation(name="agentforge-typed", version=release)
    from mcp import ClientSession

    return ClientSession(read, write, client_info=info, **callbacks)


async def negotiate(session: ClientSession, revision: Revision) -> None:
    """Agree on a protocol revision with the server.

    `"newest"` probes `server/discover`, the stateless revision's entry (2026-07-28 in SDK 2.3),
    and adopts the newest revision both sides list; a server that does not answer it with one
    (it does not know the method, or lists only revisions of the handshake era) gets the
    `initialize` handshake instead. One that answered the probe after it timed out (a server
    slow to start) refuses the handshake, and is probed again. `"handshake"`, and SDK releases
    without `discover`, go straight to the handshake.
    """
    discover = getattr(session, "discover", None)
    if revision != "newest" or discover is None:
        await session.initialize()
        return
    from mcp.shared.exceptions import MCPError
    from mcp.types import REQUEST_TIMEOUT, UNSUPPORTED_PROTOCOL_VERSION
    from pydantic import ValidationError

    try:
        await discover()
        return
    except (MCPError, ValidationError, RuntimeError) as exc:
        timed_out = isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT
        logger.debug("MCP server: server/discover refused (%r); using initialize", exc)
    try:
        await session.initialize()
    except MCPError as exc:
        # A server still starting when the probe timed out (the SDK waits 10 s) answered it
        # late: the connection now serves the stateless revision and refuses the handshake.
        if not (timed_out and exc.code == UNSUPPORTED_PROTOCOL_VERSION):
            raise
        logger.debug("MCP server: answered server/discover late; asking again")
        await discover()


async def call_tool(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    *,
    progress: Any,
    meta: Any,
    resend: Resend | None,
) -> dict[str, Any]:
    """One `tools/call`, with the answers `resend` carries; its result in wire form (camelCase).

    An `input_required` result comes back as such where the SDK knows the stateless revision;
    an older SDK never sees one (it only speaks the handshake).
    """
    keywords: dict[str, Any] = {"progress_callback": progress, "meta": meta}
    if _knows_input_required():
        keywords["allow_input_required"] = True
        if resend is not None and (resend.responses or resend.state is not None):
            from mcp.types import ElicitResult

            keywords["input_responses"] = {
                key: ElicitResult.model_validate(response)
                for key, response in resend.responses.items()
            }
            keywords["request_state"] = resend.state
    result = await session.call_tool(name, arguments, **keywords)
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True)
    return dumped


@functools.cache
def _knows_input_required() -> bool:
    try:
        from mcp.types import InputRequiredResult  # noqa: F401
    except ImportError:  # pragma: no cover - SDK before the stateless revision
        return False
    return True


async def list_tools(session: ClientSession, most: int, label: str) -> list[dict[str, Any]]:
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


def announces_listen(session: ClientSession) -> bool:
    """Whether the session speaks the stateless revision (it answered `server/discover`) and the
    server says its tool list may change: then a `subscriptions/listen` stream carries that."""
    if getattr(session, "discover_result", None) is None:
        return False
    capabilities = session.server_capabilities
    tools = capabilities.tools if capabilities is not None else None
    return tools is not None and bool(tools.list_changed)


def is_connection_lost(exc: Exception) -> bool:
    import anyio

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return True
    error = getattr(exc, "error", None)  # the SDK's `MCPError` / `McpError` carry `ErrorData`
    return getattr(error, "code", None) == CONNECTION_CLOSED


def url_required(exc: Exception) -> Any:
    """The error data of a call the server failed with `URLElicitationRequired` (-32042: URL-mode
    questions to go through first), or `None` for any other failure."""
    error = getattr(exc, "error", None)
    if getattr(error, "code", None) != URL_ELICITATION_REQUIRED:
        return None
    return getattr(error, "data", None) or {}


def single(exc: BaseException) -> BaseException:
    """The one exception inside the task-group wrappers of the transports, or `exc` itself."""
    while (inner := getattr(exc, "exceptions", None)) and len(inner) == 1:
        exc = inner[0]
    return exc


def describe(exc: BaseException) -> str:
    """`Type: message`, or the type alone."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
