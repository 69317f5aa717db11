"""The OAuth flow end to end over real HTTP: an MCP server over streamable HTTP that requires
bearer tokens, and an authorization server issuing short-lived access tokens with refresh
tokens, both started here on 127.0.0.1; `MCPServer.http(auth=<the SDK's OAuthClientProvider>)`
authorizes through a `LocalRedirect`, keeps the tokens in a `StoreTokens`, refreshes an expired
access token with its refresh token (in the same process, and after a restart), falls back to a
new authorization when the refresh is refused, asks for more scope on a 403
`insufficient_scope`, and never shows a token in a result, an error or a log record.

(The official conformance suite's authorization server never issues refresh tokens: its
scenarios run in test_mcp_conformance_js.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

pytest.importorskip("mcp")

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.server.lowlevel import Server
from mcp.shared.auth import OAuthClientMetadata
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
from pydantic import AnyUrl
from test_mcp import CONTEXT, by_name, call

from agentforge_typed import MCPServer
from agentforge_typed.stores import SQLiteStore
from agentforge_typed.tools import LocalRedirect, StoreTokens

LIFETIME = 2
"""Seconds an access token lives."""
READ, WRITE = "notes:read", "notes:write"


@dataclass
class Authority:
    """The authorization server's books, and what it saw."""

    issuer: str = ""
    access: dict[str, tuple[set[str], float]] = field(default_factory=dict)
    """Access token: its scopes and when it expires."""
    refresh: dict[str, set[str]] = field(default_factory=dict)
    """Live refresh tokens and their scopes (a refresh rotates them)."""
    codes: dict[str, set[str]] = field(default_factory=dict)
    clients: dict[str, str] = field(default_factory=dict)
    """Registered client id: its secret."""
    grants: list[str] = field(default_factory=list)
    """The `grant_type` of every token request, refused or not."""
    authorizations: list[str] = field(default_factory=list)
    """The `scope` of every authorization request."""
    refuse: bool = False
    """Whether the person refuses the next authorization."""
    named: str | None = None
    """The issuer its metadata names, when not its own."""
    seen: list[str] = field(default_factory=list)
    """The paths the MCP server was asked for, other than its endpoint."""

    def issued(self) -> list[str]:
        """Every secret it gave out: tokens and client secrets."""
        return [*self.access, *self.refresh, *self.clients.values()]

    def scopes(self, token: str) -> set[str] | None:
        found = self.access.get(token)
        return None if found is None or found[1] < time.time() else found[0]

    def tokens(self, scopes: set[str]) -> dict[str, Any]:
        access, refresh = "at-" + secrets.token_hex(12), "rt-" + secrets.token_hex(12)
        self.access[access] = (scopes, time.time() + LIFETIME)
        self.refresh[refresh] = scopes
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": LIFETIME,
            "refresh_token": refresh,
            "scope": " ".join(sorted(scopes)),
        }


def authorization_server(books: Authority) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, RedirectResponse, Response
    from starlette.routing import Route

    async def metadata(request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": books.named or books.issuer,
                "authorization_endpoint": f"{books.issuer}/authorize",
                "token_endpoint": f"{books.issuer}/token",
                "registration_endpoint": f"{books.issuer}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
            }
        )

    async def register(request: Request) -> Response:
        asked = await request.json()
        client_id, secret = "client-" + secrets.token_hex(4), "cs-" + secrets.token_hex(12)
        books.clients[client_id] = secret
        answer = {**asked, "client_id": client_id, "client_secret": secret}
        answer["token_endpoint_auth_method"] = "client_secret_post"
        return JSONResponse(answer, status_code=201)

    async def authorize(request: Request) -> Response:
        query = request.query_params
        books.authorizations.append(query.get("scope", ""))
        back: dict[str, str] = {"state": query["state"]}
        if books.refuse:
            back["error"] = "access_denied"
        else:
            code = secrets.token_hex(8)
            books.codes[code] = set(query.get("scope", "").split())
            back["code"] = code
        return RedirectResponse(f"{query['redirect_uri']}?{urlencode(back)}", status_code=302)

    async def token(request: Request) -> Response:
        form = await request.form()
        books.grants.append(str(form.get("grant_type")))
        if books.clients.get(str(form.get("client_id"))) != form.get("client_secret"):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") == "authorization_code":
            scopes = books.codes.pop(str(form.get("code")), None)
        elif form.get("grant_type") == "refresh_token":
            scopes = books.refresh.pop(str(form.get("refresh_token")), None)
        else:
            scopes = None
        if scopes is None:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(books.tokens(scopes))

    prefix = urlsplit(books.issuer).path  # the routes under the issuer's path
    return Starlette(
        routes=[
            Route(f"{prefix}/.well-known/oauth-authorization-server", metadata),
            Route(f"/.well-known/oauth-authorization-server{prefix}", metadata),
            Route("/.well-known/oauth-authorization-server", metadata),
            Route(f"{prefix}/register", register, methods=["POST"]),
            Route(f"{prefix}/authorize", authorize),
            Route(f"{prefix}/token", token, methods=["POST"]),
        ]
    )


def resource_server(books: Authority, url: str, legacy: Any = None) -> Any:
    """The MCP server, behind a bearer check: `read` needs `notes:read` (it echoes the token it
    was sent, as a careless server might), `publish` also `notes:write` (a 403
    `insufficient_scope` otherwise). With `legacy` (its authorization server's app), a
    2025-03-26 server: no protected resource metadata, the authorization server on its origin."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        schema = {"type": "object"}
        return ListToolsResult(
            tools=[
                Tool(name="read", input_schema=schema),
                Tool(name="publish", input_schema=schema),
            ]
        )

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        sent = context.request.headers.get("authorization", "") if context.request else ""
        said = f"{params.name} done with {sent}"
        return CallToolResult(content=[TextContent(type="text", text=said)])

    prm_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")

    async def prm(request: Any) -> Any:
        return JSONResponse(
            {"resource": url, "authorization_servers": [books.issuer], "scopes_supported": [READ]}
        )

    served = Server("notes", on_list_tools=list_tools, on_call_tool=call_tool)
    app = served.streamable_http_app(
        custom_starlette_routes=[]
        if legacy is not None
        else [Route("/.well-known/oauth-protected-resource/mcp", prm)]
    )

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            if scope["type"] == "http":
                books.seen.append(scope["path"])
            routed = legacy is not None and scope["type"] == "http"
            await (legacy if routed else app)(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        token = headers.get("authorization", "").removeprefix("Bearer ")
        granted = books.scopes(token)
        needed = {READ}
        if body and json.loads(body).get("params", {}).get("name") == "publish":
            needed = {READ, WRITE}
        challenge = None
        if granted is None:
            challenge = (401, "invalid_token", READ)
        elif not needed <= granted:
            challenge = (403, "insufficient_scope", " ".join(sorted(needed)))
        if challenge is not None:
            status, error, scopes = challenge
            value = f'Bearer error="{error}", scope="{scopes}"'
            if legacy is None:
                value += f', resource_metadata="{prm_url}"'
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"www-authenticate", value.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve(app: Any, port: int) -> tuple[Any, threading.Thread]:
    import anyio
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=anyio.run, args=(runner.serve,), daemon=True)
    thread.start()
    while not runner.started:
        threading.Event().wait(0.02)
    return runner, thread


@dataclass
class Notes:
    url: str
    books: Authority


@pytest.fixture
def notes() -> Iterator[Notes]:
    """The authorization server and the MCP server, on ports of 127.0.0.1."""
    books = Authority()
    as_port, rs_port = free_port(), free_port()
    books.issuer = f"http://127.0.0.1:{as_port}/as"
    url = f"http://127.0.0.1:{rs_port}/mcp"
    running = [
        serve(authorization_server(books), as_port),
        serve(resource_server(books, url), rs_port),
    ]
    try:
        yield Notes(url, books)
    finally:
        for runner, thread in running:
            runner.should_exit = True
            thread.join(10)


async def browser(url: str) -> None:
    """The person, approving (or refusing) at once: the authorization server redirects their
    browser to the `LocalRedirect`."""
    async with httpx2.AsyncClient(follow_redirects=True) as client:
        await client.get(url)


def provider(notes: Notes, tokens: StoreTokens) -> OAuthClientProvider:
    redirect = LocalRedirect(show=browser, timeout=10)
    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl(redirect.redirect_uri)])
    return OAuthClientProvider(
        notes.url,
        metadata,
        tokens,
        redirect_handler=redirect.open,
        callback_handler=redirect.callback,
    )


def never_shown(books: Authority, *texts: str) -> None:
    issued = books.issued()
    assert issued
    for text in texts:
        for secret in issued:
            assert secret not in text


async def test_an_expired_access_token_is_refreshed_and_the_new_tokens_stored(
    notes: Notes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "app.db")
    tokens = StoreTokens(store, "notes:alice")
    books = notes.books
    with caplog.at_level(logging.DEBUG):
        async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
            first = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
            assert books.grants[0] == "authorization_code" and len(books.authorizations) == 1
            await asyncio.sleep(LIFETIME + 0.5)  # the access token expires
            second = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    # (A loaded machine may have refreshed once more already, while entering.)
    assert books.grants[0] == "authorization_code" and set(books.grants[1:]) == {"refresh_token"}
    assert len(books.authorizations) == 1  # no one was asked again
    assert (first.text, second.text) == ("read done with Bearer [redacted]",) * 2
    kept = await tokens.get_tokens()
    assert kept is not None and books.scopes(kept.access_token) == {READ}
    assert kept.refresh_token in books.refresh  # the rotated one
    never_shown(books, first.text, second.text, caplog.text)

    # Another process on the database: it loads the live token, sends it, and keeps it secret.
    other = StoreTokens(SQLiteStore(tmp_path / "app.db"), "notes:alice")
    async with MCPServer.http(notes.url, auth=provider(notes, other)) as server:
        loaded = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    assert loaded.text == "read done with Bearer [redacted]"
    assert len(books.authorizations) == 1

    # After a restart: a new flow loads the registration, the expired token and where it came
    # from: it refreshes the token at the authorization server's token endpoint, asking no one.
    await asyncio.sleep(LIFETIME + 0.5)
    restarted = StoreTokens(SQLiteStore(tmp_path / "app.db"), "notes:alice")
    async with MCPServer.http(notes.url, auth=provider(notes, restarted)) as server:
        third = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    assert third.text == "read done with Bearer [redacted]"
    assert books.grants[-1] == "refresh_token"
    assert len(books.authorizations) == 1 and len(books.clients) == 1
    assert books.seen == ["/.well-known/oauth-protected-resource/mcp"]  # discovered once


@pytest.mark.parametrize("kept", ["another server", "unreadable", "none"])
async def test_a_loaded_token_without_its_discovery_is_used_until_refused(
    notes: Notes, kept: str, caplog: pytest.LogCaptureFixture
) -> None:
    from agentforge_typed.stores import MemoryStore

    books = notes.books
    tokens = StoreTokens(MemoryStore(), "notes:alice")
    async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
        await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    stored = await tokens._recall_discovery()
    assert stored is not None
    if kept == "another server":
        await tokens._remember_discovery(stored.replace(b"/mcp", b"/other"))
    elif kept == "unreadable":
        await tokens._remember_discovery(
            stored.replace(b'"token_endpoint":"', b'"token_endpoint":"x')
        )
    else:
        await tokens._remember_discovery(None)
    await asyncio.sleep(LIFETIME + 0.5)
    caplog.clear()
    async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
        again = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    assert again.text == "read done with Bearer [redacted]"
    # The SDK's own way: the expired token sent, refused, and a new authorization.
    assert books.grants[-1] == "authorization_code" and len(books.authorizations) == 2
    assert "refresh_token" not in books.grants
    warned = [r.getMessage() for r in caplog.records if r.name == "agentforge_typed.mcp"]
    if kept == "unreadable":
        assert warned == [
            "the stored discovery of an MCP server's authorization does not read "
            "(ValidationError); ignored: the flow discovers anew"
        ]
    else:
        assert warned == []


async def test_a_refused_refresh_falls_back_to_a_new_authorization(
    notes: Notes, caplog: pytest.LogCaptureFixture
) -> None:
    from agentforge_typed.stores import MemoryStore

    books = notes.books
    tokens = StoreTokens(MemoryStore(), "notes:alice")
    with caplog.at_level(logging.DEBUG):
        async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
            await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
            books.refresh.clear()  # revoked
            await asyncio.sleep(LIFETIME + 0.5)
            again = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
            assert books.grants[-2:] == ["refresh_token", "authorization_code"]
            assert len(books.authorizations) == 2  # the person was asked again
            assert again.text == "read done with Bearer [redacted]"

    never_shown(books, again.text, caplog.text)


async def test_a_refused_refresh_then_a_refused_authorization_fail_the_call_naming_it(
    notes: Notes,
) -> None:
    from agentforge_typed.stores import MemoryStore

    books = notes.books
    tokens = StoreTokens(MemoryStore(), "notes:alice")
    async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
        await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
        books.refresh.clear()
        books.refuse = True
        await asyncio.sleep(LIFETIME + 0.5)
        failed = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    assert failed.is_error
    assert failed.text == (
        f"Tool `read` failed: MCPAuthorizationError: MCP server {notes.url!r}: authorization "
        "failed: OAuthFlowError: the authorization was refused: access_denied"
    )


async def test_a_403_insufficient_scope_steps_up_to_the_union_of_the_scopes(
    notes: Notes, caplog: pytest.LogCaptureFixture
) -> None:
    from agentforge_typed.stores import MemoryStore

    books = notes.books
    tokens = StoreTokens(MemoryStore(), "notes:alice")
    with caplog.at_level(logging.DEBUG):
        async with MCPServer.http(notes.url, auth=provider(notes, tokens)) as server:
            read = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
            published = await by_name(server)["publish"].aexecute(call("publish", {}), CONTEXT)
    assert books.authorizations == [READ, f"{READ} {WRITE}"]
    assert (read.text, published.text) == (
        "read done with Bearer [redacted]",
        "publish done with Bearer [redacted]",
    )
    kept = await tokens.get_tokens()
    assert kept is not None and books.scopes(kept.access_token) == {READ, WRITE}
    never_shown(books, read.text, published.text, caplog.text)


# -- a 2025-03-26 server: no protected resource metadata -----------------------------------------


@pytest.fixture
def legacy() -> Iterator[Notes]:
    """A 2025-03-26 MCP server: no protected resource metadata, its authorization server on its
    own origin, under `/oauth`, its metadata at the origin's well-known URL."""
    books = Authority()
    port = free_port()
    books.issuer = f"http://127.0.0.1:{port}/oauth"
    url = f"http://127.0.0.1:{port}/mcp"
    runner, thread = serve(resource_server(books, url, authorization_server(books)), port)
    try:
        yield Notes(url, books)
    finally:
        runner.should_exit = True
        thread.join(10)


async def test_a_2025_03_26_server_s_issuer_with_a_path_on_its_origin_is_accepted(
    legacy: Notes,
) -> None:
    from agentforge_typed.stores import MemoryStore

    tokens = StoreTokens(MemoryStore(), "legacy")
    async with MCPServer.http(legacy.url, auth=provider(legacy, tokens)) as server:
        read = await by_name(server)["read"].aexecute(call("read", {}), CONTEXT)
    assert read.text == "read done with Bearer [redacted]"
    assert legacy.books.grants == ["authorization_code"]
    registered = await tokens.get_client_info()
    assert registered is not None and registered.issuer == legacy.books.issuer


async def test_a_2025_03_26_server_naming_an_issuer_on_another_origin_is_refused(
    legacy: Notes,
) -> None:
    from agentforge_typed import MCPAuthorizationError
    from agentforge_typed.stores import MemoryStore

    elsewhere = f"http://127.0.0.1:{free_port()}/oauth"
    legacy.books.named = elsewhere
    origin = legacy.url.removesuffix("/mcp")
    server = MCPServer.http(legacy.url, auth=provider(legacy, StoreTokens(MemoryStore(), "l")))
    with pytest.raises(MCPAuthorizationError) as refused:
        async with server:
            pass
    assert str(refused.value) == (
        f"MCP server {legacy.url!r}: authorization failed: OAuthFlowError: Authorization server "
        f"metadata issuer mismatch: {elsewhere} != {origin}"
    )
    assert legacy.books.authorizations == []


@pytest.mark.parametrize("path", ["/oauth", "/as-other"])
async def test_a_current_server_s_issuer_check_is_unchanged(notes: Notes, path: str) -> None:
    from agentforge_typed import MCPAuthorizationError
    from agentforge_typed.stores import MemoryStore

    # Its protected resource metadata names the issuer; the metadata there names another one on
    # the same origin.
    origin = notes.books.issuer.removesuffix("/as")
    notes.books.named = origin + path
    server = MCPServer.http(notes.url, auth=provider(notes, StoreTokens(MemoryStore(), "n")))
    with pytest.raises(MCPAuthorizationError) as refused:
        async with server:
            pass
    assert str(refused.value).endswith(
        f"OAuthFlowError: Authorization server metadata issuer mismatch: {origin}{path} != "
        f"{notes.books.issuer}"
    )
    # The legacy path's reading ahead never ran: the MCP server was asked for its protected
    # resource metadata alone.
    assert notes.books.seen == ["/.well-known/oauth-protected-resource/mcp"]


ORIGIN = ("http", "127.0.0.1", 8000)


@pytest.mark.parametrize(
    ("status", "body", "named"),
    [
        (200, {"issuer": "http://127.0.0.1:8000/oauth"}, ["http://127.0.0.1:8000/oauth"]),
        (200, {"issuer": "HTTP://127.0.0.1:8000/tenant/1/"}, ["http://127.0.0.1:8000/tenant/1/"]),
        (200, {"issuer": "http://127.0.0.1:8000"}, []),  # the origin itself: the SDK's case
        (200, {"issuer": "http://127.0.0.1:8000/"}, []),
        (200, {"issuer": "http://127.0.0.1:8001/oauth"}, []),  # another port
        (200, {"issuer": "https://127.0.0.1:8000/oauth"}, []),  # another scheme
        (200, {"issuer": "http://evil.example/oauth"}, []),
        (200, {"issuer": "http://127.0.0.1:99999/oauth"}, []),  # no port at all
        (200, {"issuer": 7}, []),
        (200, ["http://127.0.0.1:8000/oauth"], []),
        (200, "not json", []),
        (200, "[" * 60_000, []),  # under the cap, nested deeper than the parser recurses
        (200, {"issuer": "http://127.0.0.1:8000/" + "o" * 70_000}, []),  # over the cap
        (404, {"issuer": "http://127.0.0.1:8000/oauth"}, []),
    ],
)
def test_only_an_issuer_with_a_path_on_the_server_s_origin_is_read_ahead(
    status: int, body: Any, named: list[str]
) -> None:
    from agentforge_typed.tools.mcp._auth import _issuer_on

    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    assert _issuer_on(ORIGIN, httpx2.Response(status, content=content)) == named


def test_a_flow_of_another_kind_is_left_as_it_is_and_a_provider_is_wrapped_once() -> None:
    from agentforge_typed.stores import MemoryStore
    from agentforge_typed.tools.mcp._auth import accept_legacy_issuer

    basic = httpx2.BasicAuth("u", "p")
    accept_legacy_issuer(basic)
    assert "async_auth_flow" not in vars(basic)
    oauth = OAuthClientProvider(
        "http://127.0.0.1:8000/mcp",
        OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")]),
        StoreTokens(MemoryStore(), "n"),
    )
    accept_legacy_issuer(oauth)
    wrapped = vars(oauth)["async_auth_flow"]
    accept_legacy_issuer(oauth)  # a second MCPServer given the same provider
    assert vars(oauth)["async_auth_flow"] is wrapped
    assert oauth._expected_issuer() == "http://127.0.0.1:8000"  # nothing read ahead yet
