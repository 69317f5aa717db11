"""Deadlines, for the tool kinds: every wait of a tool ends within its documented timeout against
a server that is slow on purpose — one that sleeps, drips a byte at a time, or lists more tools
than can be built in time.

A tool body's own wait (`@tool`, `SchemaTool`) is bounded by its `timeout=` option; an
`HttpTool` request by its `timeout` (each phase, and the whole exchange: connecting, the
headers, every redirect, the body); an MCP call by the
server's `timeout`, and entering an MCP server — initializing, listing and building the tools —
by its `connect_timeout`, as is each reconnection to one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib.metadata import version
from typing import Any

import anyio
import httpx
import pytest
from conformance import TOOL, Surface, assert_registered, released
from http_server import Reply, Request, ScriptedServer
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_client_server_memory_streams
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
from mcp_memory import in_memory
from typing_extensions import Unpack

from agentforge_typed import (
    HttpTool,
    MCPServer,
    SchemaTool,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolSpecification,
)
from agentforge_typed.tools import MCPServerOptions, ToolLike

MCP_SDK_1 = version("mcp").startswith("1.")
GIVE_UP = 15.0
"""Seconds after which a slow server stops by itself, so that a missing deadline cannot hang."""
MARGIN = 2.0
"""Seconds a wait may run past its timeout (thread hand-offs, a loaded machine)."""
CONTEXT: ToolContext[Any] = ToolContext(deps=None, tool_call_id="c1", tool_name="t")
CALL = ToolCall(id="c1", name="t", arguments="{}")


async def _timed(run: Callable[[], Awaitable[ToolExecutionResult]]) -> tuple[float, Any]:
    started = time.monotonic()
    result = await run()
    return time.monotonic() - started, result


async def _execute(t: ToolLike, is_async: bool) -> ToolExecutionResult:
    if is_async:
        return await t.aexecute(CALL, CONTEXT)
    return await asyncio.to_thread(t.execute, CALL, CONTEXT)


# --- tool bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("kind", TOOL.each("deadline"))
async def test_a_tool_ends_within_its_timeout(kind: Surface[Any], is_async: bool) -> None:
    """A body, handler or server that never answers (it waits until the test is over): the
    call ends within the kind's `timeout` as a timeout error result."""
    with released() as release:
        built = kind.build(lambda arguments: release.wait(GIVE_UP) and "late", timeout=0.3)
        async with built as slow:
            elapsed, result = await _timed(lambda: _execute(slow, is_async))
    assert result.error_kind == "timeout" and elapsed < 0.3 + MARGIN


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_schema_tool_handler_ends_within_its_timeout(is_async: bool) -> None:
    async def sleeper(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(GIVE_UP)
        return "late"

    spec = ToolSpecification(name="t", description="", parameters={"type": "object"})
    slow = SchemaTool(spec, sleeper, timeout=0.3)
    elapsed, result = await _timed(lambda: _execute(slow, is_async))
    assert result.error_kind == "timeout" and elapsed < 0.3 + MARGIN


# --- HttpTool: a server that drips its body ---------------------------------------------------


def _hop(request: Request) -> Reply:
    """A redirect to the next hop, after 0.4 s."""
    hop = int(request.path.removeprefix("/hop") or 0)
    head = f"HTTP/1.1 302 Found\r\nlocation: /hop{hop + 1}\r\ncontent-length: 0\r\n\r\n"
    return Reply(body=[head.encode()], delay=0.4, raw=True)


@pytest.fixture(scope="module")
def drip() -> Iterator[str]:
    """Answers with a body of one byte every 0.1 s, until the client goes or `GIVE_UP`; at
    `/headers`, with a status line and headers a byte every 0.05 s (no read timeout trips); at
    `/hop<n>`, with a redirect to `/hop<n+1>` after 0.4 s, each well within the read timeout."""
    head = b"HTTP/1.1 200 OK\r\n" + b"x-filler: 1\r\n" * 1000 + b"content-length: 0\r\n\r\n"
    dripped_head = [head[i : i + 1] for i in range(min(len(head), int(GIVE_UP / 0.05)))]
    dripped_body = [b"x"] * int(GIVE_UP / 0.1)
    with ScriptedServer() as server:
        server.route("/", Reply(body=dripped_body, chunked=True, delay=0.1))
        server.route("/headers", Reply(body=dripped_head, delay=0.05, raw=True))
        server.route("/hop*", _hop)
        yield f"{server.url}/"


@pytest.mark.parametrize("is_async", [False, True])
async def test_an_http_tool_ends_within_its_timeout_against_a_dripping_body(
    drip: str, is_async: bool
) -> None:
    """Each byte arrives well within the read timeout: only a deadline on the whole response
    ends the call."""
    slow = HttpTool("t", url=drip, timeout=1.0)
    elapsed, result = await _timed(lambda: _execute(slow, is_async))
    assert (result.error_kind, result.text) == ("timeout", "Request to `t` timed out after 1s")
    assert elapsed < 1.0 + MARGIN


@pytest.mark.parametrize("path", ["headers", "hop0"], ids=["dripping headers", "slow redirects"])
@pytest.mark.parametrize("is_async", [False, True])
async def test_an_http_tool_ends_within_its_timeout_against_slow_headers_and_redirects(
    drip: str, path: str, is_async: bool
) -> None:
    """One deadline for the whole exchange: headers a byte at a time took 23 s under
    `timeout=1`, and redirects 0.8 s apart 4.8 s, when the deadline was checked only between
    the body's chunks."""
    clients: dict[str, Any] = {
        "http_client": httpx.Client(follow_redirects=True, max_redirects=50),
        "async_http_client": httpx.AsyncClient(follow_redirects=True, max_redirects=50),
    }
    # Redirects are followed only by a client that says so (`follow_redirects=True`).
    for injected in (False, True) if path == "headers" else (True,):
        slow = HttpTool("t", url=drip + path, timeout=1.0, **(clients if injected else {}))
        elapsed, result = await _timed(functools.partial(_execute, slow, is_async))
        assert (result.error_kind, result.text) == ("timeout", "Request to `t` timed out after 1s")
        assert elapsed < 1.0 + MARGIN, (injected, elapsed)


# --- MCP: slow calls, slow listings, listings too big to build in time -----------------------


def _mcp_server(
    list_tools: Callable[[Any, Any], Awaitable[ListToolsResult]],
    **options: Unpack[MCPServerOptions],
) -> MCPServer:
    """An MCP server on the SDK's own `Server` (in this process, over memory streams) whose
    tools sleep `GIVE_UP` seconds when called."""
    pytest.importorskip("mcp")

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        await anyio.sleep(GIVE_UP)
        return CallToolResult(content=[TextContent(type="text", text="late")])

    served = Server("slow", on_list_tools=list_tools, on_call_tool=call_tool)

    return in_memory(served, label="slow", **options)


def _listing(
    count: int, *, schema: dict[str, Any] | None = None, pause: float = 0.0, pages: int = 1
) -> Callable[[Any, Any], Awaitable[ListToolsResult]]:
    """`count` tools a page, `pages` pages (0: without end), each page after `pause` seconds."""
    listed = [Tool(name=f"t{i}", input_schema=schema or {"type": "object"}) for i in range(count)]

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        await anyio.sleep(pause)
        page = int(params.cursor) if params is not None and params.cursor else 0
        more = pages == 0 or page + 1 < pages
        renamed = [tool.model_copy(update={"name": f"{tool.name}_{page}"}) for tool in listed]
        return ListToolsResult(tools=renamed, next_cursor=str(page + 1) if more else None)

    return list_tools


HEAVY_SCHEMA = {
    "type": "object",
    "properties": {
        f"p{i}": {"type": "string", "pattern": "^[a-z]+$", "description": "a field"}
        for i in range(8)
    },
    "required": ["p0"],
    "additionalProperties": False,
}
"""Cheap to send, slow to build: each tool's schema is checked against the metaschema."""


async def _enter(server: MCPServer, is_async: bool) -> None:
    if is_async:
        await server.__aenter__()
    else:
        await asyncio.to_thread(server.__enter__)


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
@pytest.mark.parametrize("is_async", [False, True])
async def test_mcp_connect_ends_within_connect_timeout_while_building_the_tools(
    is_async: bool,
) -> None:
    """2,000 tools list in a fraction of the timeout and take many times it to build (20,000
    took 28 s under `connect_timeout=5` before building counted)."""
    listing = _listing(2000, schema=HEAVY_SCHEMA)
    server = _mcp_server(listing, max_tools=2000, connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within 1 seconds \(connect_timeout\)"):
        await _enter(server, is_async)
    assert time.monotonic() - started < 1.0 + MARGIN


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
@pytest.mark.parametrize("is_async", [False, True])
async def test_mcp_connect_ends_within_connect_timeout_against_a_dripping_listing(
    is_async: bool,
) -> None:
    """One tool every 0.1 s, page after page, never an end."""
    server = _mcp_server(_listing(1, pause=0.1, pages=0), connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within 1 seconds"):
        await _enter(server, is_async)
    assert time.monotonic() - started < 1.0 + MARGIN


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
@pytest.mark.parametrize("is_async", [False, True])
async def test_an_mcp_reconnection_ends_within_connect_timeout(is_async: bool) -> None:
    """The first connection is served; the second reaches a server that never answers."""
    served = Server("once", on_list_tools=_listing(1))
    attempts: list[int] = []

    async def connect(stack: contextlib.AsyncExitStack[Any]) -> tuple[Any, Any]:
        client, streams = await stack.enter_async_context(create_client_server_memory_streams())
        if not attempts:
            tasks = await stack.enter_async_context(anyio.create_task_group())
            tasks.start_soon(served.run, *streams, served.create_initialization_options())
            stack.callback(tasks.cancel_scope.cancel)
        attempts.append(1)
        return client

    server = MCPServer(connect, label="once", connect_timeout=1.0, timeout=GIVE_UP)
    await _enter(server, is_async)
    try:
        (t,) = server.tools()
        # However the loss is noticed (the stream ends, a call fails), the next call reconnects.
        server._connection.live.held.lost = "gone"  # type: ignore[union-attr]
        call = ToolCall(id="c1", name=t.name, arguments="{}")
        started = time.monotonic()
        if is_async:
            result = await t.aexecute(call, CONTEXT)
        else:
            result = await asyncio.to_thread(t.execute, call, CONTEXT)
        assert time.monotonic() - started < 1.0 + MARGIN
        assert len(attempts) == 2
        assert result.text.startswith(
            "Tool `t0_0` failed: the MCP server is gone and reconnecting failed (TimeoutError: "
        )
        assert "within 1 seconds (connect_timeout)); the next attempt is in 1 s" in result.text
    finally:
        if is_async:
            await server.aclose()
        else:
            await asyncio.to_thread(server.close)


def test_covers_every_surface() -> None:
    assert_registered(TOOL)
