"""An MCP server's answers over HTTP are bounded: one message is at most `MAX_MESSAGE_BYTES`,
decoded bytes counted, whether the answer is JSON (which the SDK reads whole) or an SSE event.

The server is a scripted one (`tests/http_server.py`) speaking just enough of the streamable HTTP
transport: the handshake, a listing, and a call, each answer shaped by the test."""

from __future__ import annotations

import gzip
import itertools
import json
import time
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from http_server import Reply, Request, ScriptedServer
from test_mcp import CONTEXT, by_name, call

from agentforge_typed import MCPServer
from agentforge_typed.tools.mcp._bounded import MAX_MESSAGE_BYTES

TOO_LARGE = (
    r"^MCP server '.*': the MCP server's answer is over 16,777,216 bytes \(MAX_MESSAGE_BYTES\)"
)
"""What entering a server says of an answer over the cap: one error naming the server."""

Shape = Callable[[bytes], Reply]
"""How the server sends one JSON-RPC answer (its JSON bytes)."""


def as_json(body: bytes) -> Reply:
    return Reply(200, body, {"content-type": "application/json"})


def gzipped(body: bytes) -> Reply:
    return Reply(
        200, gzip.compress(body), {"content-type": "application/json", "content-encoding": "gzip"}
    )


def deflated(body: bytes) -> Reply:
    headers = {"content-type": "application/json", "content-encoding": "deflate"}
    return Reply(200, zlib.compress(body), headers)


def as_event(body: bytes) -> Reply:
    return Reply(
        200, b"event: message\ndata: " + body + b"\n\n", {"content-type": "text/event-stream"}
    )


def scripted(
    tool_result: Callable[[Any], Reply], shape: Shape = as_json
) -> Callable[[Request], Reply]:
    """An MCP endpoint: the handshake and a listing of one tool, `echo`, answered in `shape`;
    a call answered by `tool_result(id)`."""

    def answer(request: Request) -> Reply:
        if request.method != "POST":
            return Reply(405)
        message = request.json()
        if "id" not in message:
            return Reply(202)  # a notification
        method, id = message["method"], message["id"]
        if method == "tools/call":
            return tool_result(id)
        if method == "initialize":
            result: Any = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            return as_json(json.dumps({"jsonrpc": "2.0", "id": id, "error": error}).encode())
        return shape(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}).encode())

    return answer


def text_result(id: Any, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"jsonrpc": "2.0", "id": id, "result": result}).encode()


def endless(first: bytes) -> Iterable[bytes]:
    return itertools.chain([first], itertools.repeat(b" " * 65_536))


@pytest.mark.parametrize("shape", [as_json, gzipped, deflated, as_event], ids=lambda s: s.__name__)
async def test_answers_under_the_cap_are_read_whatever_their_shape(
    http_server: ScriptedServer, shape: Shape
) -> None:
    big = "é" * 1_500_000  # 3 MB of JSON: over the SDK's own 1 MiB limit on an SSE event
    http_server.route("/mcp", scripted(lambda id: shape(text_result(id, big)), shape))
    async with MCPServer.http(f"{http_server.url}/mcp", connect_timeout=10) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert not result.is_error and result.value == big
    # The client asks only for the encodings it inflates within the cap.
    assert {r.headers["accept-encoding"] for r in http_server.requests} == {"deflate, gzip"}


async def test_the_caller_s_accept_encoding_replaces_the_client_s_whatever_its_case(
    http_server: ScriptedServer,
) -> None:
    http_server.route("/mcp", scripted(lambda id: gzipped(text_result(id, "hi")), gzipped))
    headers = {"accept-encoding": "gzip"}
    async with MCPServer.http(
        f"{http_server.url}/mcp", headers=headers, connect_timeout=10
    ) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert result.value == "hi"
    assert {r.headers.get_list("accept-encoding") == ["gzip"] for r in http_server.requests} == {
        True
    }


@pytest.mark.parametrize(
    "over",
    [
        pytest.param(
            lambda: Reply(200, endless(b"{"), {"content-type": "application/json"}, chunked=True),
            id="endless",
        ),
        pytest.param(lambda: gzipped(b"{" + b" " * (2 * MAX_MESSAGE_BYTES)), id="gzip bomb"),
        pytest.param(lambda: as_json(b" " * (MAX_MESSAGE_BYTES + 1)), id="one byte over"),
    ],
)
async def test_an_answer_over_the_cap_fails_the_call_and_is_not_read(
    http_server: ScriptedServer, over: Callable[[], Reply]
) -> None:
    reply = over()
    http_server.route("/mcp", scripted(lambda id: reply))
    started = time.monotonic()
    async with MCPServer.http(f"{http_server.url}/mcp", connect_timeout=10) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert result.is_error
    assert (
        f"the MCP server's answer is over {MAX_MESSAGE_BYTES:,} bytes (MAX_MESSAGE_BYTES)"
        in result.text
    )
    assert time.monotonic() - started < 10  # refused at the cap, not at a deadline


async def test_an_answer_exactly_at_the_cap_is_read(http_server: ScriptedServer) -> None:
    def exact(id: Any) -> Reply:
        body = text_result(id, "")
        return as_json(body[:-1] + b" " * (MAX_MESSAGE_BYTES - len(body)) + body[-1:])

    http_server.route("/mcp", scripted(exact))
    async with MCPServer.http(f"{http_server.url}/mcp", connect_timeout=10) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert not result.is_error


async def test_an_endless_answer_to_the_handshake_fails_entering_at_once(
    http_server: ScriptedServer,
) -> None:
    http_server.route(
        "/mcp",
        Reply(200, endless(b"{"), {"content-type": "application/json"}, chunked=True),
    )
    started = time.monotonic()
    # The SDK answers the handshake's request with the error (an `MCPError` naming the cap).
    with pytest.raises(Exception, match=r"over 16,777,216 bytes \(MAX_MESSAGE_BYTES\)"):
        async with MCPServer.http(
            f"{http_server.url}/mcp", connect_timeout=10, revision="handshake"
        ):
            pass
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("encoding", "why"),
    [("br", "which the client did not ask for"), ("gzip", "is not gzip")],
)
async def test_an_answer_in_an_encoding_not_inflated_here_is_refused(
    http_server: ScriptedServer, encoding: str, why: str
) -> None:
    headers = {"content-type": "application/json", "content-encoding": encoding}
    http_server.route("/mcp", scripted(lambda id: Reply(200, text_result(id, "hi"), headers)))
    async with MCPServer.http(f"{http_server.url}/mcp", connect_timeout=10) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert result.is_error and why in result.text


@pytest.mark.parametrize("kind", ["application/json", "text/event-stream"])
async def test_an_authorization_flow_s_endless_answer_is_refused_at_the_cap(
    http_server: ScriptedServer, kind: str
) -> None:
    """The SDK's OAuth flow reads each of its answers whole (its protected resource metadata
    here); they come through the same transport, so the same cap ends them."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    from agentforge_typed.tools import MemoryTokens

    url = http_server.url
    challenge = {"www-authenticate": f'Bearer resource_metadata="{url}/prm"'}
    http_server.route("/mcp", Reply(401, b"", challenge))
    metadata = {"content-type": kind}  # an event stream the flow did not ask for is read whole
    http_server.route("/prm", Reply(200, endless(b'{"resource": "'), metadata, chunked=True))
    oauth = OAuthClientProvider(
        f"{url}/mcp",
        OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")]),
        MemoryTokens(),
    )
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=TOO_LARGE):
        async with MCPServer.http(f"{url}/mcp", auth=oauth, connect_timeout=10):
            pass
    assert time.monotonic() - started < 10
    assert [r.path for r in http_server.requests] == ["/mcp", "/prm"]


EVENTS = {"content-type": "text/event-stream"}


async def test_an_endless_answer_to_the_session_s_delete_ends_at_the_cap(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK ends a session with a DELETE and reads its answer whole, whatever it says it is:
    an endless "event stream" there ends at the cap, and leaving the server does not hang."""
    listing = scripted(lambda id: as_json(text_result(id, "hi")))

    def answer(request: Request) -> Reply:
        if request.method == "DELETE":
            return Reply(200, endless(b"data: "), EVENTS, chunked=True)
        reply = listing(request)
        return Reply(reply.status, reply.body, {**reply.headers, "mcp-session-id": "s-1"})

    http_server.route("/mcp", answer)
    async with MCPServer.http(f"{http_server.url}/mcp", connect_timeout=10):
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert [r.method for r in http_server.requests][-1] == "DELETE"
    assert any("over 16,777,216 bytes" in record.getMessage() for record in caplog.records)


async def test_a_redirect_s_endless_body_ends_at_the_cap(http_server: ScriptedServer) -> None:
    """A redirect's body is drained whole by the SDK, "event stream" or not."""
    moved = Reply(307, endless(b"data: "), {"location": "/moved", **EVENTS}, chunked=True)
    http_server.route("/mcp", moved)
    http_server.route("/moved", scripted(lambda id: as_json(text_result(id, "hi"))))
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=TOO_LARGE):
        async with MCPServer.http(
            f"{http_server.url}/mcp", connect_timeout=10, revision="handshake"
        ):
            pass
    assert time.monotonic() - started < 10


async def test_the_environment_s_proxy_is_still_used(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap is a response hook, not a transport of its own: the client keeps the transports
    it makes itself, the proxies `HTTP_PROXY` names among them."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", http_server.url)
    http_server.route("*", scripted(lambda id: as_json(text_result(id, "hi"))))
    async with MCPServer.http("http://mcp.example.invalid/mcp", connect_timeout=10) as server:
        result = await by_name(server)["echo"].aexecute(call("echo", {}), CONTEXT)
    assert result.value == "hi"
    assert {r.path for r in http_server.requests} == {"http://mcp.example.invalid/mcp"}
